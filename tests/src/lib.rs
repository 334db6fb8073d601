//! Helpers for the end-to-end tests in `tests/tests/`: each test gets its own
//! directory and runs the real `beehive` binary in it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `beehive` binary of this build, next to the test executable's `deps/`.
///
/// # Panics
/// When the binary has not been built; `scripts/test` builds it first.
pub fn beehive_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let bin = profile_dir.join(format!("beehive{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p beehive --bins` (scripts/test does)",
        bin.display()
    );
    bin
}

/// The example plugin `name`, built as a component by `scripts/build-plugins`.
///
/// # Panics
/// When it has not been built.
pub fn plugin_wasm(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    let target_dir = exe
        .ancestors()
        .nth(3)
        .expect("the test executable lives in target/<profile>/deps");
    let wasm = target_dir
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{name}.wasm"));
    assert!(
        wasm.exists(),
        "{} is missing: run scripts/build-plugins (scripts/test does)",
        wasm.display()
    );
    wasm
}

/// A scratch directory and a way to run `beehive` inside it.
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    /// A fresh, empty directory.
    pub fn new() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `beehive ARGS` in the directory and waits for it.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(beehive_bin())
            .args(args)
            .current_dir(self.path())
            .output()
            .expect("beehive runs")
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}
