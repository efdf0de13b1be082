"""Whether an agenthost gateway answers at an address with a token: how
`agenthost exec` and `agenthost acp` decide to use a stack or start one."""

from __future__ import annotations

from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.sdk import AgentHostClient, AgentHostError, TransportError

from .config import GatewayAddress, tls_roots, unexpected_answer

# How long a gateway may take to answer the first call before it counts as absent.
PROBE_TIMEOUT_S = 3.0


class WrongGateway(Exception):
    """Something answered there, but not as this stack's gateway would (the
    message says which address, from where, and what it answered)."""


async def answers(found: GatewayAddress, token: str, token_from: str) -> bool:
    """True when an agenthost gateway answers at `found` with `token`; False
    when nothing does (refused, or silent past the probe's deadline); an
    answer that shows the address or the token is wrong is WrongGateway."""
    client = AgentHostClient(found.address, token, tls_roots=tls_roots())
    try:
        await client.call(
            client.stub.ListWorkspaces, gw.ListWorkspacesRequest(), deadline=PROBE_TIMEOUT_S
        )
        return True
    except TransportError as error:
        if "refused" in error.message or error.code == "DEADLINE_EXCEEDED":
            return False
        raise WrongGateway(unexpected_answer(error, found, token_from)) from None
    except AgentHostError as error:
        said = unexpected_answer(error, found, token_from)
        raise WrongGateway(said or f"{error.message} ({error.reason or error.code})") from None
    finally:
        await client.close()
