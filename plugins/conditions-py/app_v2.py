"""The next release of the Python `conditions` example, to hot-swap in: the
same controller, with a Serving message that names its release."""

import beehive_guest as bh

from app import Services


class ServicesV2(Services):
    serving_message = "listening on :{port} (release 2)"


Controller = bh.export(ServicesV2)
