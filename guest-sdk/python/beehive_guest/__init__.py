"""The SDK a Beehive controller plugin is written against, in Python.

A plugin is a WebAssembly component built by componentize-py from the WIT
world `plugin-with-http` of contract `beehive:controller@0.2.0` (in `wit/`).
Subclass `Controller`, then export it at the end of the app module:

    from dataclasses import dataclass
    import beehive_guest as bh

    @dataclass
    class Spec:
        name: str

    @dataclass
    class Status:
        message: str

    class Greeter(bh.Controller):
        registration = bh.Registration("example.dev", "Greeting")
        spec_type, status_type = Spec, Status

        def reconcile(self, client, greeting):
            client.update_status(Status(f"Hello, {greeting.spec.name}!"))
            return bh.Action.settled()

    Controller = bh.export(Greeter)

Test it with `beehive_guest.fake.FakeClient` under plain pytest.
"""

from . import config, errors, http, log
from .client import Client, KindClient
from .controller import Controller, export, export_migrator, export_schema, run_pass
from .errors import BeehiveError
from .log import logger
from .model import (
    Action,
    Condition,
    CreateOptions,
    Event,
    Meta,
    Object,
    ObjectRef,
    RawObject,
    Registration,
    Violation,
)

# Last: the component side needs the rest of the package loaded.
from . import _host  # noqa: E402

__all__ = [
    "Action",
    "BeehiveError",
    "Client",
    "Condition",
    "Controller",
    "CreateOptions",
    "Event",
    "KindClient",
    "Meta",
    "Object",
    "ObjectRef",
    "RawObject",
    "Registration",
    "Violation",
    "config",
    "errors",
    "http",
    "export",
    "export_migrator",
    "export_schema",
    "log",
    "logger",
    "run_pass",
]
