//! Canonical JSON: the one byte form every document is stored in.
//!
//! Object keys are sorted and there is no insignificant whitespace, so the same
//! content written by the CLI, a plugin or a typed client has the same bytes,
//! and "a write whose bytes match writes nothing" holds across all of them.

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::naming::abbreviate;

/// A JSON document in canonical form.
///
/// The only way to build one is through a constructor that canonicalises, so
/// two equal `Json` values are byte-identical and vice versa.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Json(String);

impl Json {
    /// Parses `text` and returns its canonical form.
    ///
    /// # Errors
    /// [`Error::InvalidDocument`] when `text` is not JSON.
    /// [`Error::DocumentTooLarge`] when the canonical form is over
    /// [`crate::naming::MAX_DOCUMENT_BYTES`] (text much larger than that is
    /// refused before it is parsed).
    pub fn parse(text: &str) -> Result<Json> {
        // Whitespace can make honest text longer than its canonical form,
        // but not this much longer.
        if text.len() > 4 * crate::naming::MAX_DOCUMENT_BYTES {
            return Err(Error::DocumentTooLarge(format!(
                "the text is {} bytes; a document may be at most {}",
                text.len(),
                crate::naming::MAX_DOCUMENT_BYTES
            )));
        }
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::InvalidDocument(format!("not JSON: {e}")))?;
        let json = Json::from_value(&value);
        json.check_limits()?;
        Ok(json)
    }

    /// Fails when the document is over [`crate::naming::MAX_DOCUMENT_BYTES`]
    /// or nested deeper than [`crate::naming::MAX_DEPTH`]: the limits every
    /// stored document keeps, whichever way it came in (a manifest, the
    /// socket, a plugin, the embedding API).
    ///
    /// # Errors
    /// [`Error::DocumentTooLarge`]; [`Error::InvalidDocument`] when too deep.
    pub fn check_limits(&self) -> Result<()> {
        if let Some(problem) = crate::naming::document_problem(self.0.len()) {
            return Err(Error::DocumentTooLarge(problem));
        }
        let depth = self.depth();
        if depth > crate::naming::MAX_DEPTH {
            return Err(Error::InvalidDocument(format!(
                "nested {depth} levels deep; at most {}",
                crate::naming::MAX_DEPTH
            )));
        }
        Ok(())
    }

    /// How deeply the document nests: 0 for a scalar, 1 for `{}` or `[]`,
    /// 2 for `{"a": []}`. Counted on the canonical text in one pass: it has
    /// no comments and no whitespace, and a bracket inside a string is
    /// always within quotes.
    pub fn depth(&self) -> usize {
        let (mut depth, mut deepest) = (0usize, 0usize);
        let (mut in_string, mut escaped) = (false, false);
        for byte in self.0.bytes() {
            match (in_string, byte) {
                (true, _) if escaped => escaped = false,
                (true, b'\\') => escaped = true,
                (true, b'"') => in_string = false,
                (true, _) => {}
                (false, b'"') => in_string = true,
                (false, b'{' | b'[') => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                (false, b'}' | b']') => depth = depth.saturating_sub(1),
                (false, _) => {}
            }
        }
        deepest
    }

    /// The canonical form of a JSON value.
    pub fn from_value(value: &serde_json::Value) -> Json {
        // serde_json's map is a BTreeMap (the `preserve_order` feature is off),
        // so serialising a Value writes keys sorted.
        Json(value.to_string())
    }

    /// The canonical form of any serialisable value.
    ///
    /// # Errors
    /// [`Error::InvalidDocument`] when the value does not serialise to JSON
    /// (for example a map with non-string keys); [`Error::DocumentTooLarge`].
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Json> {
        let value = serde_json::to_value(value)
            .map_err(|e| Error::InvalidDocument(format!("does not serialise: {e}")))?;
        let json = Json::from_value(&value);
        json.check_limits()?;
        Ok(json)
    }

    /// Like [`Json::parse`], but also requires a JSON object, as every spec must be.
    ///
    /// # Errors
    /// [`Error::InvalidDocument`] when `text` is not JSON or not an object.
    pub fn parse_object(text: &str) -> Result<Json> {
        let json = Json::parse(text)?;
        json.require_object()?;
        Ok(json)
    }

    /// Fails unless this document is a JSON object.
    pub(crate) fn require_object(&self) -> Result<()> {
        if self.0.starts_with('{') {
            Ok(())
        } else {
            Err(Error::InvalidDocument(format!(
                "a spec must be a JSON object, got {}",
                abbreviate(&self.0)
            )))
        }
    }

    /// Wraps text the store wrote itself, which is canonical by construction.
    pub(crate) fn from_stored(text: String) -> Json {
        Json(text)
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The document as a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        // Canonical text is valid JSON by construction.
        serde_json::from_str(&self.0).expect("canonical JSON parses")
    }

    /// Decodes the document into `T`.
    ///
    /// # Errors
    /// The serde error when the document does not fit `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> std::result::Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// Consumes the document, returning its canonical text.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Json({})", self.0)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&serde_json::Value> for Json {
    fn from(value: &serde_json::Value) -> Self {
        Json::from_value(value)
    }
}

impl From<serde_json::Value> for Json {
    fn from(value: serde_json::Value) -> Self {
        Json::from_value(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        let depth = |text: &str| Json::parse(text).unwrap().depth();
        assert_eq!(depth("1"), 0);
        assert_eq!(depth("{}"), 1);
        assert_eq!(depth(r#"{"a": [1, {"b": []}]}"#), 4);
        assert_eq!(depth(r#"{"a": "[[[{{\"[["}"#), 1);
        assert_eq!(depth(r#"["\\", ["x"]]"#), 2);
    }

    #[test]
    fn a_document_deeper_than_the_limit_is_refused_wherever_it_comes_from() {
        let limit = crate::naming::MAX_DEPTH;
        assert!(Json::parse(&nested(limit)).is_ok());
        let error = Json::parse(&nested(limit + 1)).unwrap_err();
        assert!(
            error.to_string().contains(&format!(
                "nested {} levels deep; at most {limit}",
                limit + 1
            )),
            "{error}"
        );
        let value: serde_json::Value = serde_json::from_str(&nested(limit + 1)).unwrap();
        assert!(Json::from_value(&value).check_limits().is_err());
    }

    #[test]
    fn key_order_and_whitespace_do_not_change_the_bytes() {
        let a = Json::parse(r#"{ "b": 1, "a": {"y": [1, 2], "x": null} }"#).unwrap();
        let b = Json::parse(r#"{"a":{"x":null,"y":[1,2]},"b":1}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), r#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
    }

    #[test]
    fn a_spec_must_be_an_object() {
        assert!(Json::parse_object("[1]").is_err());
        assert!(Json::parse_object("\"s\"").is_err());
        assert!(Json::parse_object("{}").is_ok());
        assert!(matches!(Json::parse("{"), Err(Error::InvalidDocument(_))));
    }

    #[test]
    fn serialised_structs_are_canonical() {
        #[derive(Serialize)]
        struct S {
            zed: u8,
            alpha: u8,
        }
        let json = Json::from_serialize(&S { zed: 1, alpha: 2 }).unwrap();
        assert_eq!(json.as_str(), r#"{"alpha":2,"zed":1}"#);
    }
}
