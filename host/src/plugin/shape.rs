//! What a plugin file is, read from its bytes before anything compiles it:
//! WebAssembly or not, a component or a core module, which contract version
//! and which world it was built for. The loader refuses a wrong file with
//! the reason in one line, naming the world it expects; `beehive plugins
//! check` prints the same facts. A component is judged by what it imports
//! and exports, never by the toolchain that made it: any world of a
//! contract version this host serves is served.

use super::contract::{Contract, PACKAGE, served};

const HTTP: &str = "wasi:http/outgoing-handler";

/// A component's top-level imports and exports, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// What it imports (`beehive:controller/host@0.1.0`, `wasi:...`).
    pub imports: Vec<String>,
    /// What it exports (`beehive:controller/controller@0.1.0`, ...).
    pub exports: Vec<String>,
    /// The language its guest toolchain embeds, when the bytes say:
    /// componentize-py and componentize-js carry their interpreters.
    pub language: Option<Language>,
}

/// A plugin language whose toolchain leaves a mark in the component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Built by componentize-py (CPython inside).
    Python,
    /// Built by componentize-js (StarlingMonkey, SpiderMonkey inside).
    JavaScript,
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Language::Python => "Python",
            Language::JavaScript => "JavaScript",
        })
    }
}

impl Shape {
    /// The shape of `bytes`, or why they are not a component.
    ///
    /// # Errors
    /// A sentence: not WebAssembly (no magic bytes), a core module, or
    /// unreadable.
    pub fn of(bytes: &[u8]) -> Result<Shape, String> {
        if !bytes.starts_with(b"\0asm") {
            return Err("the file does not start with the WebAssembly magic bytes (\\0asm)".into());
        }
        if bytes.get(4..8) == Some(&[1, 0, 0, 0]) {
            return Err(
                "a core WebAssembly module, not a component: build it for wasm32-wasip2 \
                 (or wrap it with `wasm-tools component new`)"
                    .into(),
            );
        }
        let language = if contains(bytes, b"componentize_py") {
            Some(Language::Python)
        } else if contains(bytes, b"StarlingMonkey") {
            Some(Language::JavaScript)
        } else {
            None
        };
        let mut shape = Shape {
            language,
            ..Shape::default()
        };
        // Nested modules and components have sections of their own; only
        // the outermost component's say what the host must link.
        let mut depth = 0usize;
        for payload in wasmparser::Parser::new(0).parse_all(bytes) {
            let payload = payload.map_err(|e| format!("not a readable component: {e}"))?;
            match payload {
                wasmparser::Payload::ModuleSection { .. }
                | wasmparser::Payload::ComponentSection { .. } => depth += 1,
                wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
                wasmparser::Payload::ComponentImportSection(imports) if depth == 0 => {
                    for import in imports {
                        let import = import.map_err(|e| format!("unreadable imports: {e}"))?;
                        shape.imports.push(import.name.name.to_string());
                    }
                }
                wasmparser::Payload::ComponentExportSection(exports) if depth == 0 => {
                    for export in exports {
                        let export = export.map_err(|e| format!("unreadable exports: {e}"))?;
                        shape.exports.push(export.name.name.to_string());
                    }
                }
                _ => {}
            }
        }
        Ok(shape)
    }

    /// The served contract version it was built against, if it is one.
    pub fn served_contract(&self) -> Option<Contract> {
        let version = self.contract()?;
        let version = version.strip_prefix(PACKAGE)?.strip_prefix('@')?;
        Contract::of_version(version)
    }

    /// The contract version it was built against (`beehive:controller@0.1.0`),
    /// if it names one.
    pub fn contract(&self) -> Option<String> {
        self.imports.iter().chain(&self.exports).find_map(|name| {
            let (package, rest) = name.split_once('/')?;
            let version = rest.split_once('@')?.1;
            (package == PACKAGE).then(|| format!("{PACKAGE}@{version}"))
        })
    }

    /// Whether it exports `interface`: a full name
    /// (`beehive:controller/controller@0.2.0`), or a name without its
    /// version (`migrator`) for any version.
    fn exports_interface(&self, interface: &str) -> bool {
        if interface.contains('@') {
            return self.exports.iter().any(|e| e == interface);
        }
        let wanted = format!("{PACKAGE}/{interface}@");
        self.exports.iter().any(|e| e.starts_with(&wanted))
    }

    /// Whether it may make outgoing HTTP requests through wasi:http.
    pub fn imports_http(&self) -> bool {
        self.imports.iter().any(|i| i.starts_with(HTTP))
    }

    /// The world of its contract version it was built for, by what it
    /// imports and exports.
    pub fn world(&self) -> &'static str {
        let http = self.imports_http();
        if self.served_contract() != Some(Contract::V0_1) {
            return if http { "plugin-with-http" } else { "plugin" };
        }
        let migrator = self.exports_interface("migrator");
        let schema = self.exports_interface("schema");
        match (http, migrator, schema) {
            (false, false, false) => "plugin",
            (true, false, false) => "plugin-with-http",
            (false, true, false) => "plugin-with-migrator",
            (true, true, false) => "plugin-with-http-and-migrator",
            (false, _, true) => "plugin-with-schema",
            (true, false, true) => "plugin-with-http-and-schema",
            (true, true, true) => "plugin-with-http-migrator-and-schema",
        }
    }

    /// Why the host cannot serve it, if it cannot: a contract version it
    /// does not serve, or a component of another world. Names what to
    /// build instead.
    pub fn problem(&self) -> Option<String> {
        let expected = match self.language {
            Some(Language::Python) => "plugin-with-http (componentize-py -w plugin-with-http)",
            Some(Language::JavaScript) => "plugin-with-http (beehive-js build chooses it)",
            None => "plugin (what the Rust SDK builds)",
        };
        let newest = Contract::NEWEST;
        let Some(contract) = self.contract() else {
            return Some(format!(
                "a component of another world (it exports {}): a plugin exports \
                 {PACKAGE}/controller; build it for world {expected} of {newest}",
                listed(&self.exports)
            ));
        };
        let Some(version) = self.served_contract() else {
            return Some(format!(
                "built against {contract}, and this host serves {}: rebuild it with an SDK \
                 of this release",
                served()
            ));
        };
        if !self.exports_interface(&version.interface("controller")) {
            return Some(format!(
                "exports no {PACKAGE}/controller (it exports {}): build it for world \
                 {expected} of {newest}",
                listed(&self.exports)
            ));
        }
        None
    }
}

/// The most bytes any memory of the component starts with (nested core
/// modules included); 0 for bytes that do not parse, which compiling then
/// reports.
pub fn initial_memory(bytes: &[u8]) -> u64 {
    let mut largest = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::MemorySection(memories)) = payload else {
            continue;
        };
        for memory in memories.into_iter().flatten() {
            let page = 1u64 << memory.page_size_log2.unwrap_or(16);
            largest = largest.max(memory.initial.saturating_mul(page));
        }
    }
    largest
}

fn listed(names: &[String]) -> String {
    match names {
        [] => "nothing".into(),
        names => names.join(", "),
    }
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_versions_are_the_wit_packages() {
        let newest = include_str!("../../../wit/beehive.wit");
        assert!(newest.contains(&format!("package {};", Contract::NEWEST)));
        let first = include_str!("../../wit-0.1/beehive.wit");
        assert!(first.contains(&format!("package {};", Contract::V0_1)));
    }

    #[test]
    fn files_that_are_not_components_are_named_for_what_they_are() {
        assert!(Shape::of(b"hello").unwrap_err().contains("magic bytes"));
        let core = Shape::of(b"\0asm\x01\0\0\0").unwrap_err();
        assert!(core.contains("core WebAssembly module"), "{core}");
        let empty = Shape::of(b"\0asm\x0d\0\x01\0").unwrap();
        let problem = empty.problem().unwrap();
        assert!(
            problem.contains("another world (it exports nothing)"),
            "{problem}"
        );
        assert!(problem.contains("world plugin"), "{problem}");
        assert!(problem.contains("beehive:controller@0.2.0"), "{problem}");
    }

    #[test]
    fn worlds_and_versions_are_read_from_the_names() {
        let shape = |imports: &[&str], exports: &[&str], language| Shape {
            imports: imports.iter().map(|s| s.to_string()).collect(),
            exports: exports.iter().map(|s| s.to_string()).collect(),
            language,
        };
        let host = "beehive:controller/host@0.1.0";
        let controller = "beehive:controller/controller@0.1.0";
        let schema = "beehive:controller/schema@0.1.0";
        let http = "wasi:http/outgoing-handler@0.2.12";
        let rust = shape(
            &[host],
            &[controller, "beehive:controller/migrator@0.1.0", schema],
            None,
        );
        assert_eq!(rust.world(), "plugin-with-schema");
        assert_eq!(rust.problem(), None);
        let python = shape(&[host, http], &[controller, schema], Some(Language::Python));
        assert_eq!(python.world(), "plugin-with-http-and-schema");
        assert_eq!(python.problem(), None);
        // Judged by what it imports, whichever toolchain made it: a Python
        // component of the plain world is served (it was refused before).
        let python_plain = shape(&[host], &[controller], Some(Language::Python));
        assert_eq!(python_plain.world(), "plugin");
        assert_eq!(python_plain.problem(), None);
        let newer = shape(
            &["beehive:controller/host@0.9.0"],
            &["beehive:controller/controller@0.9.0"],
            None,
        );
        let problem = newer.problem().unwrap();
        assert!(
            problem.contains("built against beehive:controller@0.9.0"),
            "{problem}"
        );
        assert!(
            problem.contains("beehive:controller@0.1.0, beehive:controller@0.2.0"),
            "{problem}"
        );
        let v2 = |imports: &[&str]| {
            shape(
                imports,
                &["beehive:controller/controller@0.2.0"],
                Some(Language::Python),
            )
        };
        let http = v2(&["beehive:controller/host@0.2.0", http]);
        assert_eq!(http.world(), "plugin-with-http");
        assert_eq!(http.problem(), None);
        assert_eq!(v2(&["beehive:controller/host@0.2.0"]).world(), "plugin");
        // A 0.2 component exporting only a 0.1 interface is not a plugin.
        let mixed = shape(
            &["beehive:controller/host@0.2.0"],
            &["beehive:controller/controller@0.1.0"],
            None,
        );
        assert!(mixed.problem().is_some());
    }
}
