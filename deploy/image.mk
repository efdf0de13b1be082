# Container image, compose and Kubernetes targets (included by the Makefile,
# which defines PY, STAMP_DEPS and STAMP_GEN).
#
#   make wheelhouse        project wheel (with gen/) + dependency wheels -> build/wheelhouse
#   make base-image        pick python:3.11-slim, or build agenthost-base:bookworm once
#   make image             agenthost:dev from deploy/docker/Dockerfile
#   make postgres-image    pick postgres:15-bookworm, or build agenthost-postgres:15 once
#   make lb-image          agenthost-lb:dev, Debian's haproxy for the scale profile
#   make compose-up        the compose stack from the local image, waits until healthy
#                          (COMPOSE_PROFILES=postgres also starts PostgreSQL;
#                          COMPOSE_PROFILES=scale runs deploy/compose.scale.yml instead:
#                          replicas over PostgreSQL behind the load balancer)
#   make compose-down      stops it and removes its containers, networks and volumes
#   make k8s-render        renders deploy/k8s overlays into build/k8s/*.yaml
#   make deploy-manifests  regenerates docker-compose.yml, deploy/compose.postgres.yml and the
#                          generated kustomize inputs from deploy/services.toml (the one
#                          list of services)
#   make test-containers   the container suite only (pytest -m containers)

AGENTHOST_IMAGE ?= agenthost:dev
PYTHON_BASE_IMAGE ?= python:3.11-slim
LOCAL_BASE_IMAGE ?= agenthost-base:bookworm
# Leave empty to choose automatically (see base-image); set it to force a base.
AGENTHOST_BASE_IMAGE ?=
DEBIAN_SUITE ?= bookworm
DEBIAN_MIRROR ?= http://deb.debian.org/debian
PULL_TIMEOUT_S ?= 120
POSTGRES_IMAGE ?= postgres:15-bookworm
LOCAL_POSTGRES_IMAGE ?= agenthost-postgres:15
POSTGRES_IMAGE_FILE := build/postgres-image
LB_IMAGE ?= agenthost-lb:dev
COMPOSE ?= docker-compose
COMPOSE_PROFILES ?=
COMPOSE_PROJECT ?= agenthost
COMPOSE_WAIT_S ?= 120

# The images run CPython 3.11 (python:3.11-slim and Debian bookworm both), so
# the dependency wheels are chosen for cp311 on this machine's architecture,
# whatever Python the host venv has.
CONTAINER_PYTHON := 3.11
CONTAINER_ABI := cp311
ARCH := $(shell uname -m)
# Debian bookworm has glibc 2.36: any manylinux wheel up to that fits (pip does
# not widen manylinux_2_X platforms by itself, only the manylinux2014 alias).
CONTAINER_PLATFORMS := $(foreach minor,$(shell seq 36 -1 17),--platform manylinux_2_$(minor)_$(ARCH)) \
	--platform manylinux2014_$(ARCH)

WHEELHOUSE := build/wheelhouse
WHEEL_STAGE := build/wheel-stage
STAMP_WHEELHOUSE := $(WHEELHOUSE)/.complete
BASE_IMAGE_FILE := build/base-image
BASE_ROOTFS := build/base-rootfs
PROJECT_SOURCES = $(shell find agenthost_core services clients -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null)

.PHONY: wheelhouse base-image image postgres-image lb-image compose-up compose-down k8s-render deploy-manifests test-containers

# The project wheel is built by setuptools from a staging copy of the sources
# (so nothing is written into the work tree), exactly as pyproject.toml says:
# agenthost_core*, services* and clients*. The generated gen/ packages (agenthost, buf) are then
# added to that wheel with `wheel unpack` / `wheel pack`, which rewrites RECORD,
# so one wheel carries everything and pyproject.toml stays as it is.
# Dependencies come from PyPI pinned by constraints.txt, as cp311 wheels only.
$(STAMP_WHEELHOUSE): $(STAMP_GEN) $(STAMP_DEPS) pyproject.toml constraints.txt $(PROJECT_SOURCES) deploy/image.mk
	rm -rf $(WHEELHOUSE) $(WHEEL_STAGE)
	mkdir -p $(WHEEL_STAGE)/src $(WHEEL_STAGE)/dist $(WHEELHOUSE)
	set -o pipefail; tar -c --exclude=__pycache__ --exclude='*.egg-info' --exclude=tests --exclude=conftest.py \
		pyproject.toml agenthost_core services clients \
		| tar -x -C $(WHEEL_STAGE)/src
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation \
		--wheel-dir $(WHEEL_STAGE)/dist $(WHEEL_STAGE)/src
	$(PY) -m wheel unpack --dest $(WHEEL_STAGE)/unpacked $(WHEEL_STAGE)/dist/agenthost-*.whl
	set -o pipefail; tar -C gen -c --exclude=__pycache__ agenthost buf \
		| tar -x -C $$(echo $(WHEEL_STAGE)/unpacked/agenthost-*)
	$(PY) -m wheel pack --dest-dir $(WHEELHOUSE) $(WHEEL_STAGE)/unpacked/agenthost-*
	@echo "pip download: dependency wheels for cp311 on $(ARCH) (manylinux up to glibc 2.36)"
	@$(PY) -m pip download --quiet --disable-pip-version-check \
		--constraint constraints.txt --only-binary=:all: \
		--python-version $(CONTAINER_PYTHON) --implementation cp --abi $(CONTAINER_ABI) \
		$(CONTAINER_PLATFORMS) \
		--dest $(WHEELHOUSE) $(WHEELHOUSE)/agenthost-*.whl
	rm -rf $(WHEEL_STAGE)
	touch $@

wheelhouse: $(STAMP_WHEELHOUSE)

# Writes the base to use into $(BASE_IMAGE_FILE). The local base is built once
# and kept; `docker rmi $(LOCAL_BASE_IMAGE)` forces a rebuild.
base-image:
	@mkdir -p build
	@if [ -n "$(AGENTHOST_BASE_IMAGE)" ]; then \
		echo "base image: $(AGENTHOST_BASE_IMAGE) (given)"; echo "$(AGENTHOST_BASE_IMAGE)" > $(BASE_IMAGE_FILE); \
	elif docker image inspect $(PYTHON_BASE_IMAGE) >/dev/null 2>&1; then \
		echo "base image: $(PYTHON_BASE_IMAGE) (present)"; echo "$(PYTHON_BASE_IMAGE)" > $(BASE_IMAGE_FILE); \
	elif timeout $(PULL_TIMEOUT_S) docker pull --quiet $(PYTHON_BASE_IMAGE) >/dev/null 2>&1; then \
		echo "base image: $(PYTHON_BASE_IMAGE) (pulled)"; echo "$(PYTHON_BASE_IMAGE)" > $(BASE_IMAGE_FILE); \
	elif docker image inspect $(LOCAL_BASE_IMAGE) >/dev/null 2>&1; then \
		echo "base image: $(LOCAL_BASE_IMAGE) (local, cached)"; echo "$(LOCAL_BASE_IMAGE)" > $(BASE_IMAGE_FILE); \
	else \
		echo "base image: $(PYTHON_BASE_IMAGE) cannot be had; building $(LOCAL_BASE_IMAGE) with debootstrap"; \
		$(MAKE) --no-print-directory local-base-image && echo "$(LOCAL_BASE_IMAGE)" > $(BASE_IMAGE_FILE); \
	fi

# A minimal Debian with Debian's python3 (3.11), venv and bubblewrap, imported as an image.
.PHONY: local-base-image
local-base-image:
	command -v debootstrap >/dev/null || { echo "debootstrap missing: run .ci/prepare-docker" >&2; exit 1; }
	rm -rf $(BASE_ROOTFS)
	debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,bubblewrap \
		$(DEBIAN_SUITE) $(BASE_ROOTFS) $(DEBIAN_MIRROR) > build/debootstrap.log 2>&1 \
		|| { tail -n 30 build/debootstrap.log >&2; exit 1; }
	rm -rf $(BASE_ROOTFS)/var/cache/apt/archives/*.deb $(BASE_ROOTFS)/var/lib/apt/lists/*
	set -o pipefail; tar -C $(BASE_ROOTFS) -c . | docker import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' \
		--change 'CMD ["/bin/bash"]' \
		--message "debootstrap --variant=minbase $(DEBIAN_SUITE) with python3, python3-venv, bubblewrap" \
		- $(LOCAL_BASE_IMAGE)
	rm -rf $(BASE_ROOTFS)

# Removes this kind's builds that lost their tag over an hour ago ($(1): the
# agenthost.build label). Another build on the engine pruning at the same
# moment is doing the same cleanup, so its "already running" is no failure.
define prune_untagged
out=$$(docker image prune --force --filter label=agenthost.build=$(1) --filter until=1h 2>&1) \
	|| case "$$out" in *"prune operation is already running"*) ;; *) echo "$$out" >&2; exit 1;; esac
endef

image: base-image $(STAMP_WHEELHOUSE)
	docker build --quiet --file deploy/docker/Dockerfile \
		--build-arg BASE_IMAGE=$$(cat $(BASE_IMAGE_FILE)) --tag $(AGENTHOST_IMAGE) .
	@# Earlier builds that lost their tag, kept an hour as build cache.
	@$(call prune_untagged,image)
	@echo "image: $(AGENTHOST_IMAGE) (base $$(cat $(BASE_IMAGE_FILE)))"

# PostgreSQL for the compose postgres profile: the official image when present
# or pullable, else one built from Debian's postgresql-15 on the base image
# (deploy/docker/postgres.Dockerfile), once. Writes the choice to
# $(POSTGRES_IMAGE_FILE).
postgres-image: base-image
	@if docker image inspect $(POSTGRES_IMAGE) >/dev/null 2>&1; then \
		echo "postgres image: $(POSTGRES_IMAGE) (present)"; echo "$(POSTGRES_IMAGE)" > $(POSTGRES_IMAGE_FILE); \
	elif timeout $(PULL_TIMEOUT_S) docker pull --quiet $(POSTGRES_IMAGE) >/dev/null 2>&1; then \
		echo "postgres image: $(POSTGRES_IMAGE) (pulled)"; echo "$(POSTGRES_IMAGE)" > $(POSTGRES_IMAGE_FILE); \
	elif docker image inspect $(LOCAL_POSTGRES_IMAGE) >/dev/null 2>&1; then \
		echo "postgres image: $(LOCAL_POSTGRES_IMAGE) (local, cached)"; echo "$(LOCAL_POSTGRES_IMAGE)" > $(POSTGRES_IMAGE_FILE); \
	else \
		echo "postgres image: $(POSTGRES_IMAGE) cannot be had; building $(LOCAL_POSTGRES_IMAGE)"; \
		docker build --quiet --file deploy/docker/postgres.Dockerfile \
			--build-arg BASE_IMAGE=$$(cat $(BASE_IMAGE_FILE)) --tag $(LOCAL_POSTGRES_IMAGE) . \
			&& echo "$(LOCAL_POSTGRES_IMAGE)" > $(POSTGRES_IMAGE_FILE); \
	fi

# The gateways' load balancer for the scale profile (deploy/docker/lb.Dockerfile):
# Debian's haproxy on the same base as the services, rebuilt from the layer
# cache when its files change.
lb-image: base-image
	docker build --quiet --file deploy/docker/lb.Dockerfile \
		--build-arg BASE_IMAGE=$$(cat $(BASE_IMAGE_FILE)) --tag $(LB_IMAGE) .
	@$(call prune_untagged,lb-image)
	@echo "lb image: $(LB_IMAGE) (base $$(cat $(BASE_IMAGE_FILE)))"

# Starts the stack and returns once every container reports healthy (compose
# 1.29 has no --wait; its health checks use the gRPC health service). With
# COMPOSE_PROFILES=postgres, deploy/compose.postgres.yml wires the services
# that can use PostgreSQL to the profile's server.
# COMPOSE_PROFILES=scale runs deploy/compose.scale.yml alone (PostgreSQL, the
# replicas and their load balancer).
SCALE := $(filter scale,$(COMPOSE_PROFILES))
USES_POSTGRES := $(or $(SCALE),$(filter postgres,$(COMPOSE_PROFILES)))
COMPOSE_FILES = $(if $(SCALE),--file deploy/compose.scale.yml,--file docker-compose.yml \
	$(if $(filter postgres,$(COMPOSE_PROFILES)),--file deploy/compose.postgres.yml))

# The stack's internal token (internal_auth.py): made once, kept in build/.
INTERNAL_TOKEN_FILE := build/internal-token
$(INTERNAL_TOKEN_FILE):
	mkdir -p build
	umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(32))' > $@

# The gateway replicas' shared bearer token for the account "local" (scale
# profile), made once. Mounted into the gateways, which run as uid 10001: the
# file is theirs when make runs as root, else readable by every user.
TOKENS_FILE := build/tokens.json
$(TOKENS_FILE):
	mkdir -p build
	umask 077 && $(PYTHON) -c 'import json, secrets; print(json.dumps({secrets.token_urlsafe(32): "local"}))' > $@
	chown 10001:10001 $@ 2>/dev/null || chmod 0644 $@

compose-up: image $(INTERNAL_TOKEN_FILE) $(if $(USES_POSTGRES),postgres-image) \
		$(if $(SCALE),lb-image $(TOKENS_FILE))
	AGENTHOST_IMAGE=$(AGENTHOST_IMAGE) AGENTHOST_LB_IMAGE=$(LB_IMAGE) \
	AGENTHOST_INTERNAL_TOKEN=$${AGENTHOST_INTERNAL_TOKEN:-$$(cat $(INTERNAL_TOKEN_FILE))} \
	AGENTHOST_POSTGRES_IMAGE=$$(cat $(POSTGRES_IMAGE_FILE) 2>/dev/null || echo $(POSTGRES_IMAGE)) \
	$(COMPOSE) --project-name $(COMPOSE_PROJECT) $(COMPOSE_FILES) \
		$(foreach p,$(COMPOSE_PROFILES),--profile $(p)) up --detach
	$(PY) deploy/compose_wait.py --project $(COMPOSE_PROJECT) --timeout $(COMPOSE_WAIT_S)
	@echo "gateway: 127.0.0.1:$${AGENTHOST_GATEWAY_PORT:-7100}; its bearer token:" \
		"$(if $(SCALE),in $${AGENTHOST_COMPOSE_TOKENS_FILE:-$(TOKENS_FILE)},$(COMPOSE) -p $(COMPOSE_PROJECT) exec gateway cat /data/token)"

compose-down:
	$(COMPOSE) --project-name $(COMPOSE_PROJECT) $(COMPOSE_FILES) --profile postgres \
		down --volumes --remove-orphans

deploy-manifests: $(STAMP_DEPS)
	$(PY) deploy/render.py

k8s-render: $(STAMP_DEPS)
	mkdir -p build/k8s
	for overlay in base overlays/postgres; do \
		$(BIN)/kubectl kustomize deploy/k8s/$$overlay > build/k8s/$$(basename $$overlay).yaml || exit 1; \
	done
	@echo "rendered: $$(ls build/k8s/*.yaml)"

test-containers: gen
	$(BIN)/pytest -m containers tests/containers
