"""A first call to a running agenthost (started with `make run`)."""

import asyncio
import os

import grpc
from agenthost.sessionlog.v1 import events_pb2, session_log_pb2, session_log_pb2_grpc


async def main() -> None:
    address = os.environ.get("AGENTHOST_SESSIONLOG", "127.0.0.1:7101")
    async with grpc.aio.insecure_channel(address) as channel:
        log = session_log_pb2_grpc.SessionLogServiceStub(channel)
        created = await log.CreateSession(
            session_log_pb2.CreateSessionRequest(session_id="hello", cwd=os.getcwd())
        )
        await log.Append(
            session_log_pb2.AppendRequest(
                session_id="hello",
                events=[
                    events_pb2.Event(
                        id="hello-1", user_message=events_pb2.UserMessage(text="Hello, agenthost")
                    )
                ],
            )
        )
        page = await log.TailPage(session_log_pb2.TailPageRequest(session_id="hello"))
        print(f"session {created.session.id} in {created.session.cwd}:")
        for event in page.events:
            print(f"  #{event.seq} {event.WhichOneof('body')}: {event.user_message.text}")


asyncio.run(main())
