"""The values the operator gives this plugin in its policy file (`[config]`
in `NAME.toml`): settings, and secrets from the host's environment or a
file. Under pytest they come from `beehive_guest.fake.set_config`."""

from typing import List, Optional


def get(key: str) -> Optional[str]:
    """The value of `key`, if the operator gave one."""
    from . import _host, fake

    return fake.config_value(key) if _host.wasm is None else _host.wasm.config_get(key)


def keys() -> List[str]:
    """Every key the operator gave, sorted."""
    from . import _host, fake

    return fake.config_keys() if _host.wasm is None else _host.wasm.config_keys()
