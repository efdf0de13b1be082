"""A first call through the gateway of a running agenthost (`make run`).

Creates a session in the current directory, sends a prompt, waits on the live
stream until the turn is over, then prints the session's history."""

import asyncio
import os

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc

from clients.cli.config import default_data_dir, find_gateway


async def main() -> None:
    data_dir = default_data_dir()  # where `make run` keeps its token and gateway address
    # AGENTHOST_GATEWAY, else the address `make run` recorded, else 127.0.0.1:7100.
    address = find_gateway(os.environ.get("AGENTHOST_GATEWAY"), data_dir).address
    token = os.environ.get("AGENTHOST_TOKEN") or (data_dir / "token").read_text().strip()
    auth = (("authorization", f"Bearer {token}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        gateway = gateway_pb2_grpc.GatewayServiceStub(channel)
        created = await gateway.CreateSession(
            gw.CreateSessionRequest(cwd=os.getcwd()), metadata=auth
        )
        session_id = created.session.id
        stream = gateway.Connect(gw.ConnectRequest(client_id="first-call"), metadata=auth)
        await stream.read()  # "connected": from here on, frames reach us
        fence = gw.RequestFence(client_id="first-call", generation=0, request_id=1)
        await gateway.Prompt(
            gw.PromptRequest(session_id=session_id, text="Hello, agenthost", fence=fence),
            metadata=auth,
        )
        while True:  # wait on the stream until the turn is over
            frame = await stream.read()
            if frame.HasField("session_status") and not frame.session_status.running:
                break
        stream.cancel()
        opened = await gateway.OpenSession(
            gw.OpenSessionRequest(session_id=session_id), metadata=auth
        )
        print(f"session {session_id} in {opened.session.cwd}:")
        for event in opened.events:
            kind = event.WhichOneof("body")
            text = event.user_message.text or event.assistant_message.text
            print(f"  #{event.seq} {kind}{': ' + text if text else ''}")


asyncio.run(main())
