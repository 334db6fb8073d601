"""The component side: the host's clients behind the SDK's backend surface,
and conversions between the WIT types and the SDK's. Importable only inside
a component built by componentize-py (it needs `wit_world`); everywhere
else importing it raises ImportError, which is how the rest of the SDK
knows it runs under pytest."""

import json
from typing import Any, Dict, List, Optional, Tuple

from componentize_py_types import Err
from wit_world.imports import config, host, types

from . import errors
from .model import Action, Condition, CreateOptions, Event, Meta, ObjectRef, RawObject, Registration, millis

_LEVELS = {
    "trace": host.Level.TRACE,
    "debug": host.Level.DEBUG,
    "info": host.Level.INFO,
    "warn": host.Level.WARN,
    "error": host.Level.ERROR,
}
_STATUS_TO_WIT = {True: types.ConditionStatus.IS_TRUE, False: types.ConditionStatus.IS_FALSE, None: types.ConditionStatus.UNKNOWN}
_STATUS_FROM_WIT = {wit: status for status, wit in _STATUS_TO_WIT.items()}

#: Kind clients by (group, kind), kept across passes: each is a host
#: resource, and an instance may hold only so many.
_KIND_CLIENTS: Dict[Tuple[str, str], "KindBackend"] = {}


def log(level: str, message: str) -> None:
    host.log(_LEVELS[level], message)


def config_get(key: str) -> Optional[str]:
    return config.get(key)


def config_keys() -> List[str]:
    return config.keys()


def registration(r: Registration) -> Any:
    return types.Registration(
        group=r.group,
        kind=r.kind,
        finalizers=list(r.finalizers),
        concurrency=r.concurrency,
        owed_pass_interval_ms=millis(r.owed_pass_interval),
        full_pass_interval_ms=millis(r.full_pass_interval),
        individual_pass_interval_ms=millis(r.individual_pass_interval),
        startup_full_pass=r.startup_full_pass,
        max_retry_interval_ms=millis(r.max_retry_interval),
        spec_schema_version=0,
        status_schema_version=0,
        pass_deadline_ms=millis(r.pass_deadline),
    )


def reconcile(controller: Any, obj: Any, client: Any) -> Any:
    from .controller import run_pass

    action = run_pass(controller, ControllerBackend(client), raw_object(obj))
    return result(action)


def result(action: Action) -> Any:
    if action.verdict == "settled":
        verdict = types.Verdict_Settled()
    elif action.verdict == "unsettled":
        verdict = types.Verdict_Unsettled()
    else:
        verdict = types.Verdict_Failed(action.message)
    return types.ReconcileResult(verdict=verdict, requeue_after_ms=action.requeue_after_ms)


def _raising(call: Any, *args: Any) -> Any:
    """`call(*args)`, with a host error raised as the SDK's exception."""
    try:
        return call(*args)
    except Err as failure:
        raise exception(failure.value) from None


def exception(error: Any) -> errors.BeehiveError:
    case = type(error).__name__.removeprefix("Error_")
    cls = errors.BY_CASE.get(case, errors.Other)
    value = getattr(error, "value", None)
    if cls is errors.DependencyCycle:
        return errors.DependencyCycle(value or [])
    return cls(value if value is not None else case)


def raw_object(o: Any) -> RawObject:
    meta = Meta(
        id=o.id,
        group=o.group,
        kind=o.kind,
        name=o.name,
        generation=o.generation,
        observed_generation=o.observed_generation,
        resource_version=o.resource_version,
        deletion_requested_at_ms=o.deletion_requested_at_ms,
        finalizers=list(o.finalizers),
        conditions=[condition(c) for c in o.conditions],
        created_at_ms=o.created_at_ms,
        updated_at_ms=o.updated_at_ms,
    )
    return RawObject(meta=meta, spec=o.spec, status=o.status)


def condition(c: Any) -> Condition:
    return Condition(
        type=c.type,
        status=_STATUS_FROM_WIT[c.status],
        reason=c.reason,
        message=c.message,
        liveness=c.liveness,
        unconfirmed=c.unconfirmed,
        transitioned_at_ms=c.transitioned_at_ms,
        updated_at_ms=c.updated_at_ms,
    )


def wit_condition(c: Condition) -> Any:
    return types.Condition(
        type=c.type,
        status=_STATUS_TO_WIT[c.status],
        reason=c.reason,
        message=c.message,
        liveness=c.liveness,
        unconfirmed=False,
        transitioned_at_ms=0,
        updated_at_ms=0,
    )


def wit_event(e: Event) -> Any:
    return types.EventSpec(
        category=e.category,
        event_type=types.EventType.WARNING if e.type == "Warning" else types.EventType.NORMAL,
        reason=e.reason,
        message=e.message,
        detail=None if e.detail is None else json.dumps(e.detail, separators=(",", ":")),
    )


def object_ref(r: Any) -> ObjectRef:
    return ObjectRef(id=r.id, group=r.group, kind=r.kind)


def wit_options(options: CreateOptions) -> Any:
    return types.CreateOptions(owner=options.owner, finalizers=list(options.finalizers))


class ControllerBackend:
    """The host's controller client of one pass."""

    def __init__(self, client: Any):
        self._client = client

    def update_status(self, text: str) -> None:
        _raising(self._client.update_status, text)

    def set_conditions(self, conditions: List[Condition]) -> None:
        _raising(self._client.set_conditions, [wit_condition(c) for c in conditions])

    def delete_condition(self, type_: str) -> None:
        _raising(self._client.delete_condition, type_)

    def add_event(self, event: Event) -> None:
        _raising(self._client.add_event, wit_event(event))

    def add_finalizer(self, finalizer: str) -> None:
        _raising(self._client.add_finalizer, finalizer)

    def delete_finalizer(self, finalizer: str) -> None:
        _raising(self._client.delete_finalizer, finalizer)

    def add_dependency(self, target: int) -> None:
        _raising(self._client.add_dependency, target)

    def delete_dependency(self, target: int) -> None:
        _raising(self._client.delete_dependency, target)

    def has_incoming_edges(self) -> bool:
        return _raising(self._client.has_incoming_edges)

    def get_owner(self) -> Optional[ObjectRef]:
        owner = _raising(self._client.get_owner)
        return None if owner is None else object_ref(owner)

    def list_dependencies(self) -> List[ObjectRef]:
        return [object_ref(r) for r in _raising(self._client.list_dependencies)]

    def list_dependents(self) -> List[ObjectRef]:
        return [object_ref(r) for r in _raising(self._client.list_dependents)]

    def list_owned(self) -> List[ObjectRef]:
        return [object_ref(r) for r in _raising(self._client.list_owned)]

    def begin(self) -> None:
        _raising(self._client.begin)

    def commit(self) -> None:
        _raising(self._client.commit)

    def rollback(self) -> None:
        _raising(self._client.rollback)

    def kind_client(self, group: str, kind: str) -> "KindBackend":
        key = (group, kind)
        if key not in _KIND_CLIENTS:
            _KIND_CLIENTS[key] = KindBackend(_raising(host.KindClient, group, kind))
        return _KIND_CLIENTS[key]


class KindBackend:
    """A host kind client."""

    def __init__(self, client: Any):
        self._client = client

    def create(self, name: str, spec: str, options: CreateOptions) -> RawObject:
        return raw_object(_raising(self._client.create, name, spec, wit_options(options)))

    def get_or_create(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        o, created = _raising(self._client.get_or_create, name, spec, wit_options(options))
        return raw_object(o), created

    def create_or_update(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        o, created = _raising(self._client.create_or_update, name, spec, wit_options(options))
        return raw_object(o), created

    def get(self, id_: int) -> RawObject:
        return raw_object(_raising(self._client.get, id_))

    def get_by_name(self, name: str) -> RawObject:
        return raw_object(_raising(self._client.get_by_name, name))

    def list(self, after: Optional[int], limit: int) -> Tuple[List[RawObject], Optional[int]]:
        page = _raising(self._client.list, after, limit)
        return [raw_object(o) for o in page.objects], page.next

    def update(self, id_: int, spec: str) -> RawObject:
        return raw_object(_raising(self._client.update, id_, spec))

    def delete(self, id_: int) -> None:
        _raising(self._client.delete, id_)

    def delete_by_name(self, name: str) -> None:
        _raising(self._client.delete_by_name, name)

    def list_owned_objects(self, owner: int) -> List[RawObject]:
        return [raw_object(o) for o in _raising(self._client.list_owned_objects, owner)]
