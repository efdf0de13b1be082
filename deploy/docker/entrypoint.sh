#!/bin/sh
# Container entry point: agenthost-service SERVICE [ARGS...]
# runs `python -m services.SERVICE ARGS...` as PID 1 (so it gets SIGTERM).
# `agenthost-service probe [ARGS...]` runs the gRPC health probe instead.
set -eu

services() {
    python - <<'PY'
import importlib.util, pkgutil, services
for module in pkgutil.iter_modules(services.__path__):
    if module.ispkg and importlib.util.find_spec(f"services.{module.name}.__main__"):
        print(module.name)
PY
}

usage() {
    echo "usage: agenthost-service SERVICE [ARGS...]   (or: probe [ARGS...])" >&2
    echo "services in this image:" $(services) >&2
    exit 64
}

[ "$#" -ge 1 ] || usage
service=$1
shift
case "$service" in
    probe) exec grpc-health-probe "$@" ;;
    -h | --help | help) usage ;;
    "" | *[!a-z0-9_]*) echo "agenthost-service: bad service name: $service" >&2; usage ;;
esac
exec python -m "services.$service" "$@"
