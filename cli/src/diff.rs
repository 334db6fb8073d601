//! `beehive diff -f FILE`: what applying a file would change, as kubectl's
//! diff shows it. The file is applied as a dry run (every check an apply
//! makes, nothing written), and each object's labels and spec as stored
//! are compared, as YAML, with what the apply would leave.

use std::path::Path;

use crate::endpoint::Paths;
use crate::failure::{Code, Failure};
use crate::manifest;
use crate::protocol::{Compared, Reply, Request};

/// The most lines a document may have for a line-by-line diff; past it
/// (the table it takes grows with the product of both sides), the whole
/// document is shown removed and added.
const MOST_LINES: usize = 2_000;

/// Prints the diff of each object the file would change; exits 1 (with no
/// error line) when there is one, 0 when nothing would change.
pub(crate) async fn diff(paths: &Paths, file: &Path) -> Result<String, Failure> {
    let request = Request::Apply {
        objects: manifest::load(file)?,
        new_kinds: false,
        force_conflicts: false,
        dry_run: true,
        trace: None,
    };
    let results = match crate::commands::dispatch(paths, request).await? {
        Reply::Applied {
            results, warnings, ..
        } => {
            for warning in warnings {
                eprintln!("warning: {warning}");
            }
            results
        }
        other => return Err(crate::commands::unexpected(&other)),
    };
    let mut printed = String::new();
    for result in results {
        let object = format!("{}/{}", result.kind, result.name);
        let before = result.before.as_ref().map(as_yaml).unwrap_or_default();
        let after = result.after.as_ref().map(as_yaml).unwrap_or_default();
        if before != after {
            printed += &unified(&object, &before, &after);
        }
    }
    if printed.is_empty() {
        return Ok(String::new());
    }
    print!("{printed}");
    Err(Failure::new(Code::Failure, ""))
}

fn as_yaml(compared: &Compared) -> String {
    crate::output::yaml(compared)
}

/// A unified diff of `before` and `after`, in one hunk that spans both.
fn unified(object: &str, before: &str, after: &str) -> String {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let mut out = format!(
        "--- live/{object}\n+++ merged/{object}\n@@ -{} +{} @@\n",
        span(old.len()),
        span(new.len())
    );
    for (mark, line) in edits(&old, &new) {
        out.push(mark);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A hunk's range: `1,N`, or `0,0` for nothing.
fn span(lines: usize) -> String {
    match lines {
        0 => "0,0".into(),
        n => format!("1,{n}"),
    }
}

/// The lines of both sides in order, each marked ` ` (in both), `-` (only
/// in `old`) or `+` (only in `new`), by their longest common subsequence.
fn edits<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(char, &'a str)> {
    if old.len() > MOST_LINES || new.len() > MOST_LINES {
        let removed = old.iter().map(|l| ('-', *l));
        return removed.chain(new.iter().map(|l| ('+', *l))).collect();
    }
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] = match old[i] == new[j] {
                true => common[i + 1][j + 1] + 1,
                false => common[i + 1][j].max(common[i][j + 1]),
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            out.push((' ', old[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < old.len() && (j == new.len() || common[i + 1][j] >= common[i][j + 1]) {
            // Removals first, as diff(1) prints a changed line.
            out.push(('-', old[i]));
            i += 1;
        } else {
            out.push(('+', new[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_removed_then_added_among_the_kept_ones() {
        let diff = unified(
            "Greeting/a",
            "labels:\n  tier: web\nspec:\n  name: A\n",
            "spec:\n  name: B\n",
        );
        assert_eq!(
            diff,
            "--- live/Greeting/a\n+++ merged/Greeting/a\n@@ -1,4 +1,2 @@\n\
             -labels:\n-  tier: web\n spec:\n-  name: A\n+  name: B\n"
        );
    }

    #[test]
    fn an_object_to_be_created_is_all_additions() {
        let diff = unified("Greeting/b", "", "spec:\n  name: B\n");
        assert!(
            diff.contains("@@ -0,0 +1,2 @@\n+spec:\n+  name: B\n"),
            "{diff}"
        );
    }
}
