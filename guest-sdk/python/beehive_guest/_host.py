"""Whether this runs inside a component. componentize-py snapshots the
modules imported while it builds, and nothing can be imported later, so the
component side is imported here, eagerly; under pytest its bindings are
absent and `wasm` is None."""

try:
    from . import _wasm as wasm
except ImportError:
    wasm = None
