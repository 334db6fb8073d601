//! kubectl's JSONPath templates, for `get -o jsonpath=…`,
//! `-o custom-columns=…` and `--sort-by`.
//!
//! A template is text with expressions in braces: `{.spec.port}`,
//! `{.items[*].name}`, `{range .items[*]}{.name}{"\n"}{end}`. Paths take
//! fields (`.a`, `['a.b']`), `.*`, recursive descent (`..a`), indexes
//! (`[0]`, `[-1]`), slices (`[1:3]`), `[*]` and filters
//! (`[?(@.port > 80)]`, `[?(@.name == "web")]`, `[?(@.ready)]`). As with
//! kubectl's default (`--allow-missing-template-keys`), a path that finds
//! nothing prints nothing. Strings print bare; other values as JSON;
//! several results of one expression are joined by spaces.
//!
//! The adversary is the template's author only (it is the caller's own
//! command line) and the documents, which are bounded by the store: the
//! evaluator recurses once per step and per nesting level of a document,
//! both bounded, and never loops.

use serde_json::Value;

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Text(String),
    Path(Path),
    /// `{range PATH}…{end}`: the parts once per result, each evaluated
    /// against that result.
    Range(Path, Vec<Part>),
}

/// A path, from the root (`$`, or nothing) or the current node (`@`).
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    AnyField,
    Descend(String),
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    AnyItem,
    Filter(Box<Filter>),
}

#[derive(Clone, Debug, PartialEq)]
struct Filter {
    path: Path,
    compare: Option<(Op, Value)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The longest template or path accepted: a command line's worth.
const MAX_TEMPLATE: usize = 64 * 1024;

impl Template {
    /// Parses kubectl's template syntax.
    ///
    /// # Errors
    /// What is wrong and where, in words.
    pub fn parse(text: &str) -> Result<Template, String> {
        if text.len() > MAX_TEMPLATE {
            return Err(format!("longer than {MAX_TEMPLATE} bytes"));
        }
        let mut pieces = Pieces { rest: text };
        let parts = parse_parts(&mut pieces, false)?;
        Ok(Template { parts })
    }

    /// The template applied to `value`.
    pub fn render(&self, value: &Value) -> String {
        let mut out = String::new();
        render_parts(&self.parts, value, &mut out);
        out
    }
}

/// A template cut into text and brace expressions.
struct Pieces<'t> {
    rest: &'t str,
}

enum Piece<'t> {
    Text(&'t str),
    Expression(&'t str),
}

impl<'t> Pieces<'t> {
    fn next(&mut self) -> Result<Option<Piece<'t>>, String> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        if let Some(inner) = self.rest.strip_prefix('{') {
            let end = closing_brace(inner).ok_or("a '{' is never closed")?;
            self.rest = &inner[end + 1..];
            return Ok(Some(Piece::Expression(inner[..end].trim())));
        }
        let end = self.rest.find('{').unwrap_or(self.rest.len());
        let (text, rest) = self.rest.split_at(end);
        self.rest = rest;
        Ok(Some(Piece::Text(text)))
    }
}

/// Where the `}` closing an expression is, skipping quoted text.
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(i),
            (None, _) => {}
        }
    }
    None
}

fn parse_parts(pieces: &mut Pieces<'_>, in_range: bool) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    while let Some(piece) = pieces.next()? {
        let expression = match piece {
            Piece::Text(text) => {
                parts.push(Part::Text(text.to_string()));
                continue;
            }
            Piece::Expression(expression) => expression,
        };
        if expression == "end" {
            return match in_range {
                true => Ok(parts),
                false => Err("{end} without a {range}".into()),
            };
        }
        if let Some(path) = expression.strip_prefix("range ") {
            let path = Path::parse(path.trim())?;
            parts.push(Part::Range(path, parse_parts(pieces, true)?));
        } else if expression.starts_with('"') || expression.starts_with('\'') {
            parts.push(Part::Text(literal(expression)?));
        } else {
            parts.push(Part::Path(Path::parse(expression)?));
        }
    }
    match in_range {
        true => Err("a {range} has no {end}".into()),
        false => Ok(parts),
    }
}

/// A quoted literal, with `\n`, `\t`, `\\` and escaped quotes.
fn literal(quoted: &str) -> Result<String, String> {
    let quote = quoted.chars().next().unwrap_or('"');
    let inner = quoted
        .strip_prefix(quote)
        .and_then(|q| q.strip_suffix(quote))
        .filter(|_| quoted.len() >= 2)
        .ok_or_else(|| format!("{quoted}: an unterminated string"))?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Ok(out)
}

impl Path {
    /// Parses a path: `.spec.port`, `$.items[*]`, `@.name`, `..name`.
    ///
    /// # Errors
    /// What is wrong and where, in words.
    pub fn parse(text: &str) -> Result<Path, String> {
        if text.len() > MAX_TEMPLATE {
            return Err(format!("longer than {MAX_TEMPLATE} bytes"));
        }
        let bad = |why: &str| format!("{text}: {why}");
        let mut rest = text.trim();
        rest = rest
            .strip_prefix('$')
            .or_else(|| rest.strip_prefix('@'))
            .unwrap_or(rest);
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("..") {
                let (name, next) = field_name(after);
                if name.is_empty() {
                    return Err(bad("'..' needs a field name after it"));
                }
                steps.push(Step::Descend(name.to_string()));
                rest = next;
            } else if let Some(after) = rest.strip_prefix('.') {
                if let Some(next) = after.strip_prefix('*') {
                    steps.push(Step::AnyField);
                    rest = next;
                    continue;
                }
                let (name, next) = field_name(after);
                if name.is_empty() && !next.starts_with('[') && !next.is_empty() {
                    return Err(bad("a '.' needs a field name after it"));
                }
                if !name.is_empty() {
                    steps.push(Step::Field(name.to_string()));
                }
                rest = next;
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = closing_bracket(after).ok_or_else(|| bad("a '[' is never closed"))?;
                steps.push(bracket(after[..end].trim()).map_err(|why| bad(&why))?);
                rest = &after[end + 1..];
            } else if steps.is_empty() && !rest.starts_with(['.', '[']) {
                // kubectl takes `{spec.port}` for `{.spec.port}`.
                let (name, next) = field_name(rest);
                if name.is_empty() {
                    return Err(bad("expected '.', '..' or '['"));
                }
                steps.push(Step::Field(name.to_string()));
                rest = next;
            } else {
                return Err(bad(&format!("unexpected {rest:?}")));
            }
        }
        Ok(Path { steps })
    }

    /// Every value the path reaches in `value`, in document order.
    pub fn find<'v>(&self, value: &'v Value) -> Vec<&'v Value> {
        let mut found = vec![value];
        for step in &self.steps {
            found = found.into_iter().flat_map(|v| step.apply(v)).collect();
        }
        found
    }
}

/// A field name: up to the next `.`, `[` or the end.
fn field_name(text: &str) -> (&str, &str) {
    let end = text.find(['.', '[']).unwrap_or(text.len());
    text.split_at(end)
}

/// Where the `]` closing a bracket is, skipping quoted text and nested
/// brackets (a filter's own path may have some).
fn closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            (None, _) => {}
        }
    }
    None
}

/// What is inside `[…]`.
fn bracket(inner: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::AnyItem);
    }
    if inner.starts_with('\'') || inner.starts_with('"') {
        return Ok(Step::Field(literal(inner)?));
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        return Ok(Step::Filter(Box::new(Filter::parse(filter.trim())?)));
    }
    if let Some((from, to)) = inner.split_once(':') {
        let bound = |b: &str| -> Result<Option<i64>, String> {
            let b = b.trim();
            match b.is_empty() {
                true => Ok(None),
                false => b
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{b:?} is not an index")),
            }
        };
        // A step (`[0:10:2]`) is kubectl's too, and rare: refused by name.
        if to.contains(':') {
            return Err("slices with a step are not supported".into());
        }
        return Ok(Step::Slice(bound(from)?, bound(to)?));
    }
    inner
        .parse()
        .map(Step::Index)
        .map_err(|_| format!("[{inner}] is not an index, a slice, '*', a quoted name or a filter"))
}

impl Filter {
    fn parse(text: &str) -> Result<Filter, String> {
        const OPS: [(&str, Op); 6] = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let found = OPS
            .iter()
            .filter_map(|(symbol, op)| text.find(symbol).map(|at| (at, *symbol, *op)))
            .min_by_key(|(at, symbol, _)| (*at, usize::MAX - symbol.len()));
        let Some((at, symbol, op)) = found else {
            return Ok(Filter {
                path: filter_path(text)?,
                compare: None,
            });
        };
        let path = filter_path(text[..at].trim())?;
        let right = text[at + symbol.len()..].trim();
        let value = if right.starts_with('"') || right.starts_with('\'') {
            Value::String(literal(right)?)
        } else {
            serde_json::from_str(right).map_err(|_| {
                format!("{right}: compare with a number, a quoted string, true or false")
            })?
        };
        Ok(Filter {
            path,
            compare: Some((op, value)),
        })
    }

    fn admits(&self, item: &Value) -> bool {
        let found = self.path.find(item);
        let Some((op, wanted)) = &self.compare else {
            return found
                .iter()
                .any(|v| !v.is_null() && **v != Value::Bool(false));
        };
        found.iter().any(|v| compare(v, *op, wanted))
    }
}

fn filter_path(text: &str) -> Result<Path, String> {
    match text.starts_with('@') {
        true => Path::parse(text),
        false => Err(format!("{text}: a filter's path starts with '@'")),
    }
}

fn compare(left: &Value, op: Op, right: &Value) -> bool {
    let order = match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (a, b) => (a == b).then_some(std::cmp::Ordering::Equal),
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    match op {
        Op::Eq => order == Some(Equal),
        Op::Ne => order != Some(Equal),
        Op::Lt => order == Some(Less),
        Op::Le => matches!(order, Some(Less | Equal)),
        Op::Gt => order == Some(Greater),
        Op::Ge => matches!(order, Some(Greater | Equal)),
    }
}

impl Step {
    fn apply<'v>(&self, value: &'v Value) -> Vec<&'v Value> {
        match (self, value) {
            (Step::Field(name), Value::Object(fields)) => fields.get(name).into_iter().collect(),
            (Step::AnyField, Value::Object(fields)) => fields.values().collect(),
            (Step::AnyField | Step::AnyItem, Value::Array(items)) => items.iter().collect(),
            (Step::Descend(name), _) => {
                let mut found = Vec::new();
                descend(value, name, &mut found);
                found
            }
            (Step::Index(i), Value::Array(items)) => resolve(*i, items.len())
                .and_then(|i| items.get(i))
                .into_iter()
                .collect(),
            (Step::Slice(from, to), Value::Array(items)) => {
                let len = items.len();
                let from = from.map_or(0, |f| clamp(f, len));
                let to = to.map_or(len, |t| clamp(t, len));
                items
                    .get(from..to.max(from))
                    .unwrap_or_default()
                    .iter()
                    .collect()
            }
            (Step::Filter(filter), Value::Array(items)) => {
                items.iter().filter(|item| filter.admits(item)).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// Every value of field `name` at any depth under `value`, outer first.
fn descend<'v>(value: &'v Value, name: &str, found: &mut Vec<&'v Value>) {
    match value {
        Value::Object(fields) => {
            if let Some(hit) = fields.get(name) {
                found.push(hit);
            }
            fields.values().for_each(|v| descend(v, name, found));
        }
        Value::Array(items) => items.iter().for_each(|v| descend(v, name, found)),
        _ => {}
    }
}

/// An index from the end when negative.
fn resolve(index: i64, len: usize) -> Option<usize> {
    match index < 0 {
        true => len.checked_sub(usize::try_from(index.unsigned_abs()).ok()?),
        false => usize::try_from(index).ok(),
    }
}

fn clamp(bound: i64, len: usize) -> usize {
    resolve(bound, len).unwrap_or(0).min(len)
}

fn render_parts(parts: &[Part], value: &Value, out: &mut String) {
    for part in parts {
        match part {
            Part::Text(text) => out.push_str(text),
            Part::Path(path) => {
                let found = path.find(value);
                let shown: Vec<String> = found.into_iter().map(show).collect();
                out.push_str(&shown.join(" "));
            }
            Part::Range(path, inner) => {
                for item in path.find(value) {
                    render_parts(inner, item, out);
                }
            }
        }
    }
}

/// A value as a template prints it: a string bare, anything else as JSON.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"kind": "List", "items": [
            {"name": "web", "spec": {"port": 80}, "labels": {"app.kubernetes.io/name": "x"}},
            {"name": "db", "spec": {"port": 5432, "ready": true}},
            {"name": "cache", "spec": {"port": 6379}},
        ]})
    }

    fn render(template: &str) -> String {
        Template::parse(template).unwrap().render(&list())
    }

    #[test]
    fn fields_items_and_text_render_as_kubectl_prints_them() {
        assert_eq!(render("{.items[*].name}"), "web db cache");
        assert_eq!(render("first: {.items[0].name}!"), "first: web!");
        assert_eq!(render("{.items[-1].spec.port}"), "6379");
        assert_eq!(render("{.items[0:2].name}"), "web db");
        assert_eq!(render("{.items[0].spec}"), r#"{"port":80}"#);
        assert_eq!(render("{$.kind}"), "List");
        assert_eq!(render("{kind}"), "List");
        assert_eq!(render("{.items[0].labels['app.kubernetes.io/name']}"), "x");
        assert_eq!(render("{..port}"), "80 5432 6379");
        assert_eq!(render("{.items[0].*}").split(' ').count(), 3);
    }

    #[test]
    fn a_missing_key_prints_nothing() {
        assert_eq!(render("[{.items[0].nope}]"), "[]");
        assert_eq!(render("[{.items[9].name}]"), "[]");
    }

    #[test]
    fn ranges_repeat_their_body_per_item() {
        assert_eq!(
            render(r#"{range .items[*]}{.name}={.spec.port}{"\n"}{end}"#),
            "web=80\ndb=5432\ncache=6379\n"
        );
    }

    #[test]
    fn filters_compare_numbers_strings_and_presence() {
        assert_eq!(render("{.items[?(@.spec.port > 100)].name}"), "db cache");
        assert_eq!(render(r#"{.items[?(@.name == "web")].spec.port}"#), "80");
        assert_eq!(render("{.items[?(@.name != 'web')].name}"), "db cache");
        assert_eq!(render("{.items[?(@.spec.ready)].name}"), "db");
        assert_eq!(render("{.items[?(@.spec.port <= 5432)].name}"), "web db");
    }

    #[test]
    fn malformed_templates_say_what_is_wrong() {
        for (bad, says) in [
            ("{.items", "never closed"),
            ("{range .items[*]}{.name}", "no {end}"),
            ("{end}", "without a {range}"),
            ("{.items[x]}", "not an index"),
            ("{.items[?(.name == 1)]}", "starts with '@'"),
            ("{.items[0:4:2]}", "step"),
            ("{.items[?(@.a == nope)]}", "compare with"),
        ] {
            let error = Template::parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
