"""A fake host for unit tests outside wasm (plain `pytest`): it records what
a pass wrote and keeps objects of other kinds in memory.

    from beehive_guest.fake import FakeClient

    fake = FakeClient()
    action = fake.run(Services(), spec={"port": 8080})
    assert action == Action.settled()
    assert fake.conditions["Configured"].status is True

A fake made with `store_grants={"read": [...], "write": [...]}` checks kind
clients as the host checks a policy's `[store]` section: the kind of the
object `run` hands the pass is always read-write, any other only as granted
(patterns `Kind.group`, `*.group`, `*.*.suffix`, `*`), and a denied call
raises `NotGranted` and is remembered in `denials`. Without it every call is
allowed.
"""

import dataclasses
import itertools
import json
from typing import Any, Dict, List, Optional, Set, Tuple

from . import codec
from .controller import Controller, run_pass
from .errors import DeletionPending, NameTaken, NoTransaction, NotFound, NotGranted
from .model import Action, Condition, CreateOptions, Event, Meta, ObjectRef, RawObject
from .selector import matches as selector_matches
from .selector import parse as parse_selector

_CONFIG: Dict[str, str] = {}


def set_config(key: str, value: str) -> None:
    """Gives `key` the value `value` for `beehive_guest.config.get`."""
    _CONFIG[key] = value


def clear_config() -> None:
    """Forgets every value `set_config` gave."""
    _CONFIG.clear()


def config_value(key: str) -> Optional[str]:
    return _CONFIG.get(key)


def config_keys() -> List[str]:
    return sorted(_CONFIG)


_HTTP_STUBS: Dict[Tuple[str, str], Any] = {}
_HTTP_SENT: List[Any] = []


def stub_http(method: str, url: str, answer: Any) -> None:
    """Answers `method url` with `answer`: an `http.Response`, or an
    `http.HttpError` to raise. A request nothing stubs is denied, as one the
    operator's policy does not grant."""
    _HTTP_STUBS[(method.upper(), url)] = answer


def sent_requests() -> List[Any]:
    """The `http.Request`s sent since the last `clear_http`, in order."""
    return list(_HTTP_SENT)


def clear_http() -> None:
    """Forgets every stub and every sent request."""
    _HTTP_STUBS.clear()
    _HTTP_SENT.clear()


def send_http(request: Any) -> Any:
    from . import http

    # As the component does: a malformed URL is refused before anything.
    http.split_url(request.url)
    _HTTP_SENT.append(request)
    answer = _HTTP_STUBS.get((request.method, request.url), http.Denied())
    if isinstance(answer, http.HttpError):
        raise answer
    return answer


class FakeClient:
    """What one pass wrote, and an in-memory store for kind clients."""

    def __init__(self, store_grants: Optional[Dict[str, List[str]]] = None) -> None:
        #: What the plugin may touch besides its own kind; None allows all.
        self.store_grants = store_grants
        #: (kind, verb) pairs denied so far, each once.
        self.denials: List[Tuple[str, str]] = []
        self._own = ""
        #: The last status written, as parsed JSON.
        self.status: Any = None
        #: Conditions by type.
        self.conditions: Dict[str, Condition] = {}
        #: Events, in order.
        self.events: List[Event] = []
        self.added_finalizers: List[str] = []
        self.deleted_finalizers: List[str] = []
        self.dependencies: Set[int] = set()
        self.open_frames = 0
        self.commits = 0
        self.rollbacks = 0
        self._objects: Dict[int, Tuple[RawObject, Optional[int]]] = {}
        self._ids = itertools.count(1)
        self._deleting: Optional[str] = None

    def run(self, controller: Controller, spec: Any, status: Any = None, **meta: Any) -> Action:
        """One pass of `controller` over an object with `spec` and `status`
        (dataclasses or JSON values; `meta` sets Meta fields such as
        name or deletion_requested_at_ms), as the host would run it."""
        registration = getattr(controller, "registration", None)
        kind = {"group": registration.group, "kind": registration.kind} if registration else {}
        raw = RawObject(
            meta=Meta(**{"name": "test", **kind, **meta}),
            spec=codec.to_json(spec),
            status=None if status is None else codec.to_json(status),
        )
        self._own = _kind_name(raw.meta.group, raw.meta.kind)
        # The host refuses a finalizer added to an object being deleted.
        self._deleting = f"{self._own}/{raw.meta.name}" if raw.meta.deleting else None
        return run_pass(controller, self, raw)

    def check(self, kind: str, verb: str) -> None:
        """Raises `NotGranted` unless the grants allow `verb` on `kind`."""
        if self.store_grants is None or kind == self._own:
            return
        granted = list(self.store_grants.get("write", []))
        if verb == "read":
            granted += self.store_grants.get("read", [])
        if any(_matches(pattern, kind) for pattern in granted):
            return
        if (kind, verb) not in self.denials:
            self.denials.append((kind, verb))
        raise NotGranted(kind, verb)

    def _check_object(self, id_: Optional[int], verb: str) -> None:
        entry = self._objects.get(id_) if id_ is not None else None
        if entry is not None:
            self.check(_kind_name(entry[0].meta.group, entry[0].meta.kind), verb)

    # The controller client's surface.

    def update_status(self, text: str) -> None:
        self.status = json.loads(text)

    def set_conditions(self, conditions: List[Condition]) -> None:
        for condition in conditions:
            self.conditions[condition.type] = condition

    def delete_condition(self, type_: str) -> None:
        self.conditions.pop(type_, None)

    def add_event(self, event: Event) -> None:
        self.events.append(event)

    def add_finalizer(self, finalizer: str) -> None:
        if self._deleting is not None:
            raise DeletionPending(self._deleting)
        self.added_finalizers.append(finalizer)

    def delete_finalizer(self, finalizer: str) -> None:
        self.deleted_finalizers.append(finalizer)

    def add_dependency(self, target: int) -> None:
        self._check_object(target, "read")
        self.dependencies.add(target)

    def delete_dependency(self, target: int) -> None:
        self.dependencies.discard(target)

    def has_incoming_edges(self) -> bool:
        return False

    def get_owner(self) -> Optional[ObjectRef]:
        return None

    def list_dependencies(self) -> List[ObjectRef]:
        return [self._ref(i) for i in sorted(self.dependencies) if i in self._objects]

    def list_dependents(self) -> List[ObjectRef]:
        return []

    def list_owned(self) -> List[ObjectRef]:
        return []

    def begin(self) -> None:
        self.open_frames += 1

    def commit(self) -> None:
        self._close_frame()
        self.commits += 1

    def rollback(self) -> None:
        self._close_frame()
        self.rollbacks += 1

    def _close_frame(self) -> None:
        if self.open_frames == 0:
            raise NoTransaction("no frame is open")
        self.open_frames -= 1

    def kind_client(self, group: str, kind: str) -> "FakeKind":
        return FakeKind(self, group, kind)

    # The in-memory store behind kind clients.

    def objects(self) -> List[RawObject]:
        """Every object kind clients made, by id."""
        return [raw for raw, _ in sorted(self._objects.values(), key=lambda o: o[0].meta.id)]

    def _ref(self, id_: int) -> ObjectRef:
        meta = self._objects[id_][0].meta
        return ObjectRef(id=id_, group=meta.group, kind=meta.kind)


def _kind_name(group: str, kind: str) -> str:
    return f"{kind}.{group}" if group else kind


def _matches(pattern: str, kind: str) -> bool:
    """Whether store-grant `pattern` names `kind` (`Kind.group`)."""
    if pattern == "*":
        return True
    _, _, group = kind.partition(".")
    if pattern.startswith("*.*."):
        suffix = pattern[len("*.*."):]
        return group.endswith("." + suffix) and len(group) > len(suffix) + 1
    if pattern.startswith("*."):
        return group == pattern[len("*."):]
    return pattern == kind


class FakeKind:
    """A kind client over the fake's in-memory store."""

    def __init__(self, fake: FakeClient, group: str, kind: str):
        self._fake, self._group, self._kind = fake, group, kind
        self._name = _kind_name(group, kind)

    def _may(self, verb: str) -> None:
        self._fake.check(self._name, verb)

    def _mine(self) -> List[Tuple[RawObject, Optional[int]]]:
        return [
            entry
            for entry in self._fake._objects.values()
            if (entry[0].meta.group, entry[0].meta.kind) == (self._group, self._kind)
        ]

    def _find(self, name: str) -> Optional[RawObject]:
        return next((raw for raw, _ in self._mine() if raw.meta.name == name), None)

    def create(self, name: str, spec: str, options: CreateOptions) -> RawObject:
        self._may("write")
        self._fake._check_object(options.owner, "read")
        if self._find(name) is not None:
            raise NameTaken(name)
        id_ = next(self._fake._ids)
        labels = dict(options.labels or {})
        meta = Meta(
            id=id_, group=self._group, kind=self._kind, name=name,
            finalizers=list(options.finalizers), labels=labels,
        )
        raw = RawObject(meta=meta, spec=spec)
        self._fake._objects[id_] = (raw, options.owner)
        return dataclasses.replace(raw)

    def get_or_create(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        self._may("write")
        found = self._find(name)
        return (found, False) if found is not None else (self.create(name, spec, options), True)

    def create_or_update(self, name: str, spec: str, options: CreateOptions) -> Tuple[RawObject, bool]:
        self._may("write")
        found = self._find(name)
        if found is None:
            return self.create(name, spec, options), True
        if options.labels is not None:
            found.meta.labels = dict(options.labels)
        return self.update(found.meta.id, spec), False

    def get(self, id_: int) -> RawObject:
        self._may("read")
        entry = self._fake._objects.get(id_)
        if entry is None or (entry[0].meta.group, entry[0].meta.kind) != (self._group, self._kind):
            raise NotFound(f"{self._kind} {id_}")
        return entry[0]

    def get_by_name(self, name: str) -> RawObject:
        self._may("read")
        found = self._find(name)
        if found is None:
            raise NotFound(f"{self._kind}/{name}")
        return found

    def list(
        self, after: Optional[int], limit: int, selector: Optional[str] = None
    ) -> Tuple[List[RawObject], Optional[int]]:
        self._may("read")
        wanted = parse_selector(selector or "")
        ids = sorted(
            raw.meta.id
            for raw, _ in self._mine()
            if (after is None or raw.meta.id > after) and selector_matches(wanted, raw.meta.labels)
        )
        page = [self._fake._objects[i][0] for i in ids[:limit]]
        return page, (page[-1].meta.id if len(ids) > limit else None)

    def update(self, id_: int, spec: str) -> RawObject:
        self._may("write")
        raw = self.get(id_)
        if raw.meta.deleting:
            raise DeletionPending(f"{self._kind}/{raw.meta.name}")
        if raw.spec != spec:
            raw.spec = spec
            raw.meta.generation += 1
        return raw

    def delete(self, id_: int) -> None:
        self._may("write")
        raw = self.get(id_)
        raw.meta.deletion_requested_at_ms = raw.meta.deletion_requested_at_ms or 1
        if not raw.meta.finalizers:
            del self._fake._objects[id_]

    def delete_by_name(self, name: str) -> None:
        self._may("write")
        found = self._find(name)
        if found is not None:
            self.delete(found.meta.id)

    def list_owned_objects(self, owner: int) -> List[RawObject]:
        self._may("read")
        return [raw for raw, raw_owner in self._mine() if raw_owner == owner]
