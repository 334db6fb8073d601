"""The SDK against the WIT contract it carries: the component binding
(`_wasm.py`) calls only methods the contract's resources have, every one a
Python plugin can reach, and builds the registration record whole. A
contract change the SDK did not follow fails here, before any build."""

import re
from pathlib import Path

import beehive_guest as bh

SDK = Path(bh.__file__).parent
WIT = (SDK / "wit" / "beehive.wit").read_text()
BINDING = (SDK / "_wasm.py").read_text()


def block(head: str) -> str:
    """The body of the WIT item `head` opens, up to its closing brace."""
    start = WIT.index(head)
    return WIT[start + len(head) : WIT.index("\n    }", start)]


def names(body: str, pattern: str) -> list:
    found = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        match = re.match(pattern, line)
        if match:
            found.append(match.group(1).lstrip("%").replace("-", "_"))
    return found


def section(head: str) -> str:
    """The text of the binding's class `head`, up to the next class."""
    start = BINDING.index(head)
    end = BINDING.find("\nclass ", start + 1)
    return BINDING[start : end if end != -1 else len(BINDING)]


def test_the_binding_covers_each_client_resource_of_the_contract():
    for resource, cls, uncovered in [
        # One condition is written as a list of one.
        ("resource controller-client {", "class ControllerBackend", {"set_condition"}),
        # Other objects' graph edges and events, and an update by name, are
        # the Rust SDK's for now.
        (
            "resource kind-client {",
            "class KindBackend",
            {"update_by_name", "get_owner", "list_dependencies", "list_dependents",
             "list_owned", "list_events"},
        ),
    ]:
        methods = set(names(block(resource), r"^([%\w-]+): func"))
        called = set(re.findall(r"self\._client\.(\w+)\b", section(cls)))
        assert called - methods == set(), f"{cls} calls what {resource} lacks"
        assert methods - called == uncovered, f"{cls} against {resource}"


def test_the_registration_the_binding_builds_has_every_record_field():
    fields = names(block("record registration {"), r"^([%\w-]+):")
    start = BINDING.index("def registration(")
    body = BINDING[start : BINDING.index("\n\n\n", start)]
    built = re.findall(r"^        (\w+)=", body, re.MULTILINE)
    assert built == fields
