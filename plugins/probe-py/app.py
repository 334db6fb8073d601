"""A Python plugin that reaches outside the store: `Probe.py.example.dev`
names a URL, and each pass GETs it and records what came back.

The operator grants the hosts it may reach in `probe-py.toml` beside the
plugin file:

    [http]
    allow = ["127.0.0.1:8080"]

    [config]
    token = { env = "PROBE_TOKEN" }   # optional: sent as a bearer token

A URL outside the grant is refused by the host: the probe reports
`unreachable` (denied), and the object also gets the host's
`HttpRequestDenied` event.
"""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

import beehive_guest as bh
from beehive_guest import config, http

#: The timeline the probes write.
CATEGORY = "probe"


@dataclass
class ProbeSpec:
    #: What to GET; any 2xx answer is healthy.
    url: str
    #: Seconds between probes.
    interval_seconds: float = 5.0
    #: Seconds a probe may wait (the operator's timeouts still apply).
    timeout_seconds: float = 2.0


@dataclass
class ProbeStatus:
    #: `reachable` or `unreachable`.
    state: str = ""
    #: The last answer's status code, if one came.
    status_code: Optional[int] = None
    #: How long the last probe took.
    latency_ms: int = 0


class Probes(bh.Controller):
    registration = bh.Registration("py.example.dev", "Probe")
    spec_type = ProbeSpec
    status_type = ProbeStatus

    def reconcile(self, client: bh.Client, probe: bh.Object) -> bh.Action:
        spec = probe.spec
        request = http.Request.get(spec.url).timeout(spec.timeout_seconds)
        token = config.get("token")
        if token:
            request.header("authorization", f"Bearer {token}")
        started = time.monotonic()
        try:
            answer: Optional[http.Response] = request.send()
            failure = None if answer.is_success() else f"status {answer.status}"
        except http.HttpError as error:
            answer, failure = None, str(error)
        latency_ms = int((time.monotonic() - started) * 1000)
        code = answer.status if answer is not None else None
        if failure is None:
            event = bh.Event.normal("Reachable", f"{spec.url} answered {code}", category=CATEGORY)
        else:
            event = bh.Event.warning("ProbeFailed", f"{spec.url}: {failure}", category=CATEGORY)
        client.add_event(event)
        state = "reachable" if failure is None else "unreachable"
        client.update_status(ProbeStatus(state=state, status_code=code, latency_ms=latency_ms))
        return bh.Action.settled().requeue_after(timedelta(seconds=spec.interval_seconds))


Controller = bh.export(Probes)
