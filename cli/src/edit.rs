//! `beehive edit KIND/NAME`: the object's spec in the user's editor, as
//! YAML, written back when saved, as `kubectl edit` does.
//!
//! The file opens as `kind`, `name` and `spec`; only the spec may change.
//! Saving writes it back through the same checks as any write. A refusal
//! the user can fix (YAML that does not parse, a spec its schema or plugin
//! refuses) reopens the file with the error on top as comments; saving it
//! unchanged then gives up with that error. A spec another write changed
//! meanwhile is never overwritten: the command fails (exit 4) and says
//! where the edit was kept. Saving the file as it opened, or empty, changes
//! nothing.
//!
//! The adversary is the editor's output, which the user controls anyway:
//! it is read with a size bound and parsed like a manifest. The file is the
//! user's own, created owner-only and removed once the edit is written.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::endpoint::Paths;
use crate::failure::{Code, Failure};
use crate::flags::Named;
use crate::protocol::{Reply, Request};

/// The largest file read back from the editor.
const MAX_EDITED_BYTES: u64 = 4 << 20;

/// How many times a refused edit reopens before the command gives up: an
/// editor that is a script (or a person) who keeps saving something
/// refused would otherwise go round for ever.
const MAX_REOPENS: usize = 10;

/// What the file opens with, above the object.
const HEADER: &str = "\
# Edit the spec below and save to write it back; kind and name are fixed.
# Lines starting with '#' are ignored. Saving it as it is, or empty,
# changes nothing.
";

/// The editable part of an object, as the file shows it.
#[derive(Serialize)]
struct Editable<'o> {
    kind: &'o str,
    name: &'o str,
    spec: &'o serde_json::Value,
}

/// Edits the object `named`: see the module's description.
pub async fn edit(paths: &Paths, Named { kind, name }: Named) -> Result<String, Failure> {
    let request = Request::Get {
        kind: kind.clone(),
        name: Some(name.clone()),
        spec_version: None,
        selector: None,
    };
    let object = match crate::commands::dispatch(paths, request).await? {
        Reply::Objects { objects } => objects
            .into_iter()
            .next()
            .ok_or_else(|| Failure::not_found(format!("{kind}/{name} not found")))?,
        other => return Err(crate::commands::unexpected(&other)),
    };
    let meta = &object.document.meta;
    let kind_name = meta.group_kind.to_string();
    let spec = &object.document.spec;
    let opened = Editable {
        kind: &kind_name,
        name: &meta.name,
        spec,
    };
    let body = serde_norway::to_string(&opened).map_err(|e| e.to_string())?;
    let file = EditFile::create(&meta.name)?;
    let mut text = format!("{HEADER}{body}");
    let mut refused: Option<Failure> = None;
    let cancelled = || Ok("Edit cancelled, no changes made.\n".to_string());
    for _ in 0..=MAX_REOPENS {
        file.write(&text)?;
        run_editor(file.path()).await?;
        let saved = file.read()?;
        if saved == text {
            return match refused {
                // Saved as it reopened: the user gives up on the edit.
                Some(failure) => Err(file.keep(failure)),
                None => file.remove_then(cancelled()),
            };
        }
        let new_spec = match read_spec(&saved, &kind_name, &meta.name) {
            Ok(None) => return file.remove_then(cancelled()),
            Ok(Some(new_spec)) if new_spec == *spec => return file.remove_then(cancelled()),
            Ok(Some(new_spec)) => new_spec,
            Err(why) => {
                text = with_error(&saved, &why);
                refused = Some(Failure::new(Code::Invalid, why));
                continue;
            }
        };
        let request = Request::ReplaceSpec {
            kind: kind_name.clone(),
            name: meta.name.clone(),
            generation: meta.generation,
            spec: new_spec.to_string(),
        };
        match crate::commands::dispatch(paths, request).await {
            Ok(Reply::Done { message }) => return file.remove_then(Ok(message + "\n")),
            Ok(other) => return Err(file.keep(crate::commands::unexpected(&other))),
            Err(failure) if failure.code == Code::Invalid => {
                text = with_error(&saved, &failure.message);
                refused = Some(failure);
            }
            Err(failure) => return Err(file.keep(failure)),
        }
    }
    let failure = refused.unwrap_or_else(|| Failure::from("the edit was refused"));
    Err(file.keep(Failure::new(
        failure.code,
        format!(
            "{} (refused {} times: giving up)",
            failure.message,
            MAX_REOPENS + 1
        ),
    )))
}

/// The spec in the saved text, or `None` for an emptied file; an error
/// naming what is wrong when it does not parse, or changes more than the
/// spec.
fn read_spec(saved: &str, kind: &str, name: &str) -> Result<Option<serde_json::Value>, String> {
    let blank = saved
        .lines()
        .all(|line| line.trim().is_empty() || line.trim_start().starts_with('#'));
    if blank {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_norway::from_str(saved).map_err(|e| format!("the YAML does not parse: {e}"))?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err("the file must hold kind, name and spec".into());
    };
    let same =
        |field: &str, wanted: &str| fields.get(field).and_then(|v| v.as_str()) == Some(wanted);
    if !same("kind", kind) || !same("name", name) {
        return Err(format!(
            "kind and name are fixed: keep kind: {kind} and name: {name}"
        ));
    }
    let spec = fields.remove("spec").ok_or("the spec is missing")?;
    fields.retain(|key, _| key != "kind" && key != "name");
    match fields.keys().next() {
        Some(other) => Err(format!("only the spec can be edited here, not {other}")),
        None => Ok(Some(spec)),
    }
}

/// `saved` with `error` on top as comments, replacing an earlier error.
fn with_error(saved: &str, error: &str) -> String {
    let mut text = String::new();
    for line in error.lines() {
        text.push_str(&format!("# error: {line}\n"));
    }
    let rest = saved
        .lines()
        .skip_while(|line| line.starts_with("# error: "))
        .collect::<Vec<_>>()
        .join("\n");
    text + &rest + "\n"
}

/// Runs `$VISUAL`, else `$EDITOR`, else `vi` on `file`, through the shell
/// so an editor given with arguments (`code --wait`) works.
async fn run_editor(file: &Path) -> Result<(), Failure> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let file = file.to_path_buf();
    let shown = editor.clone();
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("beehive-edit")
            .arg(&file)
            .status()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("cannot run the editor {shown:?}: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(Failure::from(format!(
            "the editor {shown:?} failed ({status}): nothing was written"
        ))),
    }
}

/// The file being edited: made owner-only under a fresh name, removed
/// once its edit is written, kept (and named) when the edit fails.
struct EditFile {
    path: PathBuf,
}

impl EditFile {
    fn create(name: &str) -> Result<EditFile, Failure> {
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(64)
            .collect();
        for attempt in 0..100u32 {
            let path = std::env::temp_dir().join(format!(
                "beehive-edit-{}-{attempt}-{safe}.yaml",
                std::process::id()
            ));
            let made = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match made {
                Ok(_) => return Ok(EditFile { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot make a file to edit in: {e}").into()),
            }
        }
        Err("cannot make a file to edit in: every name is taken".into())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, text: &str) -> Result<(), Failure> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        file.write_all(text.as_bytes())
            .map_err(|e| Failure::from(format!("{}: {e}", self.path.display())))
    }

    fn read(&self) -> Result<String, Failure> {
        let shown = |e: &dyn std::fmt::Display| format!("{}: {e}", self.path.display());
        let mut bytes = Vec::new();
        std::fs::File::open(&self.path)
            .and_then(|f| f.take(MAX_EDITED_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| shown(&e))?;
        if bytes.len() as u64 > MAX_EDITED_BYTES {
            return Err(shown(&format!("larger than {MAX_EDITED_BYTES} bytes")).into());
        }
        String::from_utf8(bytes)
            .map_err(|_| Failure::from(format!("{}: not UTF-8", self.path.display())))
    }

    /// Removes the file, its edit written or cancelled; then `outcome`.
    fn remove_then<T>(&self, outcome: T) -> T {
        let _ = std::fs::remove_file(&self.path);
        outcome
    }

    /// `failure`, saying where the edit is kept.
    fn keep(&self, failure: Failure) -> Failure {
        Failure::new(
            failure.code,
            format!(
                "{}; your edit is kept in {}",
                failure.message,
                self.path.display()
            ),
        )
    }
}
