"""The next release of the Python `conditions` example, to hot-swap in: the
same controller, with a Serving message that names its release, and a spec
schema version 1 in which `enabled` is explicit. Specs stored at version 0
are upgraded when the host reads them (`enabled` defaults to true), so its
passes only ever see the new shape."""

import dataclasses
from dataclasses import dataclass
from typing import Any

import beehive_guest as bh

from app import Services


@dataclass
class ServiceSpecV2:
    #: The port to listen on (1-65535).
    port: int
    #: Whether it should serve at all: required from spec version 1 on.
    enabled: bool


class ServicesV2(Services):
    registration = dataclasses.replace(Services.registration, spec_version=1)
    spec_type = ServiceSpecV2
    serving_message = "listening on :{port} (release 2)"

    def convert_spec(self, from_version: int, spec: Any) -> Any:
        if from_version == 0:
            return {"enabled": True, **spec}
        return super().convert_spec(from_version, spec)


Controller = bh.export(ServicesV2)
