"""The Python `conditions` example against the fake host, under pytest."""

import beehive_guest as bh
from beehive_guest.fake import FakeClient

from app import Services, ServiceSpec, ServiceStatus


def test_a_valid_enabled_service_is_configured_and_serving():
    fake = FakeClient()
    action = fake.run(Services(), spec=ServiceSpec(port=8080), name="web")
    assert action == bh.Action.settled()
    assert fake.conditions["Configured"].status is True
    serving = fake.conditions["Serving"]
    assert (serving.status, serving.reason, serving.liveness) == (True, "Listening", True)
    assert fake.status == {"endpoint": "http://web:8080"}


def test_an_invalid_port_is_reported_not_failed():
    fake = FakeClient()
    assert fake.run(Services(), spec={"port": 70000}) == bh.Action.settled()
    configured = fake.conditions["Configured"]
    assert (configured.status, configured.reason) == (False, "InvalidPort")
    assert "70000" in configured.message
    assert fake.conditions["Serving"].reason == "NotConfigured"
    assert fake.status == {"endpoint": None}


def test_a_disabled_service_is_configured_but_not_serving():
    fake = FakeClient()
    fake.run(Services(), spec={"port": 80, "enabled": False}, status=ServiceStatus("x"))
    assert fake.conditions["Serving"].reason == "Disabled"
    assert fake.status == {"endpoint": None}


def test_release_2_upgrades_version_0_specs_and_refuses_unknown_versions():
    import pytest

    from app_v2 import ServicesV2

    services = ServicesV2()
    assert services.registration.spec_version == 1
    assert services.convert_spec(0, {"port": 80}) == {"port": 80, "enabled": True}
    assert services.convert_spec(0, {"port": 80, "enabled": False})["enabled"] is False
    with pytest.raises(ValueError):
        services.convert_spec(7, {})
