# PostgreSQL 15 from Debian's packages, for the compose `postgres` profile on
# machines that cannot pull the official image. Same interface as the
# official postgres:15-bookworm image for what agenthost uses: POSTGRES_USER,
# POSTGRES_PASSWORD, POSTGRES_DB, PGDATA (default /var/lib/postgresql/data),
# user postgres with uid/gid 999, port 5432, pg_isready on PATH.
# Built by `make postgres-image` (apt inside the build reaches Debian's mirror).
ARG BASE_IMAGE=agenthost-base:bookworm
FROM ${BASE_IMAGE}
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql \
        --shell /bin/bash postgres \
    && apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
    && install -d -o postgres -g postgres -m 2775 /var/run/postgresql
COPY deploy/docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
RUN chmod 0755 /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
USER postgres
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
