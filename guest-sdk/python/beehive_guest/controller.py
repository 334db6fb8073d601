"""The controller base class, the pass every controller runs through, and
`export`, which makes a controller the component's `controller` export."""

import dataclasses
import traceback
from typing import Any, List, Optional

from . import log, schema
from .client import Client, decode_object
from .errors import BeehiveError, DecodeError
from .model import Action, Event, Object, RawObject, Registration, Violation


class Controller:
    """Subclass it, set `registration` (and `spec_type`/`status_type` to
    dataclasses, or leave them None for plain dicts), and write `reconcile`.
    One instance serves every pass of the plugin instance, so attributes are
    a cache: an instance may be dropped at any time."""

    #: The kind it reconciles and how it wants to be driven.
    registration: Registration
    #: The spec's type; None reads it as plain JSON values.
    spec_type: Any = None
    #: The status's type; None reads it as plain JSON values.
    status_type: Any = None

    def reconcile(self, client: Client, obj: Object) -> Optional[Action]:
        """One pass over `obj`. Return an Action (None means settled);
        raise to fail the pass. Write it to be idempotent."""
        raise NotImplementedError("a controller implements reconcile")

    def error_policy(self, obj: Object, error: Exception) -> Action:
        """What a pass that raised `error` does next. The default is the
        backoff ladder, with a ReconcileFailed event carrying the error."""
        return Action.backoff(f"{type(error).__name__}: {error}")

    def validate(self, spec: Any) -> List[Violation]:
        """Rules a schema cannot say, over a spec (decoded as `spec_type`)
        that passed the schema: the ways it breaks them, empty when it keeps
        them. The host calls it on every spec write of the kind when the
        registration says `validates=True` and refuses the write for any violation."""
        return []

    def convert_spec(self, from_version: int, spec: Any) -> Any:
        """A stored spec written at `from_version` (below the registration's
        `spec_version`), reshaped to the current version as plain JSON. The
        default refuses: a plugin that raises its version writes this."""
        raise ValueError(f"no converter from spec version {from_version}")

    def convert_status(self, from_version: int, status: Any) -> Any:
        """`convert_spec`, for a stored status."""
        raise ValueError(f"no converter from status version {from_version}")


def run_pass(controller: Controller, backend: Any, raw: RawObject) -> Action:
    """One pass of `controller` over `raw` through `backend` (the host's
    client, or a fake): decode, reconcile, map exceptions, close the client.

    An object whose spec or status does not decode is quarantined, as the
    host does for native controllers: a DecodeFailed Warning event (the host
    logs it once per generation and counts the object as failing) and an
    unsettled result, so it comes back on the owed-pass cadence instead of
    the backoff ladder."""
    try:
        obj = decode_object(raw, controller.spec_type, controller.status_type)
    except DecodeError as error:
        try:
            backend.add_event(Event.warning("DecodeFailed", str(error)))
        except BeehiveError as failed:
            log.warning(f"cannot record DecodeFailed on {raw.meta.name}: {failed}")
        return Action.unsettled()
    client = Client(backend, controller.status_type)
    try:
        action = controller.reconcile(client, obj)
    except Exception as error:  # noqa: BLE001 - every failure is the pass's, never the instance's
        trace = "".join(traceback.format_exception(error)).rstrip()
        # In `beehive logs`, tagged with the object by the host.
        log.error(trace)
        action = controller.error_policy(obj, error)
        if isinstance(action, Action) and action.verdict == "failed" and not action.trace:
            action = dataclasses.replace(action, trace=trace)
    finally:
        client.close()
    if action is None:
        return Action.settled()
    if not isinstance(action, Action):
        return Action.backoff(f"reconcile returned {type(action).__name__}, not an Action")
    return action


def _component() -> Any:
    from . import _host

    if _host.wasm is None:
        raise RuntimeError("beehive_guest: not inside a component (no wit_world bindings)")
    return _host.wasm


def export(controller_class: type) -> type:
    """The class componentize-py exports as the `controller` interface:
    write `Controller = export(MyController)` at the end of the app module.
    One instance of `controller_class` serves every pass.

    The JSON Schemas of `spec_type` and `status_type` (when they are
    dataclasses) are declared with the registration: the host checks every
    spec write of the kind against them, then against `validate` when the
    registration says `validates=True`. They are derived here, while the
    component is built, when the source (and its `#:` comments) can be read.
    The converters are called only when the registration names schema
    versions."""
    instance = controller_class()
    spec = schema.json_schema_text(controller_class.spec_type)
    status = schema.json_schema_text(controller_class.status_type)

    class Exported:
        def describe(self) -> Any:
            return _component().registration(instance.registration, spec, status)

        def reconcile(self, obj: Any, client: Any) -> Any:
            return _component().reconcile(instance, obj, client)

        def validate(self, spec_text: str) -> Any:
            return _component().validate(instance, spec_text)

        def convert_spec(self, from_version: int, raw: str) -> str:
            return _component().convert(instance, "spec", from_version, raw)

        def convert_status(self, from_version: int, raw: str) -> str:
            return _component().convert(instance, "status", from_version, raw)

    Exported.__name__ = f"Exported{controller_class.__name__}"
    return Exported


def export_migrator(controller_class: type) -> None:
    """No longer needed: `export` exports the converters (contract 0.2 has
    one `controller` interface). Kept so a module written for the SDK's
    first contract still builds."""
    del controller_class


def export_schema(controller_class: type) -> None:
    """No longer needed: `export` declares the schemas (contract 0.2 has
    one `controller` interface). Kept so a module written for the SDK's
    first contract still builds."""
    del controller_class
