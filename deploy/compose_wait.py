"""Wait until every container of a compose project reports healthy.

    python deploy/compose_wait.py [--project agenthost] [--timeout 120]

Debian's docker-compose 1.29 has no `up --wait`; this reads the health state
Docker keeps for each container (its health check is the gRPC health probe)
and exits 0 once all are healthy, 1 when one is unhealthy or has exited, or
when the timeout passes. Uses the docker CLI only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def containers(project: str) -> list[dict[str, object]]:
    ids = subprocess.run(
        [
            "docker",
            "ps",
            "--all",
            "--quiet",
            "--filter",
            f"label=com.docker.compose.project={project}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not ids:
        return []
    found = subprocess.run(
        ["docker", "inspect", *ids], check=True, capture_output=True, text=True
    ).stdout
    return list(json.loads(found))


def state(container: dict[str, object]) -> str:
    status = container["State"]
    assert isinstance(status, dict)
    if status.get("Status") != "running":
        return str(status.get("Status"))
    health = status.get("Health")
    return str(health["Status"]) if isinstance(health, dict) else "running (no health check)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=os.environ.get("COMPOSE_PROJECT_NAME", "agenthost"))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds")
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    while True:
        states = {str(c["Name"]).lstrip("/"): state(c) for c in containers(args.project)}
        if not states:
            print(f"no containers in compose project {args.project}", file=sys.stderr)
            return 1
        failed = {n: s for n, s in states.items() if s in {"unhealthy", "exited", "dead"}}
        if failed:
            print(f"not healthy: {failed}", file=sys.stderr)
            return 1
        if all(s in {"healthy", "running (no health check)"} for s in states.values()):
            for name, status in sorted(states.items()):
                print(f"{name}: {status}")
            return 0
        if time.monotonic() > deadline:
            print(f"timed out after {args.timeout:.0f}s: {states}", file=sys.stderr)
            return 1
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main())
