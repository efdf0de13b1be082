"""Every service of deploy/services.toml in its own container on one
user-defined network: each becomes SERVING (gRPC health, watched from the
host through its published port) and the others reach it by name."""

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

        # Docker's DNS on the network: every service probes every other by name
        # with the image's probe (the one compose's health checks use).
        for name, container in containers.items():
            for peer in containers:
                result = container.exec(["grpc-health-probe", "--address", f"{peer}:{PORT}"])
                output = result.output.decode(errors="replace")
                assert result.exit_code == 0, f"{name} -> {peer}: {output}"
                assert "SERVING" in output
