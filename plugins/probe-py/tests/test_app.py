"""The Python probe example against the fake host, under pytest."""

from datetime import timedelta

import beehive_guest as bh
from beehive_guest import http
from beehive_guest.fake import FakeClient, clear_config, clear_http, sent_requests, set_config, stub_http

from app import CATEGORY, Probes, ProbeSpec

URL = "http://svc:8080/health"


def setup_function() -> None:
    clear_http()
    clear_config()


def test_a_healthy_answer_is_reachable_and_the_next_probe_is_scheduled():
    stub_http("GET", URL, http.Response(204))
    fake = FakeClient()
    action = fake.run(Probes(), spec=ProbeSpec(url=URL, interval_seconds=3))
    assert action == bh.Action.settled().requeue_after(timedelta(seconds=3))
    assert fake.status["state"] == "reachable" and fake.status["status_code"] == 204
    (event,) = fake.events
    assert (event.reason, event.type, event.category) == ("Reachable", "Normal", CATEGORY)


def test_a_refused_destination_is_unreachable_not_a_failed_pass():
    fake = FakeClient()
    action = fake.run(Probes(), spec={"url": "http://elsewhere/"})
    assert action.verdict == "settled"
    assert fake.status["state"] == "unreachable" and fake.status["status_code"] is None
    (event,) = fake.events
    assert event.reason == "ProbeFailed" and "policy does not grant" in event.message


def test_an_error_status_is_unreachable_and_the_token_is_sent():
    set_config("token", "s3cret")
    stub_http("GET", URL, http.Response(503, b"down"))
    fake = FakeClient()
    fake.run(Probes(), spec=ProbeSpec(url=URL, timeout_seconds=0.5))
    assert fake.status["state"] == "unreachable" and fake.status["status_code"] == 503
    (request,) = sent_requests()
    assert ("authorization", "Bearer s3cret") in request.headers
    assert request.timeout_seconds == 0.5
