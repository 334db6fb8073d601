//! Naming kinds: the kinds a store knows, a kind as a command writes it
//! (`greetings`, `Greeting.example.dev`) resolved against them, and the
//! wait for a starting host's plugins to register theirs.

use std::sync::Arc;
use std::time::Duration;

use beehive::plugin::Directory;
use beehive::{GroupKind, Store};

use super::{Context, error};
use crate::failure::{Code, Failure};
use crate::manifest::Manifest;

/// The kinds the store knows, and each manifest's kind resolved against
/// them.
pub(super) fn kinds_of(
    ctx: &Context,
    manifests: &[Manifest],
    new_kinds: bool,
) -> Result<(Kinds, Vec<GroupKind>), Failure> {
    let known = if new_kinds {
        // A store that cannot list its kinds leaves every kind as written.
        Kinds::load(&ctx.store).unwrap_or_default()
    } else {
        Kinds::load(&ctx.store)?
    };
    let kinds = manifests
        .iter()
        .map(|m| known.for_apply(&m.kind_text(), new_kinds))
        .collect::<Result<Vec<GroupKind>, Failure>>()?;
    Ok((known, kinds))
}

/// The longest an apply waits for the host's first plugin load (the
/// default of `plugins --wait`); the client's own request timeout (30 s by
/// default) usually ends the wait first.
pub(super) const STARTUP_WAIT: Duration = Duration::from_secs(300);

/// Whether this process runs a host whose plugin directory has not been
/// loaded once yet, or is loading a file now. (Not `ctx.started`: that
/// also waits for the manifest directory, which is applied through here.)
pub(super) fn still_starting(ctx: &Context) -> bool {
    let loading = |d: &Arc<Directory>| !d.synced() || !d.loading().is_empty();
    ctx.host.is_some() && ctx.plugins.as_ref().is_some_and(loading)
}

/// Waits, up to [`STARTUP_WAIT`], until the host is no longer starting.
pub(super) async fn until_started(ctx: &Context) {
    let deadline = tokio::time::Instant::now() + STARTUP_WAIT;
    while still_starting(ctx) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An unknown kind while the host is still loading plugins may be one of
/// theirs: the failure says so, and how to wait.
pub(super) fn while_starting(ctx: &Context, failure: Failure) -> Failure {
    let started = ctx.started.load(std::sync::atomic::Ordering::SeqCst);
    let loading: Vec<String> = ctx.plugins.as_ref().map_or_else(Vec::new, |d| {
        d.loading()
            .iter()
            .map(|l| l.path.display().to_string())
            .collect()
    });
    if failure.code != Code::NotFound || ctx.host.is_none() || (started && loading.is_empty()) {
        return failure;
    }
    let which = match loading.is_empty() {
        true => String::new(),
        false => format!(" ({})", loading.join(", ")),
    };
    Failure::not_found(format!(
        "{}; the host is still loading plugins{which}: `beehive plugins --wait` waits until it has",
        failure.message
    ))
}

/// Resolves `Kind` or `Kind.group` against the kinds that exist. `Kind`
/// alone names the core group, or the one group that has such a kind.
pub fn resolve_kind(store: &Store, text: &str) -> Result<GroupKind, Failure> {
    Kinds::load(store)?.resolve(text)
}

/// Whether `kind` (and `group`, unless empty) name `known`, ignoring case
/// and accepting the kind's plural (`greetings`, `classes`).
pub(super) fn names_kind(known: &GroupKind, kind: &str, group: &str) -> bool {
    let group_fits = group.is_empty() || known.group.eq_ignore_ascii_case(group);
    let plural = if known.kind.ends_with('s') {
        format!("{}es", known.kind)
    } else {
        format!("{}s", known.kind)
    };
    group_fits && (known.kind.eq_ignore_ascii_case(kind) || plural.eq_ignore_ascii_case(kind))
}

/// The kinds that exist, read once for a whole request: an `apply` of many
/// objects resolves each one's kind against this, not against the store.
#[derive(Default)]
pub(super) struct Kinds(Vec<GroupKind>);

impl Kinds {
    pub(super) fn load(store: &Store) -> Result<Kinds, Failure> {
        store.kinds().map(Kinds).map_err(error)
    }

    /// As [`resolve_kind`].
    pub(super) fn resolve(&self, text: &str) -> Result<GroupKind, Failure> {
        let (kind, group) = text.split_once('.').unwrap_or((text, ""));
        if kind.is_empty() {
            return Err(format!("invalid kind {text:?}: write Kind or Kind.group").into());
        }
        let known = &self.0;
        let wanted = GroupKind::new(group, kind);
        if known.contains(&wanted) {
            return Ok(wanted);
        }
        // Then as kubectl matches a resource: any case, singular or plural,
        // with or without the group, as long as one kind fits.
        let same_name: Vec<&GroupKind> = known
            .iter()
            .filter(|k| names_kind(k, kind, group))
            .collect();
        match same_name.as_slice() {
            [only] => return Ok((*only).clone()),
            [] => {}
            several => {
                let names: Vec<String> = several.iter().map(|k| k.to_string()).collect();
                return Err(format!(
                    "kind {text} is ambiguous: write one of {}",
                    names.join(", ")
                )
                .into());
            }
        }
        let names: Vec<String> = known.iter().map(ToString::to_string).collect();
        let listing = if names.is_empty() {
            "there are no kinds yet".to_string()
        } else {
            format!("known kinds: {}", names.join(", "))
        };
        Err(Failure::not_found(format!(
            "unknown kind {text}: {listing}"
        )))
    }

    /// The kind an applied object of kind `text` gets: an existing one, or,
    /// when `new_kinds` allows it, a new kind exactly as written.
    pub(super) fn for_apply(&self, text: &str, new_kinds: bool) -> Result<GroupKind, Failure> {
        if new_kinds {
            return Ok(self.as_written(text));
        }
        self.resolve(text).map_err(|failure| match failure.code {
            Code::NotFound => Failure::not_found(format!(
                "{}; a plugin's kind is known once a host has served it, and \
                 `apply --new-kind` creates a kind that no plugin serves",
                failure.message
            )),
            _ => failure,
        })
    }

    /// The kind `text` names: an existing one if it resolves, otherwise a
    /// new kind exactly as written (kinds are open).
    pub(super) fn as_written(&self, text: &str) -> GroupKind {
        self.resolve(text).unwrap_or_else(|_| {
            let (kind, group) = text.split_once('.').unwrap_or((text, ""));
            GroupKind::new(group, kind)
        })
    }
}
