"""JSON Schemas (draft 2020-12) from the dataclasses a controller decodes
its spec and status into, so the host can check every spec write of the
kind before it commits (`export` declares them).

The schema says what `codec.decode` accepts: a field without a default is
required, `Optional[X]` also takes null, lists and dicts take their item
type, unknown keys are allowed (the decoder ignores them). A field's
description is its `#:` comment (read from the source while the component
is built) or `field(metadata={"description": ...})`; a class's is its
docstring."""

import dataclasses
import inspect
import json
import re
import typing
from typing import Any, Dict, Optional

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
_FIELD_LINE = re.compile(r"^\s+(\w+)\s*:")


def json_schema(cls: Any) -> Optional[Dict[str, Any]]:
    """The schema of `cls`, or None when it names no type (`Any`, None)."""
    if cls is None or cls is Any or cls is object:
        return None
    schema = _schema(cls, set())
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text(cls: Any) -> Optional[str]:
    """`json_schema(cls)` as compact JSON text."""
    schema = json_schema(cls)
    return None if schema is None else json.dumps(schema, separators=(",", ":"))


def _schema(cls: Any, seen: set) -> Dict[str, Any]:
    if cls is Any or cls is object:
        return {}
    origin = typing.get_origin(cls)
    if origin is typing.Union:
        options = [o for o in typing.get_args(cls) if o is not type(None)]
        branches = [_schema(o, seen) for o in options]
        if type(None) in typing.get_args(cls):
            branches.append({"type": "null"})
        return branches[0] if len(branches) == 1 else {"anyOf": branches}
    if origin in (list, typing.List) or cls is list:
        args = typing.get_args(cls)
        return {"type": "array", "items": _schema(args[0], seen)} if args else {"type": "array"}
    if origin in (dict, typing.Dict) or cls is dict:
        args = typing.get_args(cls)
        if len(args) == 2:
            return {"type": "object", "additionalProperties": _schema(args[1], seen)}
        return {"type": "object"}
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls, seen)
    if cls in _SCALARS:
        if cls is float:
            return {"type": "number"}
        return {"type": _SCALARS[cls]}
    return {}


def _dataclass(cls: Any, seen: set) -> Dict[str, Any]:
    if cls in seen:
        # A type that contains itself: described once, then left open.
        return {"type": "object"}
    seen = seen | {cls}
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        # A hint naming what cannot be found here: that field is left open.
        hints = {}
    comments = _field_comments(cls)
    properties: Dict[str, Any] = {}
    required = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        schema = _schema(hints.get(field.name, Any), seen)
        description = field.metadata.get("description") or comments.get(field.name)
        if description:
            schema = {**schema, "description": description}
        properties[field.name] = schema
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    description = _docstring(cls)
    if description:
        schema["description"] = description
    return schema


def _docstring(cls: Any) -> Optional[str]:
    doc = inspect.getdoc(cls)
    # A dataclass without a docstring is given its signature as one.
    if not doc or doc.startswith(f"{cls.__name__}("):
        return None
    return doc


def _field_comments(cls: Any) -> Dict[str, str]:
    """The `#:` comments above each field, when the source can be read."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    comments: Dict[str, str] = {}
    pending = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        match = _FIELD_LINE.match(line)
        if match and pending:
            comments[match.group(1)] = " ".join(pending)
        pending = []
    return comments
