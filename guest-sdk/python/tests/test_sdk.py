"""The Python SDK against its fake host, under pytest."""

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pytest

import beehive_guest as bh
from beehive_guest import codec, errors, http
from beehive_guest.fake import (
    FakeClient,
    clear_config,
    clear_http,
    sent_requests,
    set_config,
    stub_http,
)


@dataclass
class Port:
    number: int
    name: str = ""


@dataclass
class Spec:
    ports: List[Port]
    label: Optional[str] = None
    weight: float = 1.0
    tags: List[str] = field(default_factory=list)


class Recorder(bh.Controller):
    registration = bh.Registration("test.dev", "Thing")
    spec_type = Spec

    def __init__(self):
        self.seen = []
        self.kept_client = None

    def reconcile(self, client, thing):
        self.seen.append(thing.spec)
        self.kept_client = client
        if thing.spec.label == "boom":
            raise ValueError("the spec says boom")
        if thing.spec.label == "host-error":
            client.kind("test.dev", "Other").get_by_name("missing")
        client.add_event(bh.Event.normal("Seen", f"{len(thing.spec.ports)} ports", category="audit"))
        return None


def test_specs_decode_into_nested_dataclasses_with_defaults():
    spec = codec.decode(Spec, {"ports": [{"number": 80}], "extra": True, "weight": 2}, "spec")
    assert spec == Spec(ports=[Port(80)], weight=2.0)


@pytest.mark.parametrize(
    "value, where",
    [
        ({}, "missing field 'ports'"),
        ({"ports": [{"number": "80"}]}, "spec.ports[0].number: expected int"),
        ({"ports": "none"}, "spec.ports: expected list"),
        ({"ports": [], "weight": True}, "spec.weight: expected a number"),
    ],
)
def test_a_document_that_does_not_fit_says_where(value, where):
    with pytest.raises(errors.DecodeError, match=where.replace("[", r"\[").replace("]", r"\]")):
        codec.decode(Spec, value, "spec")


def test_a_pass_returning_none_settles_and_its_client_closes():
    fake, controller = FakeClient(), Recorder()
    assert fake.run(controller, spec={"ports": [{"number": 80}]}) == bh.Action.settled()
    assert fake.events[0].reason == "Seen" and fake.events[0].category == "audit"
    with pytest.raises(errors.ClientClosed):
        controller.kept_client.update_status({"late": True})


def test_an_exception_is_the_pass_failing_on_the_backoff_ladder():
    fake = FakeClient()
    action = fake.run(Recorder(), spec={"ports": [], "label": "boom"})
    assert action == bh.Action.backoff("ValueError: the spec says boom")
    # The traceback travels beside the message, for the event's detail.
    assert action.trace.startswith("Traceback (most recent call last):")
    assert "raise ValueError" in action.trace
    assert action.trace.endswith("ValueError: the spec says boom")


def test_host_errors_are_one_hierarchy():
    fake = FakeClient()
    action = fake.run(Recorder(), spec={"ports": [], "label": "host-error"})
    assert action.verdict == "failed" and action.message.startswith("NotFound:")
    assert issubclass(errors.NameTaken, errors.Conflict)
    assert issubclass(errors.ClientClosed, bh.BeehiveError)
    assert errors.BY_CASE["Decode"] is errors.DecodeError


def test_an_object_that_does_not_decode_is_quarantined_not_failed():
    fake, controller = FakeClient(), Recorder()
    action = fake.run(controller, spec={"ports": 7})
    assert action == bh.Action.unsettled()
    assert controller.seen == [], "reconcile never saw it"
    assert [e.reason for e in fake.events] == ["DecodeFailed"]
    assert fake.events[0].type == "Warning"


def test_an_error_policy_decides_what_a_failure_does():
    class Patient(Recorder):
        def error_policy(self, obj, error):
            return bh.Action.unsettled().requeue_after(5)

    action = FakeClient().run(Patient(), spec={"ports": [], "label": "boom"})
    assert action == bh.Action("unsettled", requeue_after_ms=5000)


def test_kind_clients_and_transactions_work_on_the_fake():
    class Parent(bh.Controller):
        registration = bh.Registration("test.dev", "Parent")

        def reconcile(self, client, parent):
            children = client.kind("test.dev", "Child", spec_type=Port)
            with client.transaction():
                child, created = children.get_or_create("a", Port(1), bh.CreateOptions(owner=parent.meta.id))
                client.add_dependency(child.meta.id)
            assert created
            assert [c.spec for c in children.owned_by(parent.meta.id)] == [Port(1)]
            assert children.get(child.meta.id).meta.name == "a"
            updated = children.update(child.meta.id, Port(2))
            assert updated.meta.generation == 2
            assert len(children.list()) == 1
            children.delete_by_name("a")
            assert children.list() == []
            return bh.Action.unsettled()

    fake = FakeClient()
    assert fake.run(Parent(), spec={}, id=7) == bh.Action.unsettled()
    assert (fake.commits, fake.open_frames) == (1, 0)


def test_labels_are_kept_replaced_and_selected_as_the_host_does():
    class Labeler(bh.Controller):
        registration = bh.Registration("test.dev", "Labeler")

        def reconcile(self, client, obj):
            ports = client.kind("test.dev", "Port", spec_type=Port)
            for number, tier in [(1, "web"), (2, "db"), (3, None)]:
                labels = {"tier": tier} if tier else {}
                ports.create(f"p{number}", Port(number), bh.CreateOptions(labels=labels))
            names = lambda selector: [p.meta.name for p in ports.list(selector)]
            assert names("tier=web") == ["p1"]
            assert names("tier in (web,db)") == ["p1", "p2"]
            assert names("tier notin (web)") == ["p2", "p3"]
            assert names("!tier") == ["p3"]
            assert names("tier,tier!=web") == ["p2"]
            assert names(None) == ["p1", "p2", "p3"]
            # None keeps an object's labels; a dict replaces them.
            ports.create_or_update("p1", Port(10), bh.CreateOptions())
            assert ports.get_by_name("p1").meta.labels == {"tier": "web"}
            ports.create_or_update("p1", Port(10), bh.CreateOptions(labels={}))
            assert names("tier=web") == []
            with pytest.raises(errors.InvalidOption, match="position"):
                ports.list("tier in web")
            return bh.Action.settled()

    assert FakeClient().run(Labeler(), spec={}) == bh.Action.settled()


def test_a_fake_told_the_store_grants_refuses_what_they_do_not_grant():
    class Parent(bh.Controller):
        registration = bh.Registration("test.dev", "Parent")

        def reconcile(self, client, parent):
            parent_kind = client.kind("test.dev", "Parent")
            assert parent_kind.list() == [], "its own kind is always granted"
            client.kind("test.dev", "Child").get_or_create("a", {}, bh.CreateOptions())
            return None

    denied = FakeClient(store_grants={"read": ["Child.test.dev"]})
    action = denied.run(Parent(), spec={})
    assert action.verdict == "failed" and action.message.startswith("NotGranted:")
    assert "not granted: write on Child.test.dev" in action.message
    assert denied.denials == [("Child.test.dev", "write")]
    assert denied.objects() == [], "nothing written"

    for pattern in ["Child.test.dev", "*.test.dev", "*.*.dev", "*"]:
        granted = FakeClient(store_grants={"write": [pattern]})
        assert granted.run(Parent(), spec={}) == bh.Action.settled(), pattern
    below = FakeClient(store_grants={"write": ["*.*.test.dev"]})
    assert below.run(Parent(), spec={}).verdict == "failed", "test.dev is not a group under itself"


def test_a_denial_from_the_host_becomes_not_granted():
    message = "not granted: read on Secret.example.dev (the plugin's policy has no [store] grant for it)"
    denied = errors.NotGranted.parse(message)
    assert (denied.kind, denied.verb, str(denied)) == ("Secret.example.dev", "read", message)
    assert isinstance(denied, bh.BeehiveError)
    assert errors.NotGranted.parse("something else") is None


def test_config_comes_from_the_fake():
    set_config("region", "eu")
    try:
        assert bh.config.get("region") == "eu"
        assert bh.config.keys() == ["region"]
    finally:
        clear_config()
    assert bh.config.get("region") is None


def test_registration_durations_are_milliseconds_on_the_wire():
    from datetime import timedelta

    from beehive_guest.model import millis

    assert millis(timedelta(seconds=1.5)) == 1500
    assert millis(30) == 30000
    assert millis(None) is None
    with pytest.raises(ValueError):
        millis(-1)


def test_http_goes_to_stubs_and_anything_unstubbed_is_denied():
    clear_http()
    stub_http("GET", "http://svc:8080/health", http.Response(200, b'{"up": true}', [("Content-Type", "application/json")]))
    stub_http("POST", "http://svc:8080/slow", http.Timeout("waiting for the response"))
    health = http.get("http://svc:8080/health")
    assert health.is_success() and health.json() == {"up": True}
    assert health.header("content-type") == "application/json"
    with pytest.raises(http.Timeout):
        http.Request.post("http://svc:8080/slow").json({"a": 1}).timeout(0.5).send()
    with pytest.raises(http.Denied):
        http.get("http://elsewhere/")
    sent = sent_requests()
    assert [(r.method, r.url) for r in sent] == [
        ("GET", "http://svc:8080/health"),
        ("POST", "http://svc:8080/slow"),
        ("GET", "http://elsewhere/"),
    ]
    assert sent[1].body_bytes == b'{"a": 1}' and sent[1].timeout_seconds == 0.5
    clear_http()


def test_urls_are_split_as_wasi_http_wants_them_and_bad_ones_refused():
    assert http.split_url("https://api.example.com/v1/x?q=1#frag") == (True, "api.example.com", "/v1/x?q=1")
    assert http.split_url("http://127.0.0.1:8080") == (False, "127.0.0.1:8080", "/")
    for bad in ["ftp://x/", "http:///path", "http://user@host/"]:
        with pytest.raises(http.InvalidUrl):
            http.split_url(bad)


def test_a_finalizer_added_to_an_object_being_deleted_is_refused_as_the_host_does():
    class Holds(bh.Controller):
        registration = bh.Registration("example.dev", "Held")

        def reconcile(self, client, obj):
            client.add_finalizer("example.dev/hold")

    fake = FakeClient()
    assert fake.run(Holds(), spec={}) == bh.Action.settled()
    action = fake.run(Holds(), spec={}, deletion_requested_at_ms=1)
    assert action.verdict == "failed" and action.message.startswith("DeletionPending:")
    assert fake.added_finalizers == ["example.dev/hold"]


def test_meta_has_every_field_of_the_contracts_object_record():
    wit = (Path(bh.__file__).parent / "wit" / "beehive.wit").read_text()
    record = re.search(r"record object \{(.*?)\}", wit, re.DOTALL).group(1)
    fields = {line.split(":")[0].strip().replace("-", "_") for line in record.splitlines() if ":" in line}
    fields -= {"spec", "status"}
    missing = fields - {f.name for f in dataclasses.fields(bh.Meta)}
    assert not missing, f"Meta lacks {sorted(missing)}"
