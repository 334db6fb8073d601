//! The SDK a Beehive controller plugin is written against.
//!
//! A plugin is a WebAssembly component, built for `wasm32-wasip2`, that
//! reconciles one kind. Write a type implementing [`Controller`], export it
//! with [`export!`], and build it; drop the `.wasm` file in the host's plugin
//! directory.
//!
//! ```
//! use beehive_guest::{Action, Client, ClientOf, Controller, ObjectOf, Registration, Result};
//!
//! #[derive(serde::Deserialize)]
//! pub struct Spec { name: String }
//! #[derive(serde::Serialize, serde::Deserialize)]
//! pub struct Status { message: String }
//!
//! #[derive(Default)]
//! pub struct Greeter;
//!
//! impl Controller for Greeter {
//!     type Spec = Spec;
//!     type Status = Status;
//!
//!     fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
//!         let message = format!("Hello, {}!", object.spec.name);
//!         client.update_status(&Status { message })?;
//!         Ok(Action::settled())
//!     }
//!
//!     fn registration() -> Registration {
//!         Registration::new("example.dev", "Greeting")
//!     }
//! }
//!
//! beehive_guest::export!(Greeter);
//!
//! // On the host target, the same reconcile runs against the fake client:
//! let fake = beehive_guest::fake::FakeClient::new();
//! let object = beehive_guest::Object::new("ada", Spec { name: "Ada".into() });
//! let action = fake.reconcile(&Greeter, &object).unwrap();
//! assert_eq!(action, Action::settled());
//! assert_eq!(fake.status().unwrap()["message"], "Hello, Ada!");
//! ```
//!
//! **Errors.** `reconcile` returns `Result<Action>`: write `?` on every host
//! call; [`Error`] converts from HTTP, I/O and JSON errors, and
//! [`Error::msg`] makes one of your own. An `Err` goes to
//! [`Controller::error_policy`], by default the backoff ladder with a
//! `ReconcileFailed` event carrying the error's text.
//!
//! **Objects that do not decode.** A stored spec or status that does not fit
//! `Spec`/`Status` is quarantined, as the host does for native controllers:
//! the pass does not run, the object gets a Warning event `DecodeFailed`
//! with the decoder's message, and it comes back on the owed-pass cadence
//! (not the backoff ladder) until its spec is fixed or a release that reads
//! it is swapped in.
//!
//! **Shared with the host.** [`Meta`], [`GroupKind`], [`ObjectRef`],
//! [`Action`], [`Verdict`], [`Error`] (the contract's `ContractError`),
//! [`Condition`], [`EventSpec`], [`Cadence`] and
//! [`Timestamp`] come from the `beehive-types` crate, which the host's
//! library re-exports too: a plugin and an embedded controller read
//! metadata, report observations, end passes and ask for cadences with the
//! same types.
//!
//! The bindings to the host exist only when compiling for `wasm32`; on the
//! host target the SDK is plain Rust, which is what makes the fake work.

#![deny(missing_docs)]

mod client;
pub mod config;
pub mod fake;
pub mod finalizer;
pub mod http;
mod types;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        // Every plugin exports validate and the converters; the host calls
        // them only when the registration says `validates` or `migrates`.
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "::beehive_guest::bindings",
    });
}

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod wasm;

pub use client::{Client, ControllerClient, CreateOptions, IfHeld, Kind, KindClient};
/// The derive and trait a kind's schema comes from (see
/// [`Registration::spec_schema`]).
pub use schemars::JsonSchema;
pub use types::{
    Action, Cadence, Condition, ConditionStatus, Error, EventSpec, EventType, GroupKind,
    KindPattern, Labels, Meta, Object, ObjectId, ObjectRef, RawObject, Registration, Result,
    Selector, StoreGrants, StoreVerb, Timestamp, Verdict, Violation,
};

/// The object controller `C` reconciles: its kind's spec and status.
pub type ObjectOf<C> = Object<<C as Controller>::Spec, <C as Controller>::Status>;

/// The client a pass of controller `C` reads and writes through.
pub type ClientOf<'a, C> = Client<'a, <C as Controller>::Status>;

/// A controller: the one trait a plugin implements.
pub trait Controller: Default + 'static {
    /// The kind's spec.
    type Spec: serde::de::DeserializeOwned;
    /// The kind's status.
    type Status: serde::Serialize + serde::de::DeserializeOwned;

    /// The kind this plugin reconciles and how it wants to be driven.
    fn registration() -> Registration;

    /// One pass over `object`. Write it to be idempotent: the next pass works
    /// from whatever is stored.
    ///
    /// # Errors
    /// Whatever stopped the pass; [`Controller::error_policy`] decides what
    /// happens next.
    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action>;

    /// What a pass that returned `error` does next. The default is the
    /// backoff ladder, with a `ReconcileFailed` event carrying the error.
    fn error_policy(&self, object: &ObjectOf<Self>, error: &Error) -> Action {
        let _ = object;
        Action::backoff(error)
    }

    /// Upgrades a spec stored at schema version `from` to the shape of
    /// [`Registration::spec_schema_version`]. The host calls it only when the
    /// registration declares a version and a stored spec is older; `from`
    /// is 0 for a spec written before the kind was versioned. The default
    /// refuses, and the read fails.
    fn convert_spec(
        from: u32,
        spec: serde_json::Value,
    ) -> std::result::Result<serde_json::Value, String> {
        let _ = spec;
        Err(format!("no converter for spec version {from}"))
    }

    /// Rules a schema cannot say, over a spec that passed it: the ways
    /// `spec` breaks them, empty when it keeps them. The host calls it on
    /// every spec write of the kind when the registration asks
    /// ([`Registration::validates`]), and refuses the write for any
    /// violation. The default accepts everything.
    fn validate(&self, spec: &Self::Spec) -> Vec<Violation> {
        let _ = spec;
        Vec::new()
    }

    /// As [`Controller::convert_spec`], for a status.
    fn convert_status(
        from: u32,
        status: serde_json::Value,
    ) -> std::result::Result<serde_json::Value, String> {
        let _ = status;
        Err(format!("no converter for status version {from}"))
    }
}

/// Log levels for the host's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Writes `message` to the host's log (tagged with plugin, kind and object);
/// on the host target, to stderr.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    wasm::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{level:?}: {message}");
}

/// Logs at info level, `format!`-style.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &format!($($arg)*)) };
}

/// Logs at warn level, `format!`-style.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &format!($($arg)*)) };
}

/// Logs at debug level, `format!`-style.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &format!($($arg)*)) };
}

/// Logs at error level, `format!`-style.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log($crate::Level::Error, &format!($($arg)*)) };
}

/// Exports a [`Controller`] as the component's `controller` interface. Expands
/// to nothing outside `wasm32`, so the crate still builds (and tests) on the
/// host target.
#[macro_export]
macro_rules! export {
    ($controller:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static INSTANCE: $controller = <$controller as ::std::default::Default>::default();
            }
            struct __BeehiveInstance;
            impl $crate::wasm::Instance for __BeehiveInstance {
                type Controller = $controller;
                fn with<R>(work: impl FnOnce(&$controller) -> R) -> R {
                    INSTANCE.with(work)
                }
            }
            type __BeehivePlugin = $crate::wasm::Adapter<__BeehiveInstance>;
    $crate::bindings::__export_plugin!(__BeehivePlugin with_types_in $crate::bindings);
        };
    };
}
