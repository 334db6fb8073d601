"""The `{{name}}` plugin against the SDK's fake host, under pytest."""

import beehive_guest as bh
from beehive_guest.fake import FakeClient

from app import {{kind}}Controller, {{kind}}Spec


def test_replicas_are_reported_ready():
    fake = FakeClient()
    action = fake.run({{kind}}Controller(), spec={{kind}}Spec(replicas=3), name="web")
    assert action == bh.Action.settled()
    ready = fake.conditions["Ready"]
    assert (ready.status, ready.message) == (True, "3 of 3 ready")
    assert fake.status == {"ready": 3}


def test_no_replicas_is_not_ready():
    fake = FakeClient()
    fake.run({{kind}}Controller(), spec={"replicas": 0})
    assert fake.conditions["Ready"].reason == "ScaledToZero"
