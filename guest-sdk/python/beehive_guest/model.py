"""The values a plugin works with, as plain Python: the same under pytest
(with the fake client) and inside a component."""

import dataclasses
from datetime import timedelta
from typing import Any, Dict, List, Optional, Union

#: A duration: a `timedelta`, or a number of seconds.
Duration = Union[timedelta, int, float]


def millis(duration: Optional[Duration]) -> Optional[int]:
    """`duration` in whole milliseconds, or None."""
    if duration is None:
        return None
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {duration!r}")
    return int(round(seconds * 1000))


@dataclasses.dataclass
class Registration:
    """What a plugin reconciles and how it wants to be driven. Only the kind
    is required; what is left as None takes the host's setting."""

    group: str
    kind: str
    finalizers: List[str] = dataclasses.field(default_factory=list)
    #: Passes at once (the host's default is 1).
    concurrency: Optional[int] = None
    #: The backstop scan for owed passes (must be positive).
    owed_pass_interval: Optional[Duration] = None
    #: A pass of every object on this cadence (zero turns it off).
    full_pass_interval: Optional[Duration] = None
    #: A pass of each object this long after its last (zero turns it off).
    individual_pass_interval: Optional[Duration] = None
    #: A pass of every object each time the host starts.
    startup_full_pass: Optional[bool] = None
    #: The cap of the backoff ladder (must be positive).
    max_retry_interval: Optional[Duration] = None
    #: The CPU time one pass may use (the operator's ceiling still applies).
    pass_deadline: Optional[Duration] = None
    #: The schema versions this release writes specs and statuses at; older
    #: stored documents go through `Controller.convert_spec` /
    #: `convert_status` before a pass sees them.
    spec_version: int = 0
    status_version: int = 0
    #: Whether the host calls `Controller.validate` on every spec write of
    #: the kind.
    validates: bool = False


@dataclasses.dataclass(frozen=True)
class Violation:
    """One way a spec breaks a controller's rules, as `Controller.validate`
    reports it: where (`spec.port`) and the rule, in words."""

    path: str
    message: str


@dataclasses.dataclass(frozen=True)
class Action:
    """What happens after a pass. `reconcile` returns one (None means
    `Action.settled()`); an exception becomes `Action.backoff(...)` through
    `Controller.error_policy`.

    - `settled()`: the pass observed the current generation;
    - `unsettled()`: work done, not caught up: back after the owed-pass interval;
    - `backoff(message)`: failed: the backoff ladder and a ReconcileFailed event;
    - `.requeue_after(d)`: the next pass after `d` (not for backoff).
    """

    verdict: str
    message: str = ""
    requeue_after_ms: Optional[int] = None
    #: The traceback of the exception a failed pass raised, if it raised
    #: one: the host shows it as the ReconcileFailed event's detail. Not
    #: part of what an action is (two actions compare by the rest).
    trace: str = dataclasses.field(default="", compare=False, repr=False)

    @staticmethod
    def settled() -> "Action":
        return Action("settled")

    @staticmethod
    def unsettled() -> "Action":
        return Action("unsettled")

    @staticmethod
    def backoff(message: Any) -> "Action":
        return Action("failed", str(message))

    def requeue_after(self, delay: Duration) -> "Action":
        return dataclasses.replace(self, requeue_after_ms=millis(delay))


@dataclasses.dataclass
class Condition:
    """A per-type observation about an object. `status` is True, False or
    None (unknown). `liveness` marks one that holds only inside the process
    that wrote it. The host sets the last three on read."""

    type: str
    status: Optional[bool]
    reason: str = ""
    message: str = ""
    liveness: bool = False
    unconfirmed: bool = False
    transitioned_at_ms: int = 0
    updated_at_ms: int = 0


@dataclasses.dataclass
class Event:
    """An observation for the object's timeline. Runs aggregate by
    (category, type, reason); the latest message and detail win."""

    reason: str
    message: str = ""
    #: "Normal" or "Warning".
    type: str = "Normal"
    category: str = ""
    #: A JSON-serialisable payload.
    detail: Any = None

    @staticmethod
    def normal(reason: str, message: str = "", **fields: Any) -> "Event":
        return Event(reason, message, type="Normal", **fields)

    @staticmethod
    def warning(reason: str, message: str = "", **fields: Any) -> "Event":
        return Event(reason, message, type="Warning", **fields)


@dataclasses.dataclass
class ObjectRef:
    """A pointer to a related object."""

    id: int
    group: str
    kind: str


@dataclasses.dataclass
class Meta:
    """Identity and metadata of an object."""

    id: int = 0
    group: str = ""
    kind: str = ""
    name: str = ""
    generation: int = 1
    observed_generation: Optional[int] = None
    #: When a pass last recorded what it observed, if one has.
    observed_at_ms: Optional[int] = None
    resource_version: int = 0
    deletion_requested_at_ms: Optional[int] = None
    finalizers: List[str] = dataclasses.field(default_factory=list)
    conditions: List[Condition] = dataclasses.field(default_factory=list)
    #: Its labels (`{"tier": "web"}`).
    labels: Dict[str, str] = dataclasses.field(default_factory=dict)
    created_at_ms: int = 0
    updated_at_ms: int = 0

    @property
    def deleting(self) -> bool:
        """Whether its deletion was requested."""
        return self.deletion_requested_at_ms is not None

    def condition(self, type_: str) -> Optional[Condition]:
        """Its condition of `type_`, if any."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclasses.dataclass
class Object:
    """An object: metadata, and spec and status decoded to the controller's
    types (plain dicts when it names none)."""

    meta: Meta
    spec: Any
    status: Any = None


@dataclasses.dataclass
class RawObject:
    """An object as the host hands it: spec and status as JSON text."""

    meta: Meta
    spec: str
    status: Optional[str] = None


@dataclasses.dataclass
class CreateOptions:
    """An owner (deleting it cascades), finalizers and labels for a new
    object. On an object that exists, a create-or-update replaces its labels
    with `labels`; None leaves them as they are."""

    owner: Optional[int] = None
    finalizers: List[str] = dataclasses.field(default_factory=list)
    labels: Optional[Dict[str, str]] = None
