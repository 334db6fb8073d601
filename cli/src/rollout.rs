//! `beehive rollout status|history KIND`: how far a kind's newest version
//! has reached its objects, and the versions it was served by.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::endpoint::Paths;
use crate::failure::{Code, Failure};
use crate::flags::Printed;
use crate::output::{columns, rfc3339};
use crate::protocol::{Reply, Request, RolloutView};

/// How often `rollout status --watch` asks again.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// The newest revision of `kind`: printed once, or with `watch` followed
/// until its rollout completes (a line each time it moves) or `timeout`
/// runs out. A rollout that completed with failed passes is an error.
pub(crate) async fn status(
    paths: &Paths,
    kind: String,
    watch: bool,
    timeout: Option<Duration>,
) -> Result<String, Failure> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut printed = None;
    loop {
        let (mut revisions, live, loading) = fetch(paths, &kind, false).await?;
        let newest = revisions
            .pop()
            .ok_or_else(|| Failure::from("the host answered with no revision"))?;
        let line = match loading {
            Some(file) => format!(
                "Waiting for the new version of {} to load ({file})",
                newest.kind
            ),
            None if newest.state != "rolling" => return finished(&newest),
            None => progress(&newest, live),
        };
        if !watch {
            return Ok(line + "\n");
        }
        if printed.as_ref() != Some(&line) {
            let mut stdout = std::io::stdout().lock();
            _ = writeln!(stdout, "{line}");
            _ = stdout.flush();
            printed = Some(line);
        }
        if let Some(deadline) = deadline
            && Instant::now() >= deadline
        {
            return Err(Failure::new(
                Code::Timeout,
                format!(
                    "timed out waiting for the rollout of {} to revision {}: {} of {} objects \
                     have had their pass",
                    newest.kind,
                    newest.revision,
                    newest.passed + newest.failed,
                    newest.objects
                ),
            ));
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Every revision the store keeps of `kind`, oldest first.
pub(crate) async fn history(
    paths: &Paths,
    kind: String,
    printed: Printed,
) -> Result<String, Failure> {
    let (revisions, _, _) = fetch(paths, &kind, true).await?;
    Ok(printed.show(&revisions, |revisions| table(revisions)))
}

async fn fetch(
    paths: &Paths,
    kind: &str,
    history: bool,
) -> Result<(Vec<RolloutView>, bool, Option<String>), Failure> {
    let request = Request::Rollout {
        kind: kind.to_string(),
        history,
    };
    match crate::commands::dispatch(paths, request).await? {
        Reply::Rollouts {
            revisions,
            live,
            loading,
        } => Ok((revisions, live, loading)),
        other => Err(crate::commands::unexpected(&other)),
    }
}

/// kubectl's waiting line, with what a stalled rollout needs.
fn progress(view: &RolloutView, live: bool) -> String {
    let mut line = format!(
        "Waiting for rollout of {} to revision {} to finish: {} of {} objects passed",
        view.kind, view.revision, view.passed, view.objects
    );
    if view.failed > 0 {
        line += &format!(", {} failed", view.failed);
    }
    if !live {
        line += " (nothing serves the kind now: the rollout resumes when a host serves its \
                  plugin again)";
    }
    line
}

fn finished(view: &RolloutView) -> Result<String, Failure> {
    let took = seconds_taken(view).map_or(String::new(), |s| format!(" in {s:.1} s"));
    let what = format!(
        "rollout of {} to revision {} ({})",
        view.kind,
        view.revision,
        version(view)
    );
    match (view.state.as_str(), view.failed) {
        ("superseded", _) => Err(Failure::conflict(format!(
            "{what} was superseded before it finished: `beehive rollout history {}` lists the \
             revisions",
            view.kind
        ))),
        (_, 0) => Ok(format!(
            "{what} complete{took}: {} objects passed\n",
            view.passed
        )),
        (_, failed) => Err(Failure::from(format!(
            "{what} complete{took}, but {failed} of {} objects failed their first pass on it: \
             `beehive get {} -o wide` shows which are failing now",
            view.passed + failed,
            view.kind
        ))),
    }
}

/// How long a finished rollout took, in seconds.
fn seconds_taken(view: &RolloutView) -> Option<f64> {
    let at = view.finished_at?;
    Some((at.as_millis() - view.started_at.as_millis()).max(0) as f64 / 1000.0)
}

/// A version as people compare them: the plugin hash's first 12 digits.
fn short_hash(view: &RolloutView) -> Option<&str> {
    view.content_hash.as_deref().map(|h| &h[..h.len().min(12)])
}

/// The file and short hash of a version.
fn version(view: &RolloutView) -> String {
    match short_hash(view) {
        Some(hash) => format!("{} {hash}", view.source),
        None => view.source.clone(),
    }
}

fn table(revisions: &[RolloutView]) -> String {
    let rows = revisions.iter().map(|r| {
        let took = seconds_taken(r).map_or("-".to_string(), |s| format!("{s:.1}s"));
        vec![
            r.revision.to_string(),
            r.state.clone(),
            rfc3339(r.started_at),
            took,
            r.objects.to_string(),
            r.passed.to_string(),
            r.failed.to_string(),
            short_hash(r).unwrap_or("-").to_string(),
            r.source.clone(),
        ]
    });
    columns(
        &[
            "REVISION", "STATE", "STARTED", "TOOK", "OBJECTS", "PASSED", "FAILED", "VERSION",
            "SOURCE",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use beehive::object::Timestamp;

    fn view(state: &str, passed: i64, failed: i64) -> RolloutView {
        RolloutView {
            kind: "Greeting.example.dev".into(),
            revision: 2,
            source: "plugins/greeting.wasm".into(),
            content_hash: Some("0123456789abcdef".into()),
            state: state.into(),
            started_at: Timestamp::from_millis(1_000),
            finished_at: (state != "rolling").then(|| Timestamp::from_millis(3_500)),
            objects: 10,
            passed,
            failed,
        }
    }

    #[test]
    fn a_rolling_revision_says_how_far_and_whether_anything_moves_it() {
        assert_eq!(
            progress(&view("rolling", 4, 1), true),
            "Waiting for rollout of Greeting.example.dev to revision 2 to finish: \
             4 of 10 objects passed, 1 failed"
        );
        assert!(progress(&view("rolling", 4, 0), false).contains("nothing serves the kind now"));
    }

    #[test]
    fn a_finished_rollout_succeeds_only_without_failed_first_passes() {
        let done = finished(&view("complete", 10, 0)).unwrap();
        assert!(
            done.contains("(plugins/greeting.wasm 0123456789ab) complete in 2.5 s"),
            "{done}"
        );
        let failed = finished(&view("complete", 8, 2)).unwrap_err();
        assert_eq!(failed.code, Code::Failure);
        assert!(
            failed.message.contains("2 of 10 objects failed"),
            "{}",
            failed.message
        );
        let superseded = finished(&view("superseded", 3, 0)).unwrap_err();
        assert_eq!(superseded.code, Code::Conflict);
    }
}
