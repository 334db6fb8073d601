//! Why a plugin could not be loaded.

use std::path::PathBuf;

/// Why a plugin could not be loaded. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a WebAssembly component.
    #[error("{path}: not a WebAssembly component: {message}")]
    NotAComponent {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
    /// The component does not satisfy the contract (missing or mistyped
    /// exports or imports), or its `describe` failed.
    #[error("{path}: does not satisfy the beehive:controller contract: {message}")]
    Contract {
        /// The plugin file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// Another plugin already reconciles the kind.
    #[error("{path}: {kind} is already reconciled by {other}")]
    KindClaimed {
        /// The plugin file.
        path: PathBuf,
        /// The kind.
        kind: String,
        /// The plugin that has it.
        other: String,
    },
    /// The directory cannot be watched for changes.
    #[error("{path}: cannot watch: {message}")]
    Watch {
        /// The plugin directory.
        path: PathBuf,
        /// What the watcher said.
        message: String,
    },
    /// The pool of instances was full when the plugin was loaded: other
    /// plugins' passes held every slot. Transient; the load is retried.
    #[error("{path}: cannot instantiate now: {message}")]
    Busy {
        /// The plugin file.
        path: PathBuf,
        /// What wasmtime said.
        message: String,
    },
    /// The directory trusts signers and the file is not signed by one of
    /// them, its signature does not match it, or it is an older signed
    /// build than the one serving. Checked before anything compiles it.
    #[error("{path}: refused: {message}")]
    Signature {
        /// The plugin file.
        path: PathBuf,
        /// Why, and what would fix it.
        message: String,
    },
    /// The plugin's policy file (`NAME.toml`) cannot be read or is wrong;
    /// the plugin is not loaded under a policy nobody meant.
    #[error("{path}: {message}")]
    Policy {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The plugin needs more linear memory at start than its cap allows.
    #[error(
        "{path}: needs {} of linear memory at start, more than its cap of {} \
         (raise it with --plugin-memory or --plugin-memory-for NAME=SIZE)",
        mib(*needs),
        mib(*cap as u64)
    )]
    MemoryCap {
        /// The plugin file.
        path: PathBuf,
        /// The bytes its memories start with.
        needs: u64,
        /// The cap that applies to it.
        cap: usize,
    },
    /// Loading the plugin panicked (a defect in the host or a dependency,
    /// not the file's fault alone); nothing of it serves.
    #[error("{path}: loading it failed inside the host: {message}")]
    LoadPanicked {
        /// The plugin file.
        path: PathBuf,
        /// What the panic said.
        message: String,
    },
    /// The host refused the registration.
    #[error("{path}: cannot register: {source}")]
    Register {
        /// The plugin file.
        path: PathBuf,
        /// The host's error.
        #[source]
        source: crate::Error,
    },
}

impl Error {
    /// Whether the same file may load if tried again later, unchanged.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Busy { .. })
    }
}

/// `bytes` in MiB, one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}
