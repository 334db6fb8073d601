//! The import rules of `store/` and `engine/`, checked against the source
//! tree (see `docs/adr/2026-12-03-store-layers.md`).
//!
//! - The store's layers, bottom up: `backend`, `schema`, `rows`, `writer`,
//!   `ops`, and the face (the files directly in `store/`). A file imports
//!   only from its own layer or those below it.
//! - Inside a layer (and inside `engine/`), a file names a sibling's item by
//!   the sibling's path, never through the folder's `mod.rs` re-exports:
//!   those are the layer's face to the layers above.
//! - No import circle among the files of `store/` or of `engine/`.
//! - SQL text is written only in `backend`, `schema` and `rows`.
//!
//! The reading is deliberately plain: comments, strings and test modules
//! are blanked, `use` trees are expanded, and every `crate::…` or `super::…`
//! path is resolved to the file that defines its item (following `mod.rs`
//! re-exports). A re-export in a `mod.rs` is not counted as a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The store's layers, bottom up; the face is every file directly in
/// `store/`.
const STORE_LAYERS: [&str; 5] = ["backend", "schema", "rows", "writer", "ops"];

/// The index of `rows` in [`STORE_LAYERS`]: SQL is written at or below it.
const ROWS_LAYER: usize = 2;

/// What counts as SQL in a string literal.
const SQL_WORDS: [&str; 5] = [
    "SELECT ",
    "INSERT INTO",
    "UPDATE ",
    "DELETE FROM",
    "CREATE ",
];

/// One source file, read.
struct Source {
    /// The module path below the crate root: `["store", "rows", "objects"]`.
    module: Vec<String>,
    /// The text with comments, string contents and test modules blanked.
    code: String,
    /// The contents of its string literals, outside test modules.
    strings: Vec<String>,
}

/// The crate's source tree, by file.
struct Tree {
    files: BTreeMap<PathBuf, Source>,
}

impl Tree {
    fn read(root: &Path) -> Tree {
        let mut files = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("the source tree is readable") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("a source file is text");
                    let relative = path
                        .strip_prefix(root)
                        .expect("below the root")
                        .to_path_buf();
                    files.push((relative, text));
                }
            }
        }
        Tree::of(files)
    }

    fn of(files: Vec<(PathBuf, String)>) -> Tree {
        let files = files
            .into_iter()
            .map(|(path, text)| {
                let (code, all_strings) = blank(&text);
                let code = without_test_modules(&code);
                let strings = kept_strings(&code, all_strings);
                let module = module_of(&path);
                (
                    path,
                    Source {
                        module,
                        code,
                        strings,
                    },
                )
            })
            .collect();
        Tree { files }
    }

    /// The file that defines the item `path` names (segments below
    /// `crate`), or the module file itself when the path ends at a module.
    fn resolve(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        if depth > 8 {
            return None;
        }
        let mut dir = PathBuf::new();
        let mut file = PathBuf::from("lib.rs");
        for segment in path {
            let as_file = dir.join(format!("{segment}.rs"));
            let as_dir = dir.join(segment).join("mod.rs");
            if self.files.contains_key(&as_file) {
                file = as_file;
                dir = dir.join(segment);
            } else if self.files.contains_key(&as_dir) {
                file = as_dir;
                dir = dir.join(segment);
            } else {
                // An item of `file`: defined there, or re-exported by it.
                return Some(self.reexported(&file, segment, depth).unwrap_or(file));
            }
        }
        Some(file)
    }

    /// Where a `use` of `file` that brings in `name` leads, if one does.
    fn reexported(&self, file: &Path, name: &str, depth: usize) -> Option<PathBuf> {
        let source = &self.files[file];
        for statement in use_statements(&source.code) {
            for path in expand(&statement.tree) {
                let (target, alias) = split_alias(&path);
                if alias == name {
                    let absolute = absolute(&source.module, file, &target, self)?;
                    return self.resolve(&absolute, depth + 1);
                }
            }
        }
        None
    }

    /// Every file `file` depends on, with the path that names it.
    fn dependencies(&self, file: &Path) -> Vec<(PathBuf, String)> {
        let source = &self.files[file];
        let is_mod = file.ends_with("mod.rs");
        let mut found = Vec::new();
        let mut rest = source.code.clone();
        for statement in use_statements(&source.code) {
            rest = rest.replacen(&statement.text, "", 1);
            if is_mod && statement.public {
                continue;
            }
            for path in expand(&statement.tree) {
                let (target, _) = split_alias(&path);
                if let Some(absolute) = absolute(&source.module, file, &target, self)
                    && let Some(to) = self.resolve(&absolute, 0)
                {
                    found.push((to, absolute.join("::")));
                }
            }
        }
        for path in inline_paths(&rest) {
            let segments: Vec<String> = path.split("::").map(str::to_string).collect();
            if let Some(absolute) = absolute(&source.module, file, &segments, self)
                && let Some(to) = self.resolve(&absolute, 0)
            {
                found.push((to, absolute.join("::")));
            }
        }
        found.retain(|(to, _)| to != file);
        found
    }

    fn under<'t>(&'t self, folder: &'t str) -> impl Iterator<Item = &'t PathBuf> + 't {
        self.files.keys().filter(move |f| f.starts_with(folder))
    }
}

/// The layer of a file in `store/` (higher is further from the database).
fn store_layer(file: &Path) -> usize {
    let mut parts = file.iter().skip(1);
    let first = parts.next().and_then(|p| p.to_str()).unwrap_or("");
    if parts.next().is_none() {
        return STORE_LAYERS.len();
    }
    STORE_LAYERS
        .iter()
        .position(|layer| *layer == first)
        .unwrap_or(STORE_LAYERS.len())
}

fn layer_name(layer: usize) -> &'static str {
    STORE_LAYERS.get(layer).copied().unwrap_or("the face")
}

/// `store/rows/objects.rs` → `["store", "rows", "objects"]`.
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// `path` made absolute (below `crate`): `crate::`, `super::`, `self::` and
/// a child module's name are understood; anything else (a library) is not
/// ours.
fn absolute(module: &[String], file: &Path, path: &[String], tree: &Tree) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &path[1..];
        }
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        child => {
            let dir = file.parent().unwrap_or(Path::new(""));
            let dir = if file.ends_with("mod.rs") || file.ends_with("lib.rs") {
                dir.to_path_buf()
            } else {
                dir.join(file.file_stem()?)
            };
            let is_child = tree.files.contains_key(&dir.join(format!("{child}.rs")))
                || tree.files.contains_key(&dir.join(child).join("mod.rs"));
            if !is_child {
                return None;
            }
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// One `use` statement: its text as written, its tree, and whether it
/// re-exports.
struct UseStatement {
    text: String,
    tree: String,
    public: bool,
}

fn use_statements(code: &str) -> Vec<UseStatement> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let start = from + at;
        from = start + 4;
        let before = code[..start].trim_end();
        let at_statement = before.is_empty()
            || before.ends_with(';')
            || before.ends_with('}')
            || before.ends_with('{')
            || before.ends_with(']')
            || before.ends_with(')')
            || before.ends_with("pub");
        let word_start = start == 0 || !code.as_bytes()[start - 1].is_ascii_alphanumeric();
        if !at_statement || !word_start {
            continue;
        }
        let Some(end) = code[start..].find(';') else {
            break;
        };
        let tree = normalise(&code[start + 4..start + end]);
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        found.push(UseStatement {
            text: code[start..start + end + 1].to_string(),
            tree,
            public,
        });
        from = start + end + 1;
    }
    found
}

/// A use tree (`a::{b, c::{self, d as e}}`) as the paths it brings in.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let Some(open) = tree.find('{') else {
        return vec![tree.split("::").map(str::to_string).collect()];
    };
    let prefix: Vec<String> = tree[..open]
        .trim_end_matches("::")
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut paths = Vec::new();
    let (mut depth, mut start) = (0, 0);
    let bytes = inner.as_bytes();
    for index in 0..=bytes.len() {
        let at_end = index == bytes.len();
        if !at_end {
            match bytes[index] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
        }
        if at_end || (bytes[index] == b',' && depth == 0) {
            let part = &inner[start..index];
            start = index + 1;
            if part.is_empty() {
                continue;
            }
            for mut path in expand(part) {
                if path.first().is_some_and(|s| s == "self") {
                    path.remove(0);
                }
                let mut full = prefix.clone();
                full.extend(path);
                paths.push(full);
            }
        }
    }
    paths
}

/// A use tree with one space where `as` needs it and none elsewhere.
fn normalise(tree: &str) -> String {
    let spaced = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(spaced.len());
    let chars: Vec<char> = spaced.chars().collect();
    for (index, c) in chars.iter().enumerate() {
        let glue = |c: Option<&char>| matches!(c, Some(':' | '{' | '}' | ','));
        if *c == ' '
            && (glue(chars.get(index + 1)) || glue(index.checked_sub(1).and_then(|i| chars.get(i))))
        {
            continue;
        }
        out.push(*c);
    }
    out
}

/// A path and the name it brings in (`a::b as c` → (`a::b`, `c`)).
fn split_alias(path: &[String]) -> (Vec<String>, String) {
    let mut path = path.to_vec();
    let last = path.pop().unwrap_or_default();
    if let Some((name, alias)) = last.split_once(" as ") {
        path.push(name.to_string());
        return (path, alias.to_string());
    }
    if last != "*" {
        path.push(last.clone());
    }
    (path, last)
}

/// Paths `crate::…` and `super::…` written inline in code.
fn inline_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for start_word in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start_word) {
            let start = from + at;
            let word_start = start == 0 || {
                let before = code.as_bytes()[start - 1];
                !(before.is_ascii_alphanumeric()
                    || before == b'_'
                    || before == b':'
                    || before == b'$')
            };
            let mut end = start;
            let bytes = code.as_bytes();
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':')
            {
                end += 1;
            }
            from = end.max(start + 1);
            if word_start {
                found.push(code[start..end].trim_end_matches(':').to_string());
            }
        }
    }
    found
}

/// The text with comments removed and each string literal replaced by a
/// marker (`"N"`, its index), and the strings' contents.
fn blank(text: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut strings = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let mut content = String::new();
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                content.push(chars[j]);
                j += 1;
            }
            out.push_str(&format!("\"{}\"", strings.len()));
            strings.push(content);
            i = j;
        } else if c == '"' {
            let mut content = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&ch) = chars.get(i) {
                    content.push(ch);
                }
                i += 1;
            }
            i += 1;
            out.push_str(&format!("\"{}\"", strings.len()));
            strings.push(content);
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    (out, strings)
}

/// The strings whose markers (`"N"`, left by [`blank`]) are still in `code`.
fn kept_strings(code: &str, strings: Vec<String>) -> Vec<String> {
    let mut kept = Vec::new();
    for (index, string) in strings.into_iter().enumerate() {
        if code.contains(&format!("\"{index}\"")) {
            kept.push(string);
        }
    }
    kept
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The code with every `#[cfg(test)]` item (a test module) removed.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let Some(open) = out[at..].find(['{', ';']).map(|o| at + o) else {
            break;
        };
        if out.as_bytes()[open] == b';' {
            out.replace_range(at..=open, "");
            continue;
        }
        let mut depth = 0;
        let mut end = open;
        for (offset, byte) in out.as_bytes()[open..].iter().enumerate() {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(at..=end, "");
    }
    out
}

/// A circle in `graph`, if there is one, as the files around it.
fn find_circle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut circle = stack[from..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(circle) = visit(next, graph, state, stack) {
                        return Some(circle);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node).copied().unwrap_or(0) == 0
            && let Some(circle) = visit(node, graph, &mut state, &mut Vec::new())
        {
            return Some(circle);
        }
    }
    None
}

/// The folder whose files are `file`'s siblings, for the rule that they name
/// each other by path: `engine`, or the store layer it sits in. None for a
/// `mod.rs` (whose re-exports are the folder's face) and for the store's
/// face files.
fn sibling_folder(file: &Path, module: &[String]) -> Option<Vec<String>> {
    if file.ends_with("mod.rs") {
        return None;
    }
    match module {
        [top, ..] if top == "engine" => Some(vec![top.clone()]),
        [top, layer, _, ..] if top == "store" => Some(vec![top.clone(), layer.clone()]),
        _ => None,
    }
}

/// Whether `path` (below `crate`) reaches into `folder`'s re-exports: it
/// names `folder` and then an item that is not one of its child modules.
fn through_mod_rs(tree: &Tree, folder: &[String], path: &str) -> bool {
    let segments: Vec<&str> = path.split("::").collect();
    if segments.len() <= folder.len() || segments[..folder.len()] != *folder {
        return false;
    }
    let dir: PathBuf = folder.iter().collect();
    let child = segments[folder.len()];
    !tree.files.contains_key(&dir.join(format!("{child}.rs")))
        && !tree.files.contains_key(&dir.join(child).join("mod.rs"))
}

/// Every breach of the rules in the module doc, one line each.
fn breaches(tree: &Tree) -> Vec<String> {
    let mut breaches = Vec::new();
    for folder in ["store", "engine"] {
        let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for file in tree.under(folder) {
            let source = &tree.files[file];
            let siblings = sibling_folder(file, &source.module);
            for (to, path) in tree.dependencies(file) {
                if !to.starts_with(folder) {
                    continue;
                }
                graph.entry(file.clone()).or_default().insert(to.clone());
                if let Some(siblings) = &siblings
                    && through_mod_rs(tree, siblings, &path)
                {
                    breaches.push(format!(
                        "{}: `{path}` names a sibling's item through mod.rs; use its path",
                        file.display()
                    ));
                }
                if folder == "store" && store_layer(&to) > store_layer(file) {
                    breaches.push(format!(
                        "{}: `{path}` reaches up from {} to {} ({})",
                        file.display(),
                        layer_name(store_layer(file)),
                        layer_name(store_layer(&to)),
                        to.display()
                    ));
                }
            }
            if folder == "store" && store_layer(file) > ROWS_LAYER {
                for string in &source.strings {
                    if SQL_WORDS.iter().any(|word| string.contains(word)) {
                        let shown: String = string.chars().take(40).collect();
                        breaches.push(format!(
                            "{}: SQL outside backend, schema and rows: \"{shown}…\"",
                            file.display()
                        ));
                    }
                }
            }
        }
        if let Some(circle) = find_circle(&graph) {
            let shown: Vec<String> = circle.iter().map(|f| f.display().to_string()).collect();
            breaches.push(format!("an import circle: {}", shown.join(" → ")));
        }
    }
    breaches
}

/// A tree of the files given, with a crate root.
fn tree(files: &[(&str, &str)]) -> Tree {
    let mut all: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect();
    all.push(("lib.rs".into(), "mod store;\nmod engine;\n".into()));
    Tree::of(all)
}

#[test]
fn an_upward_import_is_a_breach() {
    let found = breaches(&tree(&[
        ("store/mod.rs", "mod rows;\npub struct Store;\n"),
        ("store/rows/mod.rs", "pub(crate) mod scan;\n"),
        (
            "store/rows/scan.rs",
            "use crate::store::Store;\nfn f(_: Store) {}\n",
        ),
    ]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("reaches up from rows to the face"),
        "{found:?}"
    );
}

#[test]
fn a_circle_through_a_use_tree_is_a_breach() {
    let found = breaches(&tree(&[
        ("engine/mod.rs", "mod a;\nmod b;\n"),
        (
            "engine/a.rs",
            "use crate::engine::{b::{self, B}};\npub struct A;\n",
        ),
        (
            "engine/b.rs",
            "// use crate::engine::a::A; (a comment: not an import)\nfn f() -> crate::engine::a::A { todo() }\npub struct B;\n",
        ),
    ]));
    assert!(
        found.iter().any(|b| b.contains("an import circle")),
        "{found:?}"
    );
}

#[test]
fn a_sibling_named_through_mod_rs_and_sql_above_rows_are_breaches() {
    let found = breaches(&tree(&[
        ("store/mod.rs", "mod writer;\n"),
        (
            "store/writer/mod.rs",
            "pub(crate) mod slot;\npub(crate) mod tx;\npub(crate) use slot::Slot;\n",
        ),
        ("store/writer/slot.rs", "pub struct Slot;\n"),
        (
            "store/writer/tx.rs",
            "use crate::store::writer::Slot;\nconst Q: &str = \"DELETE FROM objects\";\n",
        ),
    ]));
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn test_modules_and_strings_are_not_read_as_imports() {
    let found = breaches(&tree(&[
        ("store/mod.rs", "mod rows;\npub struct Store;\n"),
        ("store/rows/mod.rs", "pub(crate) mod scan;\n"),
        (
            "store/rows/scan.rs",
            "const S: &str = \"use crate::store::Store;\";\n#[cfg(test)]\nmod tests {\n    use crate::store::Store;\n}\n",
        ),
    ]));
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_store_and_the_engine_keep_their_import_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = breaches(&Tree::read(&root));
    assert!(
        found.is_empty(),
        "{} breaches:\n{}",
        found.len(),
        found.join("\n")
    );
}
