//! `get -o`: the fixed formats, `jsonpath=TEMPLATE` and
//! `custom-columns=HEADER:PATH,…`, and `--sort-by PATH`, as kubectl has them.
//! Paths and templates apply to an object as `-o json` prints it; a
//! jsonpath template over several objects gets them as kubectl's list,
//! `{"kind": "List", "items": [...]}`.

use clap::ValueEnum;
use serde_json::Value;

use crate::jsonpath::{self, Path, Template};
use crate::output::{self, Format};
use crate::protocol::ObjectView;

/// What `get -o` asked for.
#[derive(Clone, Debug)]
pub enum GetOutput {
    /// `table`, `wide`, `json`, `yaml` or `name`.
    Plain(Format),
    /// `jsonpath=TEMPLATE`.
    JsonPath(Template),
    /// `custom-columns=HEADER:PATH,…`.
    Columns(Vec<Column>),
}

/// One of `custom-columns`' columns.
#[derive(Clone, Debug)]
pub struct Column {
    header: String,
    path: Path,
}

impl GetOutput {
    /// Parses `-o`'s value.
    ///
    /// # Errors
    /// What is wrong, with the formats there are.
    pub fn parse(text: &str) -> Result<GetOutput, String> {
        if let Some(template) = text.strip_prefix("jsonpath=") {
            return Template::parse(template)
                .map(GetOutput::JsonPath)
                .map_err(|why| format!("jsonpath: {why}"));
        }
        if let Some(spec) = text.strip_prefix("custom-columns=") {
            return columns(spec).map(GetOutput::Columns);
        }
        Format::from_str(text, true)
            .map(GetOutput::Plain)
            .map_err(|_| {
                format!(
                    "{text:?} is not a format: table, wide, json, yaml, name, \
                 jsonpath=TEMPLATE or custom-columns=HEADER:PATH,..."
                )
            })
    }

    /// The fixed format, if that is what was asked for.
    pub fn plain(&self) -> Option<Format> {
        match self {
            GetOutput::Plain(format) => Some(*format),
            _ => None,
        }
    }

    /// `objects` printed as asked; `single` when one was asked for by name.
    pub fn render(&self, objects: &[ObjectView], single: bool, headers: bool) -> String {
        match self {
            GetOutput::Plain(format) => {
                let listed = output::objects(objects, *format, single);
                match headers || !matches!(format, Format::Table | Format::Wide) {
                    true => listed,
                    false => listed
                        .split_once('\n')
                        .map_or_else(String::new, |(_, rows)| rows.to_string()),
                }
            }
            GetOutput::JsonPath(template) => {
                let documents: Vec<Value> = objects.iter().map(output::document).collect();
                let input = match (single, documents.as_slice()) {
                    (true, [one]) => one.clone(),
                    _ => serde_json::json!({"kind": "List", "items": documents}),
                };
                template.render(&input)
            }
            GetOutput::Columns(columns) => {
                let rows = objects.iter().map(|object| {
                    let document = output::document(object);
                    columns.iter().map(|c| cell(&c.path, &document)).collect()
                });
                let headers_row: Vec<&str> = columns.iter().map(|c| c.header.as_str()).collect();
                let table = output::columns(&headers_row, rows);
                match headers {
                    true => table,
                    false => table
                        .split_once('\n')
                        .map_or_else(String::new, |(_, rows)| rows.to_string()),
                }
            }
        }
    }
}

/// `HEADER:PATH,…`.
fn columns(spec: &str) -> Result<Vec<Column>, String> {
    let parsed: Result<Vec<Column>, String> = spec
        .split(',')
        .map(|column| {
            let (header, path) = column.split_once(':').ok_or_else(|| {
                format!("custom-columns: {column:?} is not HEADER:PATH (NAME:.name, say)")
            })?;
            let path = braces_optional(path);
            Ok(Column {
                header: header.trim().to_string(),
                path: Path::parse(path).map_err(|why| format!("custom-columns: {why}"))?,
            })
        })
        .collect();
    let parsed = parsed?;
    if parsed.iter().any(|c| c.header.is_empty()) {
        return Err("custom-columns: every column needs a header".into());
    }
    Ok(parsed)
}

/// A path given with or without kubectl's braces: `{.name}` or `.name`.
fn braces_optional(path: &str) -> &str {
    let path = path.trim();
    path.strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path)
}

/// A column's cell: what the path finds, joined by commas; `<none>` when
/// it finds nothing, as kubectl prints.
fn cell(path: &Path, document: &Value) -> String {
    let found = path.find(document);
    match found.is_empty() {
        true => "<none>".into(),
        false => found
            .into_iter()
            .map(jsonpath::show)
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Parses `--sort-by`'s path.
///
/// # Errors
/// What is wrong with it.
pub fn sort_path(text: &str) -> Result<Path, String> {
    Path::parse(braces_optional(text)).map_err(|why| format!("--sort-by: {why}"))
}

/// `objects` sorted by what `path` finds in each: numbers by value, text
/// by its characters, objects where it finds nothing last; a stable sort,
/// so ties keep the store's order.
pub fn sort(objects: Vec<ObjectView>, path: &Path) -> Vec<ObjectView> {
    let mut keyed: Vec<(Option<Value>, ObjectView)> = objects
        .into_iter()
        .map(|o| {
            (
                path.find(&output::document(&o))
                    .first()
                    .map(|v| (*v).clone()),
                o,
            )
        })
        .collect();
    keyed.sort_by(|(a, _), (b, _)| compare_keys(a.as_ref(), b.as_ref()));
    keyed.into_iter().map(|(_, o)| o).collect()
}

fn compare_keys(a: Option<&Value>, b: Option<&Value>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Some(x), Some(y)) => jsonpath::show(x).cmp(&jsonpath::show(y)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_a_wrong_one_lists_them_all() {
        assert!(matches!(
            GetOutput::parse("yaml"),
            Ok(GetOutput::Plain(Format::Yaml))
        ));
        assert!(matches!(
            GetOutput::parse("jsonpath={.name}"),
            Ok(GetOutput::JsonPath(_))
        ));
        assert!(matches!(
            GetOutput::parse("custom-columns=NAME:.name,PORT:{.spec.port}"),
            Ok(GetOutput::Columns(c)) if c.len() == 2
        ));
        let wrong = GetOutput::parse("xml").unwrap_err();
        assert!(wrong.contains("jsonpath=TEMPLATE"), "{wrong}");
        let wrong = GetOutput::parse("custom-columns=NAME").unwrap_err();
        assert!(wrong.contains("HEADER:PATH"), "{wrong}");
    }
}
