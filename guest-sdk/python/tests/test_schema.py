"""The schema derived from a controller's dataclasses says what the SDK's
decoder reads: what the type writes validates, what the decoder refuses the
schema refuses, checked with a JSON Schema validator as the host checks."""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import jsonschema
import pytest

from beehive_guest import codec, schema
from beehive_guest.errors import DecodeError


@dataclass
class Tag:
    """A label."""

    key: str
    value: Optional[str] = None


@dataclass
class Spec:
    #: The port to listen on.
    port: int
    ratio: float = 1.0
    tags: List[Tag] = field(default_factory=list)
    limits: Dict[str, int] = field(default_factory=dict)
    enabled: bool = field(default=True, metadata={"description": "Whether it serves."})


def validator() -> jsonschema.Draft202012Validator:
    derived = schema.json_schema(Spec)
    jsonschema.Draft202012Validator.check_schema(derived)
    return jsonschema.Draft202012Validator(derived)


def test_what_the_type_writes_validates() -> None:
    check = validator()
    specs = [
        Spec(port=80),
        Spec(port=1, ratio=0.5, tags=[Tag("team", "ada"), Tag("x")], limits={"cpu": 2}, enabled=False),
    ]
    for spec in specs:
        written = json.loads(codec.to_json(spec))
        assert check.is_valid(written), written
        assert codec.decode(Spec, written, "spec") == spec


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"port": "80"},
        {"port": True},
        {"port": 80, "ratio": "fast"},
        {"port": 80, "tags": [{"value": "x"}]},
        {"port": 80, "tags": {"key": "x"}},
        {"port": 80, "limits": {"cpu": "two"}},
        {"port": 80, "enabled": "yes"},
        [],
    ],
)
def test_what_the_decoder_refuses_the_schema_refuses(value: object) -> None:
    with pytest.raises(DecodeError):
        codec.decode(Spec, value, "spec")
    assert not validator().is_valid(value)


def test_unknown_keys_pass_as_the_decoder_ignores_them() -> None:
    value = {"port": 80, "extra": 1}
    assert validator().is_valid(value)
    codec.decode(Spec, value, "spec")


def test_descriptions_come_from_comments_metadata_and_docstrings() -> None:
    derived = schema.json_schema(Spec)
    assert derived["properties"]["port"]["description"] == "The port to listen on."
    assert derived["properties"]["enabled"]["description"] == "Whether it serves."
    assert derived["properties"]["tags"]["items"]["description"] == "A label."
    assert "description" not in derived, "no docstring: no description"
    assert derived["required"] == ["port"]


@dataclass
class Node:
    children: List["Node"] = field(default_factory=list)


def test_a_type_that_contains_itself_ends() -> None:
    derived = schema.json_schema(Node)
    assert derived["properties"]["children"]["items"] == {"type": "object"}
    assert schema.json_schema(None) is None
    assert dataclasses.is_dataclass(Node)
