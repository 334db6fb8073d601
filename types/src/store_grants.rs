//! What a plugin may do inside the store, beyond its own kind: the `[store]`
//! section of its policy file, checked by the host before every store call a
//! plugin makes, and by the guest SDKs' fake clients in a plugin's own tests.
//!
//! Two verbs: `read` (get, list, the owner, dependencies, dependents, owned
//! objects and events of an object, depending on one, naming one as owner)
//! and `write` (create, update, delete; a writer reads what it writes, so
//! `write` includes `read`). A plugin's own kind is always read-write.
//!
//! A kind pattern is one of:
//! - `Kind.group`: that kind (`Kind` alone for the core group);
//! - `*.group`: every kind of `group`;
//! - `*.*.suffix`: every kind of every group ending in `.suffix`;
//! - `*`: every kind.

use std::fmt;
use std::str::FromStr;

use crate::GroupKind;

/// What a store call does to the kind it touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreVerb {
    /// Get, list, follow edges, read events; depend on or own-from.
    Read,
    /// Create, update, delete.
    Write,
}

impl StoreVerb {
    /// The verb as policy files and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreVerb::Read => "read",
            StoreVerb::Write => "write",
        }
    }
}

impl fmt::Display for StoreVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StoreVerb {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "read" => Ok(StoreVerb::Read),
            "write" => Ok(StoreVerb::Write),
            other => Err(format!("{other:?} is not a store verb (read, write)")),
        }
    }
}

/// Which kinds one grant names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KindPattern {
    /// Every kind.
    Any,
    /// Every kind of one group.
    Group(String),
    /// Every kind of every group ending in `.` and this suffix.
    GroupsUnder(String),
    /// One kind.
    Exact(GroupKind),
}

impl KindPattern {
    /// Whether `kind` is one this pattern names.
    pub fn matches(&self, kind: &GroupKind) -> bool {
        match self {
            KindPattern::Any => true,
            KindPattern::Group(group) => kind.group == *group,
            KindPattern::GroupsUnder(suffix) => kind
                .group
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
            KindPattern::Exact(exact) => kind == exact,
        }
    }
}

impl FromStr for KindPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "*" {
            return Ok(KindPattern::Any);
        }
        let (kind, group) = text.split_once('.').unwrap_or((text, ""));
        let word = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        let group_ok = |g: &str| g.split('.').all(word);
        let refused = || {
            format!(
                "{text:?} is not a kind pattern: write Kind.group, *.group (every kind of a group), \
                 *.*.suffix (every group under suffix) or * (every kind)"
            )
        };
        match (kind, group.strip_prefix("*.")) {
            ("*", Some(suffix)) if group_ok(suffix) => Ok(KindPattern::GroupsUnder(suffix.into())),
            ("*", None) if group_ok(group) => Ok(KindPattern::Group(group.into())),
            (kind, None) if word(kind) && (group.is_empty() || group_ok(group)) => {
                Ok(KindPattern::Exact(GroupKind::new(group, kind)))
            }
            _ => Err(refused()),
        }
    }
}

impl fmt::Display for KindPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KindPattern::Any => f.write_str("*"),
            KindPattern::Group(group) => write!(f, "*.{group}"),
            KindPattern::GroupsUnder(suffix) => write!(f, "*.*.{suffix}"),
            KindPattern::Exact(kind) => write!(f, "{kind}"),
        }
    }
}

/// The kinds a plugin may read and write besides its own. The default
/// grants nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreGrants {
    /// Kinds it may read.
    pub read: Vec<KindPattern>,
    /// Kinds it may read and write.
    pub write: Vec<KindPattern>,
}

impl StoreGrants {
    /// Grants that allow every call on every kind.
    pub fn everything() -> StoreGrants {
        StoreGrants {
            read: Vec::new(),
            write: vec![KindPattern::Any],
        }
    }

    /// Whether a plugin whose own kind is `own` may `verb` objects of `kind`.
    pub fn allows(&self, own: &GroupKind, kind: &GroupKind, verb: StoreVerb) -> bool {
        if own == kind || self.write.iter().any(|p| p.matches(kind)) {
            return true;
        }
        verb == StoreVerb::Read && self.read.iter().any(|p| p.matches(kind))
    }

    /// The grants as `verb:pattern` lines, writes first.
    pub fn describe(&self) -> Vec<String> {
        let writes = self.write.iter().map(|p| format!("write:{p}"));
        let reads = self.read.iter().map(|p| format!("read:{p}"));
        writes.chain(reads).collect()
    }
}

/// How a denial's message starts. Contract 0.1 carries it in the `other`
/// case of its `error` variant (frozen; see the store-grants ADR), 0.2 in
/// `not-granted`; the SDKs parse the kind and verb back from it.
pub const NOT_GRANTED_PREFIX: &str = "not granted: ";

/// The message of a denial of `verb` on `kind`.
pub fn not_granted_message(kind: &GroupKind, verb: StoreVerb) -> String {
    format!(
        "{NOT_GRANTED_PREFIX}{verb} on {kind} (the plugin's policy has no [store] grant for it: \
         add `{verb} = ['{kind}']` under [store] in the policy file beside the plugin, \
         NAME.toml for NAME.wasm)"
    )
}

/// The kind and verb of a denial's message, if `message` is one.
pub fn parse_not_granted(message: &str) -> Option<(GroupKind, StoreVerb)> {
    let rest = message.strip_prefix(NOT_GRANTED_PREFIX)?;
    let (verb, rest) = rest.split_once(" on ")?;
    let kind = rest.split(' ').next()?;
    let (name, group) = kind.split_once('.').unwrap_or((kind, ""));
    Some((GroupKind::new(group, name), verb.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> GroupKind {
        let (name, group) = text.split_once('.').unwrap_or((text, ""));
        GroupKind::new(group, name)
    }

    #[test]
    fn patterns_name_one_kind_a_group_groups_under_a_suffix_or_everything() {
        let cases = [
            ("Greeting.example.dev", "Greeting.example.dev", true),
            ("Greeting.example.dev", "Other.example.dev", false),
            ("*.example.dev", "Other.example.dev", true),
            ("*.example.dev", "Other.sub.example.dev", false),
            ("*.*.example.dev", "Other.sub.example.dev", true),
            ("*.*.example.dev", "Other.example.dev", false),
            ("*.*.example.dev", "Other.badexample.dev", false),
            ("*", "Anything.at.all", true),
            ("Cluster", "Cluster", true),
            ("Cluster", "Cluster.example.dev", false),
        ];
        for (pattern, candidate, expected) in cases {
            let parsed: KindPattern = pattern.parse().unwrap();
            assert_eq!(parsed.to_string(), pattern);
            assert_eq!(
                parsed.matches(&kind(candidate)),
                expected,
                "{pattern} {candidate}"
            );
        }
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "**",
            "Greet*.example.dev",
            "*.exa*mple.dev",
            "Greeting..dev",
            "*.",
            "*.*",
            "Greeting.*",
            "Greeting.*.dev",
            "a b.dev",
        ] {
            assert!(bad.parse::<KindPattern>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_own_kind_is_read_write_write_includes_read_and_nothing_else_is_granted() {
        let own = kind("Set.example.dev");
        let grants = StoreGrants {
            read: vec!["Config.example.dev".parse().unwrap()],
            write: vec!["Greeting.example.dev".parse().unwrap()],
        };
        let allows = |k: &str, verb| grants.allows(&own, &kind(k), verb);
        assert!(allows("Set.example.dev", StoreVerb::Write));
        assert!(allows("Greeting.example.dev", StoreVerb::Write));
        assert!(allows("Greeting.example.dev", StoreVerb::Read));
        assert!(allows("Config.example.dev", StoreVerb::Read));
        assert!(!allows("Config.example.dev", StoreVerb::Write));
        assert!(!allows("Secret.example.dev", StoreVerb::Read));
        assert!(!StoreGrants::default().allows(
            &own,
            &kind("Greeting.example.dev"),
            StoreVerb::Read
        ));
    }

    #[test]
    fn a_denial_message_names_its_kind_and_verb_and_reads_back() {
        let message = not_granted_message(&kind("Greeting.example.dev"), StoreVerb::Write);
        assert!(
            message.starts_with("not granted: write on Greeting.example.dev"),
            "{message}"
        );
        assert_eq!(
            parse_not_granted(&message),
            Some((kind("Greeting.example.dev"), StoreVerb::Write))
        );
        assert_eq!(parse_not_granted("something else"), None);
    }
}
