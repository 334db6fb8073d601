//! `beehive new NAME --lang rust|python|js`: a plugin project of one's own, in
//! a new directory outside any checkout, that tests, builds and serves as
//! it stands. The templates are in `cli/templates/`.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::failure::{Code, Failure};

/// The language of a new plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the beehive-guest crate.
    Rust,
    /// Python, with the beehive_guest package and componentize-py.
    Python,
    /// JavaScript (or TypeScript), with the beehive-guest npm package and
    /// componentize-js.
    Js,
}

/// The SDK checkout this binary was built from: where a new project's
/// dependency points unless `--sdk` says otherwise.
const BUILT_FROM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

/// A template file: where it goes in the project, and its text.
type Template = (&'static str, &'static str);

const RUST: &[Template] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("../templates/rust/src/lib.rs")),
    ("README.md", include_str!("../templates/rust/README.md")),
    (".gitignore", include_str!("../templates/rust/gitignore")),
];

const PYTHON: &[Template] = &[
    ("app.py", include_str!("../templates/python/app.py")),
    (
        "tests/test_app.py",
        include_str!("../templates/python/tests/test_app.py"),
    ),
    ("pytest.ini", include_str!("../templates/python/pytest.ini")),
    ("README.md", include_str!("../templates/python/README.md")),
    (".gitignore", include_str!("../templates/python/gitignore")),
];

const JS: &[Template] = &[
    ("package.json", include_str!("../templates/js/package.json")),
    ("app.js", include_str!("../templates/js/app.js")),
    (
        "test/app.test.js",
        include_str!("../templates/js/test/app.test.js"),
    ),
    ("README.md", include_str!("../templates/js/README.md")),
    (".gitignore", include_str!("../templates/js/gitignore")),
];

/// What a new project is made from.
pub struct NewPlugin<'a> {
    pub name: &'a str,
    pub lang: Lang,
    /// `Kind.group`; by default the name in CamelCase, in `example.dev`.
    pub kind: Option<&'a str>,
    /// The SDK to depend on (the Rust crate's directory, or the Python
    /// package's); by default the checkout this binary was built from.
    pub sdk: Option<&'a Path>,
    /// Where the project directory goes (default: here).
    pub parent: &'a Path,
}

/// Writes the project and says what to do next.
pub fn create(plugin: &NewPlugin<'_>) -> Result<String, Failure> {
    let usage = |message: String| Failure::new(Code::Usage, message);
    if let Some(problem) = name_problem(plugin.name) {
        return Err(usage(format!("{:?}: {problem}", plugin.name)));
    }
    let (kind, group) = match plugin.kind {
        Some(text) => text
            .split_once('.')
            .filter(|(k, g)| !k.is_empty() && !g.is_empty())
            .map(|(k, g)| (k.to_string(), g.to_string()))
            .ok_or_else(|| usage(format!("--kind {text:?}: write Kind.group")))?,
        None => (camel_case(plugin.name), "example.dev".to_string()),
    };
    let sdk = sdk_dir(plugin.sdk, plugin.lang)?;
    let dir = plugin.parent.join(plugin.name);
    if dir.exists() {
        return Err(Failure::conflict(format!(
            "{} already exists: pick another name or directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // A JavaScript project takes the SDK as a published package would be:
    // packed, in the project, so `npm install` installs its dependencies
    // too (a link into the checkout brought none of them).
    let sdk_package = match plugin.lang {
        Lang::Js => vendor_js_sdk(&sdk, &dir).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?,
        Lang::Rust | Lang::Python => String::new(),
    };
    let values = [
        ("{{name}}", plugin.name.to_string()),
        ("{{sdk_package}}", sdk_package),
        ("{{crate}}", plugin.name.replace('-', "_")),
        ("{{kind}}", kind.to_string()),
        ("{{group}}", group.to_string()),
        ("{{sdk}}", sdk.display().to_string()),
        (
            "{{controller}}",
            lower_camel_case(plugin.name) + "Controller",
        ),
    ];
    let templates = match plugin.lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    for (path, template) in templates {
        let text = values
            .iter()
            .fold(template.to_string(), |text, (key, value)| {
                text.replace(key, value)
            });
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    let language = match plugin.lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    };
    Ok(format!(
        "created {} ({language} plugin for {kind}.{group}); its README.md says how to test, build and install it\n",
        dir.display(),
    ))
}

/// Where a JavaScript project keeps the packed SDK.
const VENDOR: &str = "vendor";

/// Packs the JavaScript SDK at `sdk` with `npm pack` into `project`'s
/// [`VENDOR`] directory; returns the package's path in the project. The
/// SDK's files are staged first with links followed: `npm pack` leaves
/// symbolic links out, and the SDK's `wit` is one in a checkout.
fn vendor_js_sdk(sdk: &Path, project: &Path) -> Result<String, Failure> {
    let manifest = std::fs::read_to_string(sdk.join("package.json"))
        .map_err(|e| format!("{}: {e}", sdk.join("package.json").display()))?;
    let manifest: serde_json::Value = serde_json::from_str(&manifest)
        .map_err(|e| format!("{}: {e}", sdk.join("package.json").display()))?;
    let files = manifest["files"].as_array().cloned().unwrap_or_default();
    // Absolute: npm runs in the staging directory.
    let project = project
        .canonicalize()
        .map_err(|e| format!("{}: {e}", project.display()))?;
    let staging = project.join(".sdk-staging");
    let vendor = project.join(VENDOR);
    std::fs::create_dir_all(&vendor).map_err(|e| format!("{}: {e}", vendor.display()))?;
    let entries = files
        .iter()
        .filter_map(|f| f.as_str())
        .chain(["package.json"]);
    for entry in entries {
        let entry = entry.trim_end_matches('/');
        copy_following_links(&sdk.join(entry), &staging.join(entry))?;
    }
    let packed = std::process::Command::new("npm")
        .args(["pack", "--pack-destination"])
        .arg(&vendor)
        .current_dir(&staging)
        .output();
    let _ = std::fs::remove_dir_all(&staging);
    let packed = packed.map_err(|e| {
        format!(
            "cannot run npm ({e}): a JavaScript plugin is built with npm; install Node.js 20 \
             or later with npm, then run `beehive new` again"
        )
    })?;
    if !packed.status.success() {
        return Err(Failure::from(format!(
            "npm pack of the SDK at {} failed: {}",
            sdk.display(),
            String::from_utf8_lossy(&packed.stderr).trim()
        )));
    }
    // npm prints the package's file name last.
    let stdout = String::from_utf8_lossy(&packed.stdout);
    let tarball = stdout.lines().last().unwrap_or_default().trim().to_string();
    Ok(format!("{VENDOR}/{tarball}"))
}

/// Copies the file or directory `from` to `to`, following symbolic links.
fn copy_following_links(from: &Path, to: &Path) -> Result<(), Failure> {
    let failed = |e: std::io::Error| Failure::from(format!("cannot copy {}: {e}", from.display()));
    if std::fs::metadata(from).map_err(failed)?.is_dir() {
        std::fs::create_dir_all(to).map_err(failed)?;
        for entry in std::fs::read_dir(from).map_err(failed)? {
            let name = entry.map_err(failed)?.file_name();
            copy_following_links(&from.join(&name), &to.join(&name))?;
        }
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::copy(from, to).map(|_| ()).map_err(failed)
}

/// Why `name` cannot name a plugin (its file stem, and a Rust crate), if
/// it cannot.
fn name_problem(name: &str) -> Option<&'static str> {
    let Some(first) = name.chars().next() else {
        return Some("a plugin name cannot be empty");
    };
    if !first.is_ascii_lowercase() {
        return Some("a plugin name starts with a lowercase letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some("a plugin name holds lowercase letters, digits and '-' only");
    }
    (name.len() > 63).then_some("a plugin name is at most 63 characters")
}

/// `my-widget` as `MyWidget`.
fn camel_case(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `my-widget` as `myWidget`: a JavaScript identifier.
fn lower_camel_case(name: &str) -> String {
    let upper = camel_case(name);
    let mut chars = upper.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_ascii_lowercase().to_string() + chars.as_str()
    })
}

/// The SDK directory a new project depends on, absolute.
fn sdk_dir(given: Option<&Path>, lang: Lang) -> Result<PathBuf, Failure> {
    let (dir, flagged) = match given {
        Some(dir) => (dir.to_path_buf(), true),
        None => {
            let crate_dir = PathBuf::from(BUILT_FROM);
            match lang {
                Lang::Rust => (crate_dir, false),
                Lang::Python => (crate_dir.join("python"), false),
                Lang::Js => (crate_dir.join("js"), false),
            }
        }
    };
    let marker = match lang {
        Lang::Rust => "Cargo.toml",
        Lang::Python => "pyproject.toml",
        Lang::Js => "package.json",
    };
    match dir.join(marker).is_file() {
        true => dir
            .canonicalize()
            .map_err(|e| Failure::from(format!("{}: {e}", dir.display()))),
        false if flagged => Err(Failure::usage(format!(
            "--sdk {}: no {marker} there (give the SDK's directory: a checkout's guest-sdk, guest-sdk/python or guest-sdk/js)",
            dir.display()
        ))),
        false => Err(Failure::usage(format!(
            "the SDK this binary was built from is not at {} any more: pass --sdk DIR",
            dir.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_kinds_and_bad_names_are_refused() {
        assert_eq!(camel_case("my-widget"), "MyWidget");
        assert_eq!(camel_case("widget2"), "Widget2");
        assert_eq!(lower_camel_case("my-widget"), "myWidget");
        assert!(name_problem("my-widget").is_none());
        assert!(name_problem("My").is_some());
        assert!(name_problem("a/b").is_some());
        assert!(name_problem("").is_some());
    }
}
