//! What the store accepts as text: how long names and documents may be and
//! which characters they may hold, and how stored text is shown safely.
//!
//! The checks run where a write is composed, so every way in (the Rust API,
//! the CLI, manifests, plugins) meets the same rules. Text already stored is
//! never trusted to be printable: logs and tables show it through
//! [`escape`].
//!
//! | what | at most | may not hold |
//! |---|---|---|
//! | object name | 253 bytes | control characters; must not be empty |
//! | kind | 63 bytes | anything but ASCII letters, digits, `-` and `_`; must not be empty |
//! | group | 253 bytes | anything but ASCII letters, digits, `-`, `_` and `.` |
//! | finalizer, condition type, reason, event category | 253 bytes | control characters |
//! | condition or event message | 32 KiB | (control characters are escaped when shown) |
//! | spec, status, event detail | 1 MiB of canonical JSON | |
//! | nesting in a manifest (JSON or YAML) | 64 levels | |
//! | nesting in a document parsed by the library | 128 levels (serde_json's limit) | |

use std::borrow::Cow;

/// The largest spec, status or event detail, in bytes of canonical JSON.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// The longest object name, finalizer, condition type, reason or event
/// category, in bytes.
pub const MAX_NAME_BYTES: usize = 253;

/// The longest kind, in bytes.
pub const MAX_KIND_BYTES: usize = 63;

/// The longest group, in bytes.
pub const MAX_GROUP_BYTES: usize = 253;

/// The longest condition or event message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 32 << 10;

/// The deepest nesting of a JSON or YAML manifest.
pub const MAX_DEPTH: usize = 64;

/// Why `name` is not an acceptable object name, if it is not.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a name must not be empty".into());
    }
    if name.contains('/') {
        // `KIND/NAME` addresses an object: a name holding one could be
        // created and then never named again.
        return Some("a name must not hold '/' (`KIND/NAME` could not address it)".into());
    }
    label_problem("a name", name)
}

/// Why `text` is not an acceptable finalizer, condition type, reason or
/// category (`what` says which), if it is not. Empty text is the caller's
/// business.
pub fn label_problem(what: &str, text: &str) -> Option<String> {
    if text.len() > MAX_NAME_BYTES {
        return Some(format!(
            "{what} is {} bytes; at most {MAX_NAME_BYTES}",
            text.len()
        ));
    }
    if text.chars().any(is_unprintable) {
        return Some(format!(
            "{what} must not hold control characters or bidirectional overrides"
        ));
    }
    None
}

/// Why `kind` and `group` do not name a kind, if they do not.
pub fn kind_problem(group: &str, kind: &str) -> Option<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if kind.is_empty() {
        return Some("a kind must not be empty".into());
    }
    if kind.len() > MAX_KIND_BYTES {
        return Some(format!(
            "a kind is {} bytes; at most {MAX_KIND_BYTES}",
            kind.len()
        ));
    }
    if !kind.chars().all(word) {
        return Some(format!(
            "kind {:?} may hold only ASCII letters, digits, '-' and '_'",
            abbreviate(kind)
        ));
    }
    if group.len() > MAX_GROUP_BYTES {
        return Some(format!(
            "a group is {} bytes; at most {MAX_GROUP_BYTES}",
            group.len()
        ));
    }
    if !group.chars().all(|c| word(c) || c == '.') {
        return Some(format!(
            "group {:?} may hold only ASCII letters, digits, '-', '_' and '.'",
            abbreviate(group)
        ));
    }
    if !group.is_empty() && group.split('.').any(str::is_empty) {
        return Some(format!(
            "group {:?} has an empty label (a dot at an end, or two in a row)",
            abbreviate(group)
        ));
    }
    None
}

/// Why a message is not acceptable, if it is not.
pub fn message_problem(what: &str, text: &str) -> Option<String> {
    (text.len() > MAX_MESSAGE_BYTES).then(|| {
        format!(
            "{what} is {} bytes; at most {MAX_MESSAGE_BYTES}",
            text.len()
        )
    })
}

/// Why a document of `len` bytes is too large, if it is.
pub fn document_problem(len: usize) -> Option<String> {
    (len > MAX_DOCUMENT_BYTES)
        .then(|| format!("the document is {len} bytes; at most {MAX_DOCUMENT_BYTES}"))
}

/// Whether `c` must never reach a terminal raw: a control character, or a
/// bidirectional embedding, override or isolate (U+202A–U+202E,
/// U+2066–U+2069), which can make a name display as a different one.
pub fn is_unprintable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with control and bidi-override characters escaped (`\n`,
/// `\u{1b}`, `\u{202e}`), so stored or plugin-written text can never forge
/// a log line, move a terminal's cursor or display reversed.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unprintable) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unprintable(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` cut to at most `max` bytes at a character boundary, marked with
/// `…` when cut: for a message the host writes on a caller's behalf, which
/// must fit the limit rather than be refused.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let room = max.saturating_sub('…'.len_utf8());
    let cut = (0..=room)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    Cow::Owned(format!("{}…", &text[..cut]))
}

/// The first few dozen characters of `text`, escaped, for an error message.
pub(crate) fn abbreviate(text: &str) -> String {
    const KEEP: usize = 40;
    match text.char_indices().nth(KEEP) {
        Some((cut, _)) => format!("{}…", escape(&text[..cut])),
        None => escape(text).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_and_printable() {
        assert!(name_problem("web-1").is_none());
        assert!(name_problem("ünïcode ok").is_none());
        assert!(name_problem("").is_some());
        assert!(name_problem("a\nb").is_some());
        assert!(name_problem("team/ada").unwrap().contains("'/'"));
        assert!(name_problem(&"x".repeat(MAX_NAME_BYTES)).is_none());
        assert!(name_problem(&"x".repeat(MAX_NAME_BYTES + 1)).is_some());
    }

    #[test]
    fn kinds_and_groups_are_identifiers() {
        assert!(kind_problem("example.dev", "Greeting").is_none());
        assert!(kind_problem("", "Plain").is_none());
        assert!(kind_problem("example.dev", "").is_some());
        assert!(kind_problem("example.dev", "Bad\nKind").is_some());
        assert!(kind_problem("bad group", "Kind").is_some());
        for empty_label in ["a..write.dev", ".example.dev", "example.dev.", "."] {
            let problem = kind_problem(empty_label, "Kind").unwrap();
            assert!(problem.contains("empty label"), "{empty_label}: {problem}");
        }
        let huge = "g".repeat(200_000);
        let problem = kind_problem(&huge, "Kind").unwrap();
        assert!(problem.len() < 100, "{problem}");
    }

    #[test]
    fn escaping_leaves_no_control_character() {
        assert_eq!(escape("plain"), "plain");
        let forged = escape("ok\n2026-12-01 ERROR forged\x1b[2J");
        assert!(!forged.chars().any(char::is_control), "{forged}");
        assert!(forged.contains("\\n"));
    }

    #[test]
    fn bidi_overrides_are_refused_and_escaped() {
        for c in ['\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}'] {
            let name = format!("invoice{c}fdp.exe");
            assert!(name_problem(&name).is_some(), "{name:?}");
            assert!(!escape(&name).contains(c));
        }
        assert!(
            name_problem("café-\u{05d0}").is_none(),
            "plain RTL letters stay"
        );
    }

    #[test]
    fn clipping_respects_the_limit_and_characters() {
        assert_eq!(clip("short", 10), "short");
        let clipped = clip("ééééé", 6);
        assert!(clipped.len() <= 6, "{clipped}");
        assert!(clipped.ends_with('…'));
    }

    #[test]
    fn documents_have_a_ceiling() {
        assert!(document_problem(MAX_DOCUMENT_BYTES).is_none());
        assert!(document_problem(MAX_DOCUMENT_BYTES + 1).is_some());
    }
}
