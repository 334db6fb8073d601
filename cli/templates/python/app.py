"""The `{{name}}` plugin: reconciles `{{kind}}.{{group}}` objects. A spec
asks for some replicas; each pass reports how many are ready in the status
and a `Ready` condition."""

from dataclasses import dataclass

import beehive_guest as bh


@dataclass
class {{kind}}Spec:
    """What a user asks for."""

    #: How many replicas to run.
    replicas: int


@dataclass
class {{kind}}Status:
    """What the controller saw on its last pass."""

    #: Replicas ready.
    ready: int = 0


class {{kind}}Controller(bh.Controller):
    registration = bh.Registration("{{group}}", "{{kind}}")
    spec_type = {{kind}}Spec
    status_type = {{kind}}Status

    def reconcile(self, client: bh.Client, obj: bh.Object) -> bh.Action:
        wanted = obj.spec.replicas
        # The real work goes here: bring about what the spec describes
        # (through files, HTTP or other kinds the operator grants), then
        # report what you saw.
        if wanted == 0:
            ready = bh.Condition("Ready", False, reason="ScaledToZero")
        else:
            ready = bh.Condition(
                "Ready", True, reason="AllReplicasReady", message=f"{wanted} of {wanted} ready"
            )
        client.set_conditions([ready])
        client.update_status({{kind}}Status(ready=wanted))
        return bh.Action.settled()


Controller = bh.export({{kind}}Controller)
