//! `wait`: until an object is settled, holds a condition, or is gone.

use std::time::Duration;

use beehive::RawClient;

use super::kinds::resolve_kind;
use super::{Context, error, watching_client};
use crate::failure::Failure;
use crate::protocol::{Outcome, Reply, Until};

/// Whether `until` holds for `name` of the client's kind; an error for an
/// object that cannot be waited on.
pub fn holds(client: &RawClient, name: &str, until: &Until) -> Result<bool, Failure> {
    match client.get_by_name(name) {
        Ok(object) => Ok(holds_for(Some(&object), until)),
        Err(beehive::Error::NotFound { .. }) if *until == Until::Deleted => Ok(true),
        Err(e) => Err(error(e)),
    }
}

/// Whether `until` holds for the object as it is (`None`: gone).
pub(super) fn holds_for(object: Option<&beehive::RawObject>, until: &Until) -> bool {
    let Some(object) = object else {
        return *until == Until::Deleted;
    };
    match until {
        Until::Settled => object.meta.is_observed(),
        Until::Deleted => false,
        Until::Condition { type_, status } => object
            .meta
            .condition(type_)
            .is_some_and(|c| c.status.as_str().eq_ignore_ascii_case(status)),
        Until::JsonPath { path, value } => jsonpath_holds(object, path, value.as_deref()),
    }
}

/// Whether `path` finds something in `object` (that prints as `value`,
/// when given). A path that does not parse never holds: the command line
/// checked it before asking.
fn jsonpath_holds(object: &beehive::RawObject, path: &str, value: Option<&str>) -> bool {
    let Ok(path) = crate::jsonpath::Path::parse(path) else {
        return false;
    };
    let document = crate::output::for_people(&beehive::object::ObjectDocument::from(object));
    let found = path.find(&document);
    match value {
        None => found.iter().any(|v| !v.is_null()),
        Some(wanted) => {
            let shown: Vec<String> = found.into_iter().map(crate::jsonpath::show).collect();
            !shown.is_empty() && shown.join(" ") == wanted
        }
    }
}

/// Waits on a watch of the object: each change is checked as it arrives.
pub(super) async fn wait(
    ctx: &Context,
    kind: &str,
    name: &str,
    until: &Until,
    timeout: Duration,
) -> Outcome {
    use futures_util::StreamExt;
    let done = || {
        Ok(Reply::Done {
            message: format!("{kind}/{name}: {}", describe_until(until)),
        })
    };
    let client = watching_client(ctx, resolve_kind(&ctx.store, kind)?);
    let id = match client.get_by_name(name) {
        Ok(object) => object.meta.id,
        Err(beehive::Error::NotFound { .. }) if *until == Until::Deleted => return done(),
        Err(e) => return Err(error(e)),
    };
    let mut stream = client
        .watch(id, beehive::client::WatchOptions::new())
        .map_err(error)?;
    if holds_for(stream.snapshot.as_ref(), until) {
        return done();
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let change = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(change))) => change,
            Ok(Some(Err(e))) => return Err(error(e)),
            Ok(None) => return Err("the host stopped".into()),
            Err(_) => {
                return Err(Failure::timeout(format!(
                    "timed out after {} waiting until {kind}/{name} is {}",
                    humantime::format_duration(timeout),
                    describe_until(until)
                )));
            }
        };
        let now = match change.change {
            beehive::client::ChangeType::Deleted => None,
            _ => change.object.as_ref(),
        };
        if holds_for(now, until) {
            return done();
        }
        if now.is_none() {
            return Err(format!(
                "{kind}/{name} was deleted before it was {}",
                describe_until(until)
            )
            .into());
        }
    }
}

/// What `until` reads as in a sentence.
pub fn describe_until(until: &Until) -> String {
    match until {
        Until::Settled => "settled".into(),
        Until::Deleted => "deleted".into(),
        Until::Condition { type_, status } => format!("{type_}={status}"),
        Until::JsonPath { path, value: None } => format!("with {{{path}}} set"),
        Until::JsonPath {
            path,
            value: Some(value),
        } => format!("{{{path}}}={value}"),
    }
}
