//! The values the operator gives this plugin in its policy file
//! (`[config]` in `NAME.toml`): settings, and secrets from the host's
//! environment or a file. Read them whenever a pass needs them.
//!
//! On the host target (unit tests) the values come from
//! [`crate::fake::set_config`].

/// The value of `key`, if the operator gave one.
pub fn get(key: &str) -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::beehive::controller::config::get(key);
    #[cfg(not(target_arch = "wasm32"))]
    return crate::fake::config_value(key);
}

/// Every key the operator gave, sorted.
pub fn keys() -> Vec<String> {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::beehive::controller::config::keys();
    #[cfg(not(target_arch = "wasm32"))]
    return crate::fake::config_keys();
}
