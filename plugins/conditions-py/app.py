"""The `conditions` example in Python: a `Service.py.example.dev` reports
two conditions of different lifetimes.

- `Configured` is durable: it follows from the spec alone, so it holds
  across restarts.
- `Serving` is a liveness condition: it describes something alive in this
  process (the service it pretends to start). After a restart the store
  reads it as Unknown, unconfirmed, until this plugin confirms it; the
  plugin asks for a pass of every object at each start to do so.
"""

from dataclasses import dataclass
from typing import List, Optional

import beehive_guest as bh

#: How the Serving condition reads while serving; app_v2 changes it.
SERVING_MESSAGE = "listening on :{port}"


@dataclass
class ServiceSpec:
    """A service to run."""

    #: The port to listen on (1-65535).
    port: int
    #: Whether it should serve at all.
    enabled: bool = True


@dataclass
class ServiceStatus:
    """Where the service can be reached, once it serves."""

    #: `http://NAME:PORT` while serving.
    endpoint: Optional[str] = None


class Services(bh.Controller):
    registration = bh.Registration(
        "py.example.dev", "Service", startup_full_pass=True, validates=True
    )
    spec_type = ServiceSpec
    status_type = ServiceStatus
    serving_message = SERVING_MESSAGE

    def validate(self, spec: ServiceSpec) -> List[bh.Violation]:
        """A port outside 1-65535 is refused where it is written; the
        InvalidPort condition remains for specs stored before."""
        if 1 <= spec.port <= 65535:
            return []
        return [bh.Violation("spec.port", f"{spec.port} is outside 1-65535")]

    def reconcile(self, client: bh.Client, service: bh.Object) -> bh.Action:
        port, enabled = service.spec.port, service.spec.enabled
        valid = 1 <= port <= 65535
        if valid:
            configured = bh.Condition("Configured", True, reason="ValidPort")
        else:
            configured = bh.Condition(
                "Configured", False, reason="InvalidPort", message=f"port {port} is outside 1-65535"
            )
        if valid and enabled:
            serving = bh.Condition(
                "Serving", True, reason="Listening", message=self.serving_message.format(port=port)
            )
        elif valid:
            serving = bh.Condition("Serving", False, reason="Disabled")
        else:
            serving = bh.Condition("Serving", False, reason="NotConfigured")
        serving.liveness = True
        endpoint = f"http://{service.meta.name}:{port}" if valid and enabled else None
        # One write for both, so a reader never sees one without the other.
        client.set_conditions([configured, serving])
        client.update_status(ServiceStatus(endpoint=endpoint))
        return bh.Action.settled()


Controller = bh.export(Services)
