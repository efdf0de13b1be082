"""agenthost's services.

gRPC's fork handlers are off in every agenthost process, set here before
anything imports grpc. With them on (grpcio's C core enables them by
default), a child forked while a call is under way restarts gRPC's poller
thread before it execs; the child then closes the descriptors it inherited
(pexpect's pty children do, as does `close_fds`), the poller's epoll fd among
them, and the child dies with "epoll_wait error: Bad file descriptor" before
it ever runs the program it was forked for. No agenthost process uses gRPC in
a forked child, so nothing is lost. An explicit setting still wins.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
