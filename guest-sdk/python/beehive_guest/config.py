"""The values the operator gives this plugin in its policy file (`[config]`
in `NAME.toml`): settings, and secrets from the host's environment or a
file. Under pytest they come from `beehive_guest.fake.set_config`."""

from typing import List, Optional


# Inside a component nothing can be imported after the build's snapshot, so
# the fake is imported only on the branch that runs under pytest.


def get(key: str) -> Optional[str]:
    """The value of `key`, if the operator gave one."""
    from . import _host

    if _host.wasm is not None:
        return _host.wasm.config_get(key)
    from . import fake

    return fake.config_value(key)


def keys() -> List[str]:
    """Every key the operator gave, sorted."""
    from . import _host

    if _host.wasm is not None:
        return _host.wasm.config_keys()
    from . import fake

    return fake.config_keys()
