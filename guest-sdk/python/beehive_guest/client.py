"""The clients a pass uses: `Client`, bound to the pass's object, and
`KindClient` for any kind. Both speak the SDK's types and raise the
exceptions of `beehive_guest.errors`; both stop working (`ClientClosed`)
once the pass returns."""

import contextlib
from typing import Any, Iterator, List, Optional, Tuple

from . import codec
from .errors import ClientClosed
from .model import Condition, CreateOptions, Event, Object, ObjectRef, RawObject

#: How many objects one page of `KindClient.list` asks the host for.
LIST_PAGE = 500


def decode_object(raw: RawObject, spec_type: Any, status_type: Any) -> Object:
    """`raw` with its spec and status decoded."""
    name = raw.meta.name
    spec = codec.from_json(spec_type, raw.spec, f"spec of {name}")
    status = None
    if raw.status is not None:
        status = codec.from_json(status_type, raw.status, f"status of {name}")
    return Object(meta=raw.meta, spec=spec, status=status)


class Client:
    """What a pass writes about its object, and clients for other kinds."""

    def __init__(self, backend: Any, status_type: Any = None):
        self._backend = backend
        self._status_type = status_type

    def _raw(self) -> Any:
        if self._backend is None:
            raise ClientClosed("the pass has returned; its client cannot be used")
        return self._backend

    def close(self) -> None:
        """Ends the client's use: every later call raises `ClientClosed`."""
        self._backend = None

    def update_status(self, status: Any) -> None:
        """Records the status (a dataclass or JSON value); equal JSON writes
        nothing."""
        self._raw().update_status(codec.to_json(status))

    def set_condition(self, condition: Condition) -> None:
        """Writes one condition."""
        self._raw().set_conditions([condition])

    def set_conditions(self, conditions: List[Condition]) -> None:
        """Writes several conditions as one write."""
        self._raw().set_conditions(list(conditions))

    def delete_condition(self, type_: str) -> None:
        """Removes the condition of `type_`, if there is one."""
        self._raw().delete_condition(type_)

    def add_event(self, event: Event) -> None:
        """Records an observation in the object's timeline."""
        self._raw().add_event(event)

    def add_finalizer(self, finalizer: str) -> None:
        """Adds a finalizer (refused with DeletionPending once the object is
        being deleted)."""
        self._raw().add_finalizer(finalizer)

    def delete_finalizer(self, finalizer: str) -> None:
        """Removes a finalizer; clearing the last lets a deleting object go."""
        self._raw().delete_finalizer(finalizer)

    def add_dependency(self, target: int) -> None:
        """Declares that this object depends on object `target`."""
        self._raw().add_dependency(target)

    def delete_dependency(self, target: int) -> None:
        """Drops the dependency on `target`."""
        self._raw().delete_dependency(target)

    def has_incoming_edges(self) -> bool:
        """Whether anything with a live claim points at this object."""
        return self._raw().has_incoming_edges()

    def owner(self) -> Optional[ObjectRef]:
        """The owner, if any."""
        return self._raw().get_owner()

    def dependencies(self) -> List[ObjectRef]:
        """What this object depends on."""
        return self._raw().list_dependencies()

    def dependents(self) -> List[ObjectRef]:
        """What depends on this object."""
        return self._raw().list_dependents()

    def owned(self) -> List[ObjectRef]:
        """What this object owns."""
        return self._raw().list_owned()

    @contextlib.contextmanager
    def transaction(self) -> Iterator["Client"]:
        """A transaction frame: committed when the block ends, rolled back
        when it raises."""
        self._raw().begin()
        try:
            yield self
        except BaseException:
            with contextlib.suppress(Exception):
                self._raw().rollback()
            raise
        self._raw().commit()

    def kind(self, group: str, kind: str, spec_type: Any = None, status_type: Any = None) -> "KindClient":
        """A client for (`group`, `kind`) whose calls join this pass."""
        return KindClient(self, self._raw().kind_client(group, kind), spec_type, status_type)


class KindClient:
    """Objects of one kind, read and written inside the current pass."""

    def __init__(self, parent: Client, backend: Any, spec_type: Any, status_type: Any):
        self._parent = parent
        self._backend = backend
        self._types = (spec_type, status_type)

    def _raw(self) -> Any:
        self._parent._raw()
        return self._backend

    def _decode(self, raw: RawObject) -> Object:
        return decode_object(raw, *self._types)

    def create(self, name: str, spec: Any, options: Optional[CreateOptions] = None) -> Object:
        """Creates `name` (NameTaken if something holds it)."""
        return self._decode(self._raw().create(name, codec.to_json(spec), options or CreateOptions()))

    def get_or_create(self, name: str, spec: Any, options: Optional[CreateOptions] = None) -> Tuple[Object, bool]:
        """What holds `name`, creating it if nothing does; True if created."""
        raw, created = self._raw().get_or_create(name, codec.to_json(spec), options or CreateOptions())
        return self._decode(raw), created

    def create_or_update(self, name: str, spec: Any, options: Optional[CreateOptions] = None) -> Tuple[Object, bool]:
        """Makes `name` hold `spec`; True if created."""
        raw, created = self._raw().create_or_update(name, codec.to_json(spec), options or CreateOptions())
        return self._decode(raw), created

    def get(self, id_: int) -> Object:
        """Object `id_` (NotFound if there is none)."""
        return self._decode(self._raw().get(id_))

    def get_by_name(self, name: str) -> Object:
        """What holds `name` (NotFound if nothing does)."""
        return self._decode(self._raw().get_by_name(name))

    def list(self, selector: Optional[str] = None) -> List[Object]:
        """Every object of the kind, by id, read page by page; with a
        `selector` (kubectl's grammar: `"tier in (web,db),!canary"`), those
        whose labels it matches. A selector that does not parse raises
        InvalidOption naming the position."""
        objects, after = [], None
        while True:
            page, after = self._raw().list(after, LIST_PAGE, selector)
            objects.extend(self._decode(raw) for raw in page)
            if after is None:
                return objects

    def update(self, id_: int, spec: Any) -> Object:
        """Replaces the spec of `id_`."""
        return self._decode(self._raw().update(id_, codec.to_json(spec)))

    def delete(self, id_: int) -> None:
        """Requests deletion of `id_`."""
        self._raw().delete(id_)

    def delete_by_name(self, name: str) -> None:
        """Requests deletion of whatever holds `name`; absent is fine."""
        self._raw().delete_by_name(name)

    def owned_by(self, owner: int) -> List[Object]:
        """The objects of this kind `owner` owns; one that does not decode
        raises DecodeError rather than being skipped."""
        return [self._decode(raw) for raw in self._raw().list_owned_objects(owner)]
