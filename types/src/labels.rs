//! Labels and label selectors, with Kubernetes' syntax and size rules.
//!
//! A label key is an optional prefix (a DNS subdomain of at most 253
//! characters) and `/`, then a name of at most 63 characters: letters,
//! digits, `-`, `_` and `.`, starting and ending with a letter or digit. A
//! value is empty or follows the name's rules. A selector is terms joined by
//! commas, all of which must hold: `key=value` (or `==`), `key!=value`,
//! `key in (a,b)`, `key notin (a,b)`, `key` (present) and `!key` (absent).

use std::collections::BTreeMap;

/// An object's labels, by key.
pub type Labels = BTreeMap<String, String>;

/// The most labels an object may carry.
pub const MAX_LABELS: usize = 64;

/// What is wrong with the label `key=value`, if anything.
pub fn label_problem(key: &str, value: &str) -> Option<String> {
    if let Some(problem) = key_problem(key) {
        return Some(problem);
    }
    if !value.is_empty() && !is_name(value) {
        return Some(format!(
            "label {key}: value {value:?} must be at most 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit (or be empty)"
        ));
    }
    None
}

/// What is wrong with `labels` as a whole, if anything.
pub fn labels_problem(labels: &Labels) -> Option<String> {
    if labels.len() > MAX_LABELS {
        return Some(format!(
            "{} labels: an object carries at most {MAX_LABELS}",
            labels.len()
        ));
    }
    labels.iter().find_map(|(k, v)| label_problem(k, v))
}

fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if !is_name(name) {
        return Some(format!(
            "label key {key:?}: its name must be 1 to 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit"
        ));
    }
    if let Some(prefix) = prefix
        && !is_subdomain(prefix)
    {
        return Some(format!(
            "label key {key:?}: its prefix must be a DNS subdomain (lowercase letters, digits, \
             '-' and '.', at most 253 characters)"
        ));
    }
    None
}

/// 1 to 63 bytes, each one `inner` admits, the first and last ones `edge`
/// admits: the shape of a label name and of a DNS label.
fn is_segment(text: &str, edge: impl Fn(&u8) -> bool, inner: impl Fn(&u8) -> bool) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(&edge)
        && bytes.last().is_some_and(&edge)
        && bytes.iter().all(inner)
}

fn is_name(text: &str) -> bool {
    is_segment(text, u8::is_ascii_alphanumeric, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
    })
}

fn is_subdomain(text: &str) -> bool {
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    text.len() <= 253
        && text
            .split('.')
            .all(|part| is_segment(part, edge, |b| edge(b) || *b == b'-'))
}

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// The key is present with one of these values (`=`, `==`, `in`).
    In(String, Vec<String>),
    /// The key is absent, or present with none of these values (`!=`,
    /// `notin`).
    NotIn(String, Vec<String>),
    /// The key is present.
    Exists(String),
    /// The key is absent.
    DoesNotExist(String),
}

impl Requirement {
    /// The key it is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(key, _)
            | Requirement::NotIn(key, _)
            | Requirement::Exists(key)
            | Requirement::DoesNotExist(key) => key,
        }
    }

    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

/// A label selector: requirements that must all hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// A selector that does not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError {
    /// The character position (from 0) where it went wrong.
    pub position: usize,
    /// What was expected there.
    pub message: String,
}

impl std::fmt::Display for SelectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at position {}: {}", self.position, self.message)
    }
}

impl std::error::Error for SelectorError {}

impl Selector {
    /// The selector every object matches.
    pub fn everything() -> Self {
        Selector::default()
    }

    /// Its requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` meets every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Parses kubectl's selector grammar.
    ///
    /// # Errors
    /// A [`SelectorError`] naming the position and what was expected.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let mut parser = Parser { text, at: 0 };
        let mut requirements = Vec::new();
        parser.skip_spaces();
        if parser.at == text.len() {
            return Ok(Selector::default());
        }
        loop {
            requirements.push(parser.requirement()?);
            parser.skip_spaces();
            match parser.peek() {
                None => break,
                Some(',') => parser.at += 1,
                Some(_) => return Err(parser.error("a ',' between requirements")),
            }
        }
        Ok(Selector { requirements })
    }
}

struct Parser<'t> {
    text: &'t str,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn error(&self, expected: &str) -> SelectorError {
        SelectorError {
            position: self.at,
            message: format!("expected {expected}"),
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.text[self.at..].starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// A key or a value: everything up to a space, an operator or a
    /// delimiter.
    fn word(&mut self) -> &str {
        let start = self.at;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || matches!(c, '=' | '!' | ',' | '(' | ')') {
                break;
            }
            self.at += c.len_utf8();
        }
        &self.text[start..self.at]
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        let key = self.word().to_string();
        if key.is_empty() {
            return Err(self.error("a label key"));
        }
        if let Some(problem) = key_problem(&key) {
            return Err(SelectorError {
                position: start,
                message: problem,
            });
        }
        Ok(key)
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        let value = self.word().to_string();
        if !value.is_empty() && !is_name(&value) {
            return Err(SelectorError {
                position: start,
                message: format!("{value:?} is not a label value"),
            });
        }
        Ok(value)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.skip_spaces();
        if self.eat("!") {
            return Ok(Requirement::DoesNotExist(self.key()?));
        }
        let key = self.key()?;
        self.skip_spaces();
        if self.eat("==") || self.eat("=") {
            return Ok(Requirement::In(key, vec![self.value()?]));
        }
        if self.eat("!=") {
            return Ok(Requirement::NotIn(key, vec![self.value()?]));
        }
        let word_start = self.at;
        match self.word() {
            "in" => Ok(Requirement::In(key, self.set()?)),
            "notin" => Ok(Requirement::NotIn(key, self.set()?)),
            "" => Ok(Requirement::Exists(key)),
            _ => {
                self.at = word_start;
                Err(self.error("'=', '==', '!=', 'in', 'notin', ',' or the end"))
            }
        }
    }

    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        self.skip_spaces();
        if !self.eat("(") {
            return Err(self.error("'(' opening the set of values"));
        }
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            self.skip_spaces();
            if self.eat(")") {
                return Ok(values);
            }
            if !self.eat(",") {
                return Err(self.error("',' or ')' in the set of values"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_form_of_kubectl_s_grammar_parses_and_matches() {
        let web = labels(&[("tier", "web"), ("env", "prod"), ("example.dev/team", "a")]);
        let cases = [
            ("tier=web", true),
            ("tier==web", true),
            ("tier!=web", false),
            ("tier in (web, db)", true),
            ("tier notin (web,db)", false),
            ("env", true),
            ("!env", false),
            ("!missing", true),
            ("missing!=x", true),
            ("example.dev/team=a, env=prod", true),
            ("tier=web,env=dev", false),
            ("", true),
        ];
        for (text, expected) in cases {
            let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&web), expected, "{text}");
        }
    }

    #[test]
    fn a_bad_selector_names_the_position() {
        let cases = [
            ("tier=web,", 9),
            ("tier in web", 8),
            ("tier in (web", 12),
            ("tier ~ web", 5),
            ("-bad=x", 0),
            ("tier=we b", 8),
        ];
        for (text, position) in cases {
            let error = Selector::parse(text).unwrap_err();
            assert_eq!(error.position, position, "{text}: {error}");
        }
    }

    #[test]
    fn keys_and_values_follow_kubernetes_rules() {
        assert_eq!(label_problem("app", "web"), None);
        assert_eq!(label_problem("example.dev/app", ""), None);
        assert!(label_problem("", "x").is_some());
        assert!(label_problem("Example.dev/app", "x").is_some());
        assert!(label_problem("app", "-web").is_some());
        assert!(label_problem(&"a".repeat(64), "x").is_some());
        assert!(label_problem("app", &"v".repeat(64)).is_some());
        let many: Labels = (0..=MAX_LABELS)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert!(labels_problem(&many).is_some());
    }
}
