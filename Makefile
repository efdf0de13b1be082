# agenthost: `make run` starts the stack, `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
PROTOS := $(shell find proto -name '*.proto')
STAMP_DEPS := $(VENV)/.deps-installed
STAMP_GEN := gen/.generated
# The TypeScript SDK: npm packages pinned in its lockfile, stubs generated
# from gen/agenthost.binpb by the npm package's protoc-gen-es, then tsc.
TS := clients/ts
TS_SOURCES := $(shell find $(TS)/src $(TS)/test -name '*.ts' 2>/dev/null) $(TS)/tsconfig.json
TS_STAMP_DEPS := $(TS)/node_modules/.package-lock.json
TS_STAMP_GEN := $(TS)/gen/.generated
TS_STAMP_BUILD := $(TS)/build/.built
# The web client: a Vite + React page on the SDK, built to $(WEB)/dist, which
# `agenthost up` serves on the gateway's web port.
WEB := clients/web
WEB_SOURCES := $(shell find $(WEB)/src -type f 2>/dev/null) $(WEB)/index.html $(WEB)/vite.config.ts $(WEB)/tsconfig.json
WEB_STAMP_DEPS := $(WEB)/node_modules/.package-lock.json
WEB_BUILT := $(WEB)/dist/index.html
# MCP servers the tests run (the reference test server), pinned in its lockfile.
MCP_TEST := tests/mcp
MCP_TEST_STAMP := $(MCP_TEST)/node_modules/.package-lock.json

.PHONY: all venv gen bytecode ts-gen ts web acp-tests mcp-test-servers run test lint fmt bench bench-smoke bench-peers clean install

all: gen bytecode

$(STAMP_DEPS): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==26.3
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(PY) -c 'import site, pathlib; pathlib.Path(site.getsitepackages()[0], "agenthost-gen.pth").write_text(str(pathlib.Path("gen").resolve()) + "\n")'
	touch $@

venv: $(STAMP_DEPS)

$(STAMP_GEN): $(STAMP_DEPS) $(PROTOS) tools/gen_protos.py
	$(PY) tools/gen_protos.py --proto-dir proto --out gen --image gen/agenthost.binpb
	touch $@

gen: $(STAMP_GEN)

# Our own packages and the generated code byte-compiled, as pip compiles the
# packages it installs: with PYTHONDONTWRITEBYTECODE set (as on some machines)
# Python would otherwise compile them from source at every start, about a
# fifth of `agenthost up`'s start-up. Each run recompiles only what changed
# since; a module edited later is compiled from source until then.
PACKAGES := agenthost_core services clients
bytecode: $(STAMP_GEN)
	$(PY) -m compileall -q -x /node_modules/ $(PACKAGES) gen

$(TS_STAMP_DEPS): $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(TS_STAMP_GEN): $(STAMP_GEN) $(TS_STAMP_DEPS) $(TS)/buf.gen.yaml
	rm -rf $(TS)/gen
	cd $(TS) && ../../$(BIN)/buf generate ../../gen/agenthost.binpb --template buf.gen.yaml --exclude-path google/protobuf
	touch $@

ts-gen: $(TS_STAMP_GEN)

# Type-checks (tsc --noEmit) and compiles the SDK and its tests to $(TS)/build.
$(TS_STAMP_BUILD): $(TS_STAMP_GEN) $(TS_SOURCES)
	cd $(TS) && npx --no-install tsc --noEmit -p . && rm -rf build && npx --no-install tsc -p .
	touch $@

ts: $(TS_STAMP_BUILD)

$(WEB_STAMP_DEPS): $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Type-checks (tsc --noEmit), then bundles the page into $(WEB)/dist.
$(WEB_BUILT): $(TS_STAMP_BUILD) $(WEB_STAMP_DEPS) $(WEB_SOURCES)
	cd $(WEB) && npx --no-install tsc --noEmit -p . && npx --no-install vite build --logLevel warn
	touch $@

web: $(WEB_BUILT)

# The editor of the `agenthost acp` tests (tests/acp): the official ACP client
# library and a JSON schema validator, pinned in its lockfile.
ACP_TESTS := tests/acp
ACP_STAMP_DEPS := $(ACP_TESTS)/node_modules/.package-lock.json

$(ACP_STAMP_DEPS): $(ACP_TESTS)/package.json $(ACP_TESTS)/package-lock.json
	cd $(ACP_TESTS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

acp-tests: $(ACP_STAMP_DEPS)

$(MCP_TEST_STAMP): $(MCP_TEST)/package.json $(MCP_TEST)/package-lock.json
	cd $(MCP_TEST) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

mcp-test-servers: $(MCP_TEST_STAMP)

# UP_FLAGS: e.g. --free-ports, --base-port N, --data-dir DIR, --processes (see `agenthost up --help`).
# The page is at the web address it prints (its token in the fragment).
run: gen bytecode web
	$(PY) -m clients.cli up $(UP_FLAGS)

test: gen bytecode ts web acp-tests mcp-test-servers
	@tools/need-postgres
	@tools/need-docker
	@tools/need-bubblewrap
	$(BIN)/pytest

lint: gen
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy agenthost_core services clients tests tools bench examples conftest.py deploy
	$(PY) tools/buf_check.py

# The CLI on your PATH: ~/.local/bin/agenthost links to this checkout's.
install: gen bytecode
	mkdir -p $(HOME)/.local/bin
	ln -sf $(abspath $(BIN))/agenthost $(HOME)/.local/bin/agenthost
	@echo "agenthost is in ~/.local/bin (put that folder on your PATH if it is not)"

fmt: $(STAMP_DEPS)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Reports in build/bench/report.md and report.json (see bench/README.md);
# fails when a target is missed. bench-smoke: every figure at tiny sizes,
# targets not enforced (CI runs it so the bench keeps working).
bench: gen bytecode
	$(PY) -m bench

bench-smoke: gen bytecode
	$(PY) -m bench --smoke
	$(PY) -m bench.processes --smoke

# agenthost beside `opencode serve` and `codex app-server` (bench/README.md):
# the peers pinned in bench/peers (installed here only), everything in a
# network namespace with only loopback (unshare: needs root). Report in
# build/bench/peers.md and peers.json. About 6 minutes; PEERS_FLAGS=--smoke
# for a quick one, PEERS_FLAGS="--hosts agenthost codex" for some hosts.
bench-peers: gen bytecode
	cd bench/peers && npm ci --no-audit --no-fund
	unshare --net sh -c 'ip link set lo up && exec $(PY) -m bench.peers $(PEERS_FLAGS)'

# Container image, compose and Kubernetes targets live with the deploy files.
-include deploy/image.mk

clean:
	rm -rf $(VENV) gen gen.tmp build .pytest_cache .mypy_cache .ruff_cache clients/node/node_modules
	rm -rf $(TS)/node_modules $(TS)/gen $(TS)/build
	rm -rf $(WEB)/node_modules $(WEB)/dist
	rm -rf $(ACP_TESTS)/node_modules
	rm -rf $(MCP_TEST)/node_modules
	find $(PACKAGES) -name __pycache__ -type d -prune -exec rm -rf {} +
