//! Text made safe for a page, and the page around it.
//!
//! The adversary is whoever wrote what the page shows: a plugin's
//! condition message, a manifest's name or spec. Everything written into
//! a page goes through [`text`], which escapes HTML's five specials and
//! shows each bidirectional override and control character as a visible
//! `\u{…}` escape, so `<script>` is shown, never run, and a right-to-left
//! override cannot reorder what an operator reads. The only script a page
//! loads is the host's own `/console.js`, and the policy the server sends
//! forbids any other.

use std::fmt::Write;

/// The style sheet every page links, served at `/console.css`.
pub const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}\
header{background:#1d2430;color:#fff;padding:10px 20px}header a{color:#fff;text-decoration:none;font-weight:600}\
main{padding:16px 20px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:20px 0 8px}\
table{border-collapse:collapse;background:#fff;min-width:40%}\
th,td{border:1px solid #d8dce3;padding:4px 8px;text-align:left;vertical-align:top}\
th{background:#eef0f4}td.n{text-align:right}\
.bad{color:#b3261e;font-weight:600}.ok{color:#1b7f3b}.muted{color:#6b7280}\
pre{background:#fff;border:1px solid #d8dce3;padding:8px;overflow:auto;max-height:400px}\
nav a{margin-right:12px}";

/// `value` as page text: HTML's specials escaped, bidirectional controls
/// and other control characters (a tab and a newline aside) shown as
/// `\u{…}`.
pub fn text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Characters that change how the text around them reads, or print
/// nothing: controls, bidirectional embeddings, overrides and isolates,
/// the direction marks, and zero-width joiners and spaces.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
        )
}

/// `value` for a URL's path segment: everything but unreserved characters
/// percent-encoded.
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// A path segment with its `%XX` escapes decoded; `None` when they do not
/// decode to UTF-8.
pub fn decode_segment(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A whole page: `title` (text, escaped here) around `body` (markup the
/// caller built with [`text`]).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>{title} · beehive</title><link rel=\"stylesheet\" href=\"/console.css\">\
<script src=\"/console.js\" defer></script></head>\
<body><header><a href=\"/\">beehive</a></header><main><h1>{title}</h1>{body}</main></body></html>",
        title = text(title),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_hidden_characters_are_shown_as_text() {
        assert_eq!(
            text("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(text("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(text("a\u{0}b\u{2066}c"), "a\\u{0}b\\u{2066}c");
        assert_eq!(text("line\nnext"), "line\nnext");
    }

    #[test]
    fn segments_round_trip_and_bad_escapes_are_refused() {
        for value in ["web", "a b/c?d#e", "ünï", "%41"] {
            let encoded = segment(value);
            assert!(!encoded.contains(['/', '?', '#', ' ']), "{encoded}");
            assert_eq!(decode_segment(&encoded).as_deref(), Some(value));
        }
        assert_eq!(decode_segment("%zz"), None);
        assert_eq!(decode_segment("%ff"), None);
    }
}
