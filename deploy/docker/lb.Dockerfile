# The load balancer in front of the gateway replicas in the compose scale
# profile: Debian's haproxy (the base image's release), gRPC over h2c on 7100.
# Built by `make lb-image` on the same base as agenthost:dev (no pulls; apt in
# the build reaches Debian's mirror).
ARG BASE_IMAGE=agenthost-base:bookworm
FROM ${BASE_IMAGE}
LABEL agenthost.build=lb-image
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/docker/haproxy.cfg /etc/haproxy/haproxy.cfg
RUN haproxy -c -f /etc/haproxy/haproxy.cfg
# Debian's package makes the user haproxy; ports above 1024 need no capability.
USER haproxy
EXPOSE 7100 8404
ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
