"""agenthost's clients: the CLI, the Python SDK (and the TypeScript SDK and web client).

gRPC's fork handlers are off, set before anything imports grpc, for the
reason services/__init__.py gives: with them on, a child forked while a call
is under way can die before it execs. An explicit setting still wins.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
