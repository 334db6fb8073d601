"""The exceptions a host call raises: one class per error of the WIT
contract, grouped under a few bases so a plugin can catch a family.

    BeehiveError
    ├── NotFound
    ├── Conflict: NameTaken, DeletionPending, DependencyCycle
    ├── InvalidInput: InvalidName, WrongKind, InvalidOption, InvalidDocument,
    │                 DuplicateConditionType, InvalidCondition, InvalidResult
    ├── DecodeError
    ├── TransactionError: TransactionTimedOut, NoTransaction,
    │                     ConcurrentNestedTransaction, StaleTransaction
    ├── ClientClosed (the pass returned; its client is no longer usable)
    ├── NotGranted (the plugin's policy does not grant the kind and verb)
    └── HostError: NotLoaded, NoController, StoreInUse, SchemaVersionDowngrade,
                   WatchTooOld, WatchTooNew, Stopped, Other
"""


class BeehiveError(Exception):
    """Every error a host call raises."""


class NotFound(BeehiveError):
    """The object (or what the call names) does not exist."""


class Conflict(BeehiveError):
    """The store holds something that stops the write."""


class NameTaken(Conflict):
    """Another object holds the name."""


class DeletionPending(Conflict):
    """The object is being deleted."""


class DependencyCycle(Conflict):
    """The dependency would close a cycle; `cycle` names it."""

    def __init__(self, cycle):
        self.cycle = list(cycle)
        super().__init__(" → ".join(self.cycle))


class InvalidInput(BeehiveError):
    """What the call was given breaks a rule."""


class InvalidName(InvalidInput):
    """A name breaks the naming policy."""


class WrongKind(InvalidInput):
    """The object is of another kind than the client's."""


class InvalidOption(InvalidInput):
    """An option is not acceptable."""


class InvalidDocument(InvalidInput):
    """A spec or status is not an acceptable JSON document."""


class DuplicateConditionType(InvalidInput):
    """Two conditions of one type in one write."""


class InvalidCondition(InvalidInput):
    """A condition breaks a rule."""


class InvalidResult(InvalidInput):
    """The pass returned something the host cannot use."""


class DecodeError(BeehiveError):
    """A document does not fit the type it is read as."""


class TransactionError(BeehiveError):
    """A transaction frame cannot be used as asked."""


class TransactionTimedOut(TransactionError):
    """The transaction was open too long."""


class NoTransaction(TransactionError):
    """Commit or rollback with no frame open."""


class ConcurrentNestedTransaction(TransactionError):
    """A nested frame is already open elsewhere."""


class StaleTransaction(TransactionError):
    """The frame belongs to an earlier pass."""


class ClientClosed(BeehiveError):
    """The pass returned: its client can no longer be used."""


class NotGranted(BeehiveError):
    """The plugin's policy (its `[store]` section) does not grant `verb`
    (`"read"` or `"write"`) on `kind` (`Kind.group`)."""

    #: How the host's message for a denial starts (contract 0.2 carries it
    #: in its `not-granted` case; 0.1 carried it in `other`).
    PREFIX = "not granted: "

    def __init__(self, kind: str, verb: str, message: str = ""):
        self.kind, self.verb = kind, verb
        super().__init__(message or f"{self.PREFIX}{verb} on {kind}")

    @classmethod
    def parse(cls, message: str):
        """The denial `message` reports, or None when it is not one."""
        if not message.startswith(cls.PREFIX):
            return None
        verb, _, rest = message[len(cls.PREFIX):].partition(" on ")
        kind = rest.split(" ")[0]
        if verb not in ("read", "write") or not kind:
            return None
        return cls(kind, verb, message)


class HostError(BeehiveError):
    """The host cannot do it now."""


class NotLoaded(HostError):
    """A part of the object was not loaded."""


class NoController(HostError):
    """No controller reconciles the kind."""


class StoreInUse(HostError):
    """Another process holds the store."""


class SchemaVersionDowngrade(HostError):
    """A stored document is newer than this plugin writes."""


class WatchTooOld(HostError):
    """A watch position is too old."""


class WatchTooNew(HostError):
    """A watch position is in the future."""


class Stopped(HostError):
    """The host is stopping."""


class Other(HostError):
    """Anything else the host reports."""


#: The exception class for each case of the WIT `error` variant, by the
#: name componentize-py gives the case (`Error_NotFound` → `NotFound`).
BY_CASE = {
    cls.__name__: cls
    for cls in (
        NotFound, NameTaken, DeletionPending, DependencyCycle, InvalidName, WrongKind,
        InvalidOption, InvalidDocument, DuplicateConditionType, InvalidCondition,
        InvalidResult, TransactionTimedOut, NoTransaction, ConcurrentNestedTransaction,
        StaleTransaction, NotLoaded, NoController, StoreInUse, SchemaVersionDowngrade,
        WatchTooOld, WatchTooNew, Stopped, Other,
    )
}
BY_CASE["Decode"] = DecodeError
BY_CASE["NotGranted"] = NotGranted
BY_CASE["ReconcileReturned"] = ClientClosed
