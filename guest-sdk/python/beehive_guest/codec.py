"""Specs and statuses between JSON and the controller's types: dataclasses
(nested ones, lists and dicts of them, Optional fields), or plain JSON values
when a controller names no type. Unknown keys are ignored, as Rust's serde
does; a missing field without a default, or a value of the wrong type, is a
`DecodeError` naming where."""

import dataclasses
import json
import typing
from typing import Any

from .errors import DecodeError, InvalidDocument


def from_json(cls: Any, text: str, where: str) -> Any:
    """Parses `text` and decodes it as `cls`."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise DecodeError(f"{where}: not JSON: {error}") from None
    return decode(cls, value, where)


def to_json(value: Any) -> str:
    """`value` (a dataclass or a JSON value) as compact JSON text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InvalidDocument(f"not JSON-serialisable: {error}") from None


def decode(cls: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) as `cls`."""
    if cls is None or cls is Any or cls is object:
        return value
    origin = typing.get_origin(cls)
    if origin is typing.Union:
        options = typing.get_args(cls)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return decode(option, value, where)
            except DecodeError as error:
                errors.append(str(error))
        raise DecodeError("; ".join(errors))
    if origin in (list, typing.List):
        (item,) = typing.get_args(cls) or (Any,)
        _expect(value, list, where)
        return [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Dict):
        _, item = typing.get_args(cls) or (str, Any)
        _expect(value, dict, where)
        return {k: decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls, value, where)
    if cls is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise DecodeError(f"{where}: expected a number, found {_shown(value)}")
    if cls in (int, str, bool, list, dict):
        if isinstance(value, cls) and not (cls is int and isinstance(value, bool)):
            return value
        raise DecodeError(f"{where}: expected {cls.__name__}, found {_shown(value)}")
    return value


def _dataclass(cls: Any, value: Any, where: str) -> Any:
    _expect(value, dict, where)
    hints = typing.get_type_hints(cls)
    fields = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.name in value:
            fields[field.name] = decode(hints[field.name], value[field.name], f"{where}.{field.name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise DecodeError(f"{where}: missing field {field.name!r}")
    return cls(**fields)


def _expect(value: Any, kind: type, where: str) -> None:
    if not isinstance(value, kind):
        raise DecodeError(f"{where}: expected {kind.__name__}, found {_shown(value)}")


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "…"
