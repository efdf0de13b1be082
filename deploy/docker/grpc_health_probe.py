#!/opt/agenthost/bin/python
"""gRPC health probe for containers: exit 0 only when the service is SERVING.

Does one grpc.health.v1 Check against 127.0.0.1 on the port of
AGENTHOST_LISTEN (or --address). Exit codes: 0 SERVING, 1 any other status,
2 no answer (unreachable, timeout, error). Compose health checks run it as
`grpc-health-probe`; Kubernetes uses its native gRPC probes instead.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def default_address() -> str:
    listen = os.environ.get("AGENTHOST_LISTEN", "0.0.0.0:7100")
    return f"127.0.0.1:{listen.rsplit(':', 1)[1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=default_address(), help="host:port to probe")
    parser.add_argument("--service", default="", help="service name ('' is the whole server)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds")
    args = parser.parse_args()
    try:
        with grpc.insecure_channel(args.address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
    except grpc.RpcError as error:
        print(f"{args.address}: {error.code().name}: {error.details()}", file=sys.stderr)
        return 2
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{args.address}: {status}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main())
