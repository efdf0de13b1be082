"""Every service of deploy/services.toml in its own container on one
user-defined network: each becomes SERVING (gRPC health, watched from the
host through its published port) and reaches the services it needs by name."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from testcontainers.core.network import Network

from tests.containers.stack import PORT, ServiceContainer, registry, wait_serving

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]


async def test_each_service_in_its_own_container_is_serving(
    agenthost_image: str, network: Network, test_session: str
) -> None:
    with ExitStack() as stack:
        containers: dict[str, ServiceContainer] = {}
        # In registry order, each once the ones it needs are serving (as compose does).
        for name, entry in registry().items():
            assert set(entry.get("needs", [])) <= set(containers), name
            container = ServiceContainer(agenthost_image, name, network, test_session)
            containers[name] = stack.enter_context(container)
            try:
                await wait_serving(container.address)
            except TimeoutError:
                pytest.fail(f"{name} never became SERVING:\n{container.logs()[-4000:]}")

        # Docker's DNS on the network: each service reaches the ones it needs
        # by name, checked with the image's probe (compose's health check).
        for name, entry in registry().items():
            for peer in entry.get("needs", []):
                probe = ["grpc-health-probe", "--address", f"{peer}:{PORT}"]
                result = containers[name].exec(probe)
                output = result.output.decode(errors="replace")
                assert result.exit_code == 0, f"{name} -> {peer}: {output}"
                assert "SERVING" in output
