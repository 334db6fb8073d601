"""The component side: the host's clients behind the SDK's backend surface,
and conversions between the WIT types and the SDK's. Importable only inside
a component built by componentize-py (it needs `wit_world`); everywhere
else importing it raises ImportError, which is how the rest of the SDK
knows it runs under pytest."""

import dataclasses
import json
from typing import Any, Dict, List, Optional, Tuple

from componentize_py_types import Err, Ok
from wit_world.imports import beehive_controller_types as types
from wit_world.imports import config, host, outgoing_handler, streams
from wit_world.imports import wasi_http_types as http_types

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


# How much of a response body one read asks for, and the most one write of
# a request body carries.
_READ_CHUNK = 64 * 1024
_WRITE_CHUNK = 4096


def http_send(request: Any) -> Any:
    """Sends an `http.Request` through wasi:http and reads the whole response."""
    from . import http

    https, authority, path = http.split_url(request.url)
    try:
        headers = http_types.Fields.from_list(
            [(name.lower(), value.encode()) for name, value in request.headers]
        )
    except Err as refused:
        raise http.Failed(f"a header is not allowed: {refused.value}") from None
    outgoing = http_types.OutgoingRequest(headers)
    try:
        outgoing.set_method(_method(request.method))
        outgoing.set_scheme(http_types.Scheme_Https() if https else http_types.Scheme_Http())
        outgoing.set_authority(authority)
        outgoing.set_path_with_query(path)
    except Err:
        raise http.InvalidUrl(f"{request.url!r} was refused") from None
    # A request without a body takes none: the host then sends it without
    # chunked framing and without waiting for a body's end.
    body = outgoing.body() if request.body_bytes else None
    try:
        pending = outgoing_handler.handle(outgoing, _request_options(request))
    except Err as refused:
        raise _http_error(refused.value) from None
    if body is not None:
        with body.write() as stream:
            data = request.body_bytes
            for start in range(0, len(data), _WRITE_CHUNK):
                _write(stream, data[start : start + _WRITE_CHUNK])
        http_types.OutgoingBody.finish(body, None)
    with pending:
        with pending.subscribe() as ready:
            ready.block()
        answer = pending.get()
    if not isinstance(answer, Ok):
        raise http.Failed("the response was lost")
    if isinstance(answer.value, Err):
        raise _http_error(answer.value.value)
    with answer.value.value as incoming:
        status = incoming.status()
        with incoming.headers() as fields:
            headers = [(n, v.decode("utf-8", errors="replace")) for n, v in fields.entries()]
        with incoming.consume() as incoming_body:
            with incoming_body.stream() as stream:
                data = _read_all(stream)
    return http.Response(status=status, body=data, headers=headers)


def _method(name: str) -> Any:
    known = {
        "GET": http_types.Method_Get,
        "HEAD": http_types.Method_Head,
        "POST": http_types.Method_Post,
        "PUT": http_types.Method_Put,
        "DELETE": http_types.Method_Delete,
        "PATCH": http_types.Method_Patch,
        "OPTIONS": http_types.Method_Options,
    }
    return known[name]() if name in known else http_types.Method_Other(name)


def _request_options(request: Any) -> Any:
    if request.timeout_seconds is None:
        return None
    nanos = int(request.timeout_seconds * 1_000_000_000)
    options = http_types.RequestOptions()
    # The host never loosens its own timeouts; a setting it refuses leaves
    # the operator's.
    for setter in (
        options.set_connect_timeout,
        options.set_first_byte_timeout,
        options.set_between_bytes_timeout,
    ):
        try:
            setter(nanos)
        except Err:
            pass
    return options


def _write(stream: Any, chunk: bytes) -> None:
    try:
        stream.blocking_write_and_flush(chunk)
    except Err as failed:
        raise _stream_error(failed.value) from None


def _read_all(stream: Any) -> bytes:
    parts = []
    while True:
        try:
            parts.append(stream.blocking_read(_READ_CHUNK))
        except Err as failed:
            if isinstance(failed.value, streams.StreamError_Closed):
                return b"".join(parts)
            raise _stream_error(failed.value) from None


def _stream_error(error: Any) -> Exception:
    from . import http

    if isinstance(error, streams.StreamError_Closed):
        return http.Failed("the connection closed early")
    code = http_types.http_error_code(error.value)
    if code is not None:
        return _http_error(code)
    # wasmtime 48 gives body errors no error-code, so the host's cap and
    # timeouts are recognised by what they say (as in the Rust SDK).
    text = error.value.to_debug_string()
    if "body size exceeds limit" in text:
        tail = text.rsplit(": ", 1)[-1].removesuffix(" bytes")
        return http.TooLarge(int(tail) if tail.isdigit() else None)
    if "timeout" in text:
        return http.Timeout("reading the response")
    return http.Failed(text)


def _http_error(code: Any) -> Exception:
    from . import http

    if isinstance(code, http_types.ErrorCode_HttpRequestDenied):
        return http.Denied()
    if isinstance(code, http_types.ErrorCode_HttpResponseBodySize):
        return http.TooLarge(code.value)
    if isinstance(code, http_types.ErrorCode_ConnectionTimeout):
        return http.Timeout("connecting")
    if isinstance(
        code, (http_types.ErrorCode_ConnectionReadTimeout, http_types.ErrorCode_HttpResponseTimeout)
    ):
        return http.Timeout("waiting for the response")
    if isinstance(code, http_types.ErrorCode_ConnectionLimitReached):
        return http.Failed("too many requests in flight")
    if isinstance(code, http_types.ErrorCode_HttpRequestUriInvalid):
        return http.InvalidUrl("refused by the host")
    return http.Failed(type(code).__name__.removeprefix("ErrorCode_"))


def registration(
    r: Registration, spec_schema: Optional[str], status_schema: Optional[str]
) -> Any:
    """What `describe` answers: the registration, the schemas derived from
    the controller's types, and which optional exports mean something."""
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
        spec_schema_version=r.spec_version,
        status_schema_version=r.status_version,
        pass_deadline_ms=millis(r.pass_deadline),
        spec_schema=spec_schema,
        status_schema=status_schema,
        validates=r.validates,
        migrates=r.spec_version != 0 or r.status_version != 0,
    )


def reconcile(controller: Any, obj: Any, client: Any) -> Any:
    from .controller import run_pass

    # Contract 0.2 does not carry the kind of a pass's object: it is the
    # controller's own.
    own = controller.registration
    raw = raw_object(obj, own.group, own.kind)
    action = run_pass(controller, ControllerBackend(client), raw)
    return result(action)


def convert(controller: Any, document: str, from_version: int, raw: str) -> str:
    """Upgrades a stored spec or status (`document`) written at
    `from_version`, as the migrator export answers the host."""
    converter = controller.convert_spec if document == "spec" else controller.convert_status
    try:
        return json.dumps(converter(from_version, json.loads(raw)))
    except Exception as failure:  # noqa: BLE001 - every failure is the host's answer
        raise Err(f"{type(failure).__name__}: {failure}") from None


def validate(controller: Any, spec_text: str) -> Any:
    """Runs `controller.validate` over a spec, as `validate` answers the
    host; a spec that does not decode is one violation."""
    from .codec import from_json
    from .errors import DecodeError

    try:
        spec = from_json(controller.spec_type, spec_text, "spec")
    except DecodeError as error:
        return [types.Violation(path="spec", message=str(error))]
    return [types.Violation(path=v.path, message=v.message) for v in controller.validate(spec)]


def result(action: Action) -> Any:
    if action.verdict == "settled":
        verdict = types.Verdict_Settled()
    elif action.verdict == "unsettled":
        verdict = types.Verdict_Unsettled()
    else:
        # The host takes the lines after the first as the event's detail.
        trace = f"\n{action.trace}" if action.trace else ""
        verdict = types.Verdict_Failed(action.message + trace)
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
    if cls in (errors.Other, errors.NotGranted) and isinstance(value, str):
        denied = errors.NotGranted.parse(value)
        if denied is not None:
            return denied
    if cls is errors.NotGranted:
        # A denial whose message names no kind and verb: still an error.
        return errors.Other(value)
    return cls(value if value is not None else case)


def _copied(cls: Any, source: Any, **given: Any) -> Any:
    """The dataclass `cls` with each field read from `source` by the same
    name, except those `given`: the WIT records and the SDK's model share
    their field names."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in given]
    return cls(**{name: getattr(source, name) for name in names}, **given)


def raw_object(o: Any, group: str, kind: str) -> RawObject:
    """An object the host handed over, of (`group`, `kind`), which contract
    0.2 does not carry; an absent list is an empty one."""
    meta = _copied(
        Meta,
        o,
        group=group,
        kind=kind,
        finalizers=list(o.finalizers or []),
        conditions=[condition(c) for c in o.conditions or []],
        labels={label.key: label.value for label in o.labels or []},
    )
    return RawObject(meta=meta, spec=o.spec, status=o.status)


def condition(c: Any) -> Condition:
    return _copied(Condition, c, status=_STATUS_FROM_WIT[c.status])


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
    labels = None
    if options.labels is not None:
        labels = [types.Label(key=k, value=v) for k, v in sorted(options.labels.items())]
    return types.CreateOptions(owner=options.owner, finalizers=list(options.finalizers), labels=labels)


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
            _KIND_CLIENTS[key] = KindBackend(_raising(host.KindClient, group, kind), group, kind)
        return _KIND_CLIENTS[key]


class KindBackend:
    """A host kind client, and its kind: the objects it reads do not carry
    it."""

    def __init__(self, client: Any, group: str, kind: str):
        self._client, self._group, self._kind = client, group, kind

    def _object(self, o: Any) -> RawObject:
        return raw_object(o, self._group, self._kind)

    def create(self, name: str, spec: str, options: CreateOptions) -> RawObject:
        return self._object(_raising(self._client.create, name, spec, wit_options(options)))

    def get_or_create(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        o, created = _raising(self._client.get_or_create, name, spec, wit_options(options))
        return self._object(o), created

    def create_or_update(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        o, created = _raising(self._client.create_or_update, name, spec, wit_options(options))
        return self._object(o), created

    def get(self, id_: int) -> RawObject:
        return self._object(_raising(self._client.get, id_))

    def get_by_name(self, name: str) -> RawObject:
        return self._object(_raising(self._client.get_by_name, name))

    def list(
        self, after: Optional[int], limit: int, selector: Optional[str] = None
    ) -> Tuple[List[RawObject], Optional[int]]:
        page = _raising(self._client.list, after, limit, selector)
        return [self._object(o) for o in page.objects], page.next

    def update(self, id_: int, spec: str) -> RawObject:
        return self._object(_raising(self._client.update, id_, spec))

    def delete(self, id_: int) -> None:
        _raising(self._client.delete, id_)

    def delete_by_name(self, name: str) -> None:
        _raising(self._client.delete_by_name, name)

    def list_owned_objects(self, owner: int) -> List[RawObject]:
        return [self._object(o) for o in _raising(self._client.list_owned_objects, owner)]
