//! Host bindings of the WIT contract in `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    // Host calls reach the store, which is async; trappable so a host-side
    // failure (a missing resource) can end the call.
    imports: { default: async | trappable },
    exports: { default: async },
    ownership: Borrowing { duplicate_if_necessary: true },
    with: {
        "beehive:controller/host.kind-client": crate::plugin::state::KindClientHandle,
        "beehive:controller/host.controller-client": crate::plugin::state::ControllerClientHandle,
    },
});
