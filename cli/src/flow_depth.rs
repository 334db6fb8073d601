//! How deeply a YAML text nests its flow collections (`[...]`, `{...}`),
//! found in one pass before the YAML parser sees the text.
//!
//! The parser's time grows with the flow depth times the tokens (it checks
//! every open level at each token), so a file of a few hundred kilobytes of
//! `[` keeps it busy for minutes before its own recursion limit refuses it.
//! This scan is linear and reads the text as the parser does where it
//! matters: a bracket is a flow indicator only where a node may begin or
//! inside a flow collection, never inside a plain scalar of block context
//! (`x: a[[`), a quoted scalar, a comment or a block scalar; a quote opens a
//! quoted scalar only where a node may begin (`note: it's` holds none).
//! Anything it cannot tell apart it counts as nesting, so it may count too
//! deep (the caller's limit leaves room), never too shallow.

/// Where the scan is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Where a node may begin: a quote opens a quoted scalar, a bracket a
    /// flow collection.
    NodeStart,
    /// Inside a plain scalar.
    Plain,
    /// Inside an anchor, alias or tag (`&a`, `*a`, `!t`): after it, a node
    /// may still begin.
    Property,
    /// Just after a quoted scalar: a `:` here needs no space after it.
    AfterQuoted,
    /// Inside a single-quoted scalar.
    Single,
    /// Inside a double-quoted scalar.
    Double,
    /// Inside a comment, to the end of the line.
    Comment,
}

/// The byte where `text`'s flow nesting first goes past `limit` levels, if
/// it does (the scan stops there).
pub fn flow_depth_beyond(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut state = State::NodeStart;
    let mut escaped = false;
    // While in a block scalar (`|` or `>`): the indentation its header
    // line had; lines indented deeper are its content.
    let mut block_scalar: Option<usize> = None;
    let mut header_indent: Option<usize> = None;
    let mut at = 0;
    while at < bytes.len() {
        if at == 0 || bytes[at - 1] == b'\n' {
            let indent = bytes[at..].iter().take_while(|b| **b == b' ').count();
            let blank = matches!(bytes.get(at + indent), None | Some(b'\n' | b'\r'));
            if let Some(header) = block_scalar {
                if blank || indent > header {
                    at = skip_line(bytes, at);
                    continue;
                }
                block_scalar = None;
            }
            header_indent = Some(indent);
            if depth == 0 && !matches!(state, State::Single | State::Double) {
                state = State::NodeStart;
            }
        }
        let c = bytes[at];
        let next = bytes.get(at + 1).copied();
        let spaced = |b: Option<u8>| matches!(b, None | Some(b' ' | b'\t' | b'\n' | b'\r'));
        match state {
            State::Comment => {
                if c == b'\n' {
                    state = State::NodeStart;
                }
            }
            State::Double => match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => state = State::AfterQuoted,
                _ => {}
            },
            State::Single => {
                if c == b'\'' {
                    if next == Some(b'\'') {
                        at += 1;
                    } else {
                        state = State::AfterQuoted;
                    }
                }
            }
            State::Property => {
                if spaced(Some(c)) {
                    state = State::NodeStart;
                }
            }
            State::AfterQuoted => match c {
                b':' => state = State::NodeStart,
                b'#' => state = State::Comment,
                b',' if depth > 0 => state = State::NodeStart,
                b']' | b'}' if depth > 0 => depth -= 1,
                _ => {}
            },
            State::NodeStart => match c {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'#' => state = State::Comment,
                b'"' => state = State::Double,
                b'\'' => state = State::Single,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > limit {
                        return Some(at);
                    }
                }
                b']' | b'}' if depth > 0 => {
                    depth -= 1;
                    state = State::Plain;
                }
                b',' if depth > 0 => {}
                b'-' | b'?' | b':' if spaced(next) => {}
                b'&' | b'*' | b'!' => state = State::Property,
                b'|' | b'>' if depth == 0 => {
                    block_scalar = header_indent;
                    at = skip_line(bytes, at);
                    state = State::NodeStart;
                    continue;
                }
                _ => state = State::Plain,
            },
            State::Plain => match c {
                b'#' if at > 0 && spaced(Some(bytes[at - 1])) => state = State::Comment,
                b':' if spaced(next) || (depth > 0 && is_flow_indicator(next)) => {
                    state = State::NodeStart;
                }
                // Brackets end a plain scalar only inside a flow collection;
                // in block context they are its text.
                b'[' | b'{' if depth > 0 => {
                    depth += 1;
                    if depth > limit {
                        return Some(at);
                    }
                    state = State::NodeStart;
                }
                b']' | b'}' if depth > 0 => depth -= 1,
                b',' if depth > 0 => state = State::NodeStart,
                _ => {}
            },
        }
        at += 1;
    }
    None
}

fn is_flow_indicator(b: Option<u8>) -> bool {
    matches!(b, Some(b',' | b'[' | b']' | b'{' | b'}'))
}

/// The index just past the line `at` is on.
fn skip_line(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |n| at + n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> usize {
        (0..=200)
            .find(|limit| flow_depth_beyond(text, *limit).is_none())
            .unwrap()
    }

    #[test]
    fn brackets_count_only_where_the_parser_reads_them_as_nesting() {
        assert_eq!(depth("a: [1, [2, {b: [3]}]]\n"), 4);
        assert_eq!(depth("x: a[[[[\n"), 0, "text of a plain scalar");
        assert_eq!(depth("x: \"[[[[\"\ny: '[[['\n"), 0, "quoted");
        assert_eq!(depth("x: 1 # [[[[\n"), 0, "a comment");
        assert_eq!(depth("x: |\n  [[[[\n  {{\ny: [1]\n"), 1, "a block scalar");
        assert_eq!(depth("- [a, 'b]]', \"c]]\"]\n- {k: v}\n"), 1);
        assert_eq!(
            depth("x: [it's, a]\n"),
            1,
            "an apostrophe in a flow plain scalar"
        );
    }

    #[test]
    fn a_quote_inside_a_plain_scalar_opens_nothing() {
        let hidden = format!(
            "note: it's\nspec: {}1{}\n",
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(depth(&hidden), 100);
        let doubled = format!(
            "note: say \"hi\nspec: {}1{}\n",
            "[".repeat(70),
            "]".repeat(70)
        );
        assert_eq!(depth(&doubled), 70);
    }
}
