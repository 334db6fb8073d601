"""Label selectors in kubectl's grammar, as the host reads them, for the
fake host: requirements joined by commas, each `key`, `!key`, `key=value`
(or `==`), `key!=value`, `key in (a,b)` or `key notin (a,b)`; every one
must hold."""

import re
from typing import Callable, Dict, List

from .errors import InvalidOption

Requirement = Callable[[Dict[str, str]], bool]


def parse(text: str) -> List[Requirement]:
    """The requirements `text` names; InvalidOption naming the position
    where it goes wrong."""
    requirements: List[Requirement] = []
    for start, part in _parts(text):
        requirements.append(_requirement(text, start, part))
    return requirements


def matches(requirements: List[Requirement], labels: Dict[str, str]) -> bool:
    """Whether `labels` meets every requirement."""
    return all(requirement(labels) for requirement in requirements)


def _parts(text: str):
    """Each comma-separated requirement and where it starts; commas inside
    parentheses belong to a set."""
    depth, start = 0, 0
    for at, char in enumerate(text + ","):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            part = text[start:at]
            if part.strip() or text.strip():
                yield start, part
            start = at + 1


def _requirement(text: str, start: int, part: str) -> Requirement:
    def refused(what: str) -> InvalidOption:
        return InvalidOption(f"the selector {text!r}: at position {start}: {what}")

    words = part.strip()
    if not words:
        raise refused("expected a requirement")
    for operator in ("notin", "in"):
        found = re.match(rf"^(\S+)\s+{operator}\s+(.*)$", words)
        if found is None:
            continue
        key, values = found.group(1), found.group(2)
        if not (values.startswith("(") and values.endswith(")")):
            raise refused(f"expected a set in parentheses after {operator}")
        members = {v.strip() for v in values[1:-1].split(",")}
        _check_key(key, refused)
        if operator == "in":
            return lambda labels: labels.get(key) in members
        return lambda labels: labels.get(key) not in members
    for operator in ("!=", "==", "="):
        if operator in words:
            key, _, value = words.partition(operator)
            key, value = key.strip(), value.strip()
            _check_key(key, refused)
            if operator == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if words.startswith("!"):
        key = words[1:].strip()
        _check_key(key, refused)
        return lambda labels: key not in labels
    _check_key(words, refused)
    return lambda labels: words in labels


def _check_key(key: str, refused: Callable[[str], InvalidOption]) -> None:
    if not key or any(c.isspace() or c in "(),!=" for c in key):
        raise refused(f"{key!r} is not a label key")
