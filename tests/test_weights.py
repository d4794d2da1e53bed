"""Weights once, offline after (brushrl.hub.weights, ``brushrl weights fetch``, ``brushrl config check``,
the job's check before any actor starts).

No model hub is reachable here, so the hub is a local stand-in of its HTTP file API (the calls
huggingface_hub 2.4 makes, listed in brushrl.hub.weights' docstring) on 127.0.0.1, serving a small
fake repository with a sharded safetensors index; the real huggingface_hub talks to it.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from brushrl.cli import main
from brushrl.config import parse_config
from brushrl.hub.weights import (MARKER, WeightsUnavailable, local_status, models_of, offline_env, resolve_weights)

ROOT = Path(__file__).resolve().parents[1]
REPO = "brushrl-test/tiny-sharded"
SHA = "0123456789abcdef0123456789abcdef01234567"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
#: The fake repository: what a fetch takes (configs, tokenizer, index, shards) and a .bin it must not.
FILES: dict[str, bytes] = {
    "config.json": json.dumps({"model_type": "qwen3", "hidden_size": 8}).encode(),
    "tokenizer.json": b'{"version": "1.0"}',
    "model.safetensors.index.json": json.dumps(
        {"metadata": {"total_size": 3000}, "weight_map": {"a.weight": SHARDS[0], "b.weight": SHARDS[1]}}).encode(),
    SHARDS[0]: bytes(range(256)) * 8,
    SHARDS[1]: b"\x07" * 1000,
    "pytorch_model.bin": b"\x00" * 500,
}
WANTED = sorted(set(FILES) - {"pytorch_model.bin"})


class StandInHub(BaseHTTPRequestHandler):
    """The hub's file API for one repository (``server.repo``, its files ``server.files``): model
    info, the recursive tree, and HEAD/GET of ``/{repo}/resolve/{rev}/{file}``. Records every
    request in ``server.requests``."""

    def log_message(self, *args):  # quiet test output
        pass

    def _send(self, code: int, body: bytes, headers: dict | None = None, head: bool = False) -> None:
        self.send_response(code)
        for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        self.server.requests.append((self.command, path))
        repo, files = self.server.repo, self.server.files
        api = f"/api/models/{repo}"
        if path in (api, f"{api}/revision/main", f"{api}/revision/{SHA}"):
            info = {"id": repo, "modelId": repo, "sha": SHA, "siblings": [{"rfilename": f} for f in files]}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
        if path.startswith(f"{api}/tree/"):
            tree = [{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in files.items()]
            return self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, head)
        prefix = f"/{repo}/resolve/"
        if path.startswith(prefix):
            _rev, _, name = path[len(prefix):].partition("/")
            if name in files:
                body = files[name]
                return self._send(200, body, {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'},
                                  head)
        self._send(404, b'{"error": "not found"}', {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"},
                   head)

    def do_GET(self):
        self._route(head=False)

    def do_HEAD(self):
        self._route(head=True)


def serve_hub(repo: str, files: dict[str, bytes]):
    """Start the stand-in hub for ``repo`` on a free loopback port; returns the server (stop it with
    ``shutdown`` + ``server_close``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInHub)
    server.repo, server.files, server.requests = repo, files, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def hub():
    """The stand-in hub serving REPO: (endpoint URL, list of (method, path) requests)."""
    server = serve_hub(REPO, FILES)
    yield f"http://127.0.0.1:{server.server_address[1]}", server.requests
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def online(monkeypatch):
    """Each test starts with the hub switches unset (a test sets what it needs)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)


def downloads(requests: list) -> list[str]:
    return [p for m, p in requests if m == "GET" and "/resolve/" in p]


def write_config(tmp_path: Path, weights_dir: Path, **extra) -> Path:
    """A config naming REPO as the policy, its weights dir ``weights_dir``; ``extra`` sections merged."""
    data = {"policy": {"model": REPO, "sft": {"enabled": False}}, "weights": {"dir": str(weights_dir)},
            "run": {"output_dir": str(tmp_path / "runs")}, **extra}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_fetch_downloads_the_repo_completely_and_a_second_fetch_is_a_noop(tmp_path, hub, capsys):
    endpoint, requests = hub
    cfg, wdir = write_config(tmp_path, tmp_path / "w"), tmp_path / "w"
    assert main(["weights", "fetch", str(cfg), "--to", str(wdir), "--endpoint", endpoint]) == 0
    out = capsys.readouterr().out
    folder = wdir / REPO
    for name in WANTED:
        assert (folder / name).read_bytes() == FILES[name], name
    assert not (folder / "pytorch_model.bin").exists()  # a .bin duplicate of the weights is not fetched
    assert sorted(downloads(requests)) == sorted(f"/{REPO}/resolve/{SHA}/{n}" for n in WANTED)
    assert json.loads((folder / MARKER).read_text())["revision"] == SHA
    assert local_status(folder).state == "complete"
    assert f"{len(WANTED)} files" in out and "complete" in out

    requests.clear()
    assert main(["weights", "fetch", str(cfg), "--to", str(wdir), "--endpoint", endpoint]) == 0
    assert downloads(requests) == []  # every file already there at that commit

    (folder / SHARDS[1]).unlink()  # a lost shard: incomplete, and the next fetch brings back just it
    assert local_status(folder).state == "incomplete" and SHARDS[1] in local_status(folder).detail
    assert main(["weights", "fetch", str(cfg), "--to", str(wdir), "--endpoint", endpoint]) == 0
    assert downloads(requests) == [f"/{REPO}/resolve/{SHA}/{SHARDS[1]}"] and local_status(folder).state == "complete"


def test_dry_run_lists_models_files_and_sizes_without_downloading(tmp_path, hub, capsys):
    endpoint, requests = hub
    cfg, wdir = write_config(tmp_path, tmp_path / "w"), tmp_path / "w"
    assert main(["weights", "fetch", "--dry-run", str(cfg), "--endpoint", endpoint, "--width", "250"]) == 0
    out = capsys.readouterr().out
    total = sum(len(FILES[n]) for n in WANTED)
    assert f"{REPO} (policy.model): {len(WANTED)} files, {total / 1024:.1f} KiB" in out
    assert "missing" in out and "nothing downloaded" in out
    assert downloads(requests) == [] and not wdir.exists()


def test_dry_run_of_the_h200_config_lists_every_model_without_a_hub(capsys):
    assert main(["weights", "fetch", "--dry-run", "--offline", str(ROOT / "configs/h200.yaml"), "--width", "250"]) == 0
    out = capsys.readouterr().out
    for repo, fld in (("Qwen/Qwen3.5-35B-A3B", "policy.model"), ("Qwen/Qwen3-VL-30B-A3B-Instruct", "reward.judge.model"),
                      ("MizzenAI/HPSv3", "reward.hpsv3.checkpoint_repo"),
                      ("Qwen/Qwen2-VL-7B-Instruct", "reward.hpsv3.base_model")):
        assert f"{repo} ({fld})" in out
    assert "~67.0 GiB est. (35.95 B params x 2 B)" in out  # from brushrl.hub.shipped's count


def test_config_check_marks_each_model_complete_incomplete_or_missing(tmp_path, hub, capsys):
    endpoint, _ = hub
    wdir = tmp_path / "w"
    reward = {"weights": {"gate": 0.05, "length": 0.05, "judge": 0.5, "hpsv3": 0.4},
              "judge": {"backend": "transformers", "model": "brushrl-test/judge"},
              "hpsv3": {"base_model": REPO}}
    cfg = write_config(tmp_path, wdir, reward=reward)
    assert main(["weights", "fetch", str(cfg), "--only", REPO, "--endpoint", endpoint]) == 0
    judge = wdir / "brushrl-test/judge"  # a copy missing its second shard, no marker: checked by its index
    judge.mkdir(parents=True)
    for name in ("config.json", "model.safetensors.index.json", SHARDS[0]):
        (judge / name).write_bytes(FILES[name])
    capsys.readouterr()
    assert main(["config", "check", str(cfg), "--plan-only", "--width", "300"]) == 0
    rows = {line.split("│")[1].strip(): line for line in capsys.readouterr().out.splitlines()
            if line.startswith("│") and "/" in line.split("│")[1]}
    assert "complete" in rows[REPO] and "policy.model" in rows[REPO]
    assert f"incomplete ({SHARDS[1]} missing)" in rows["brushrl-test/judge"]
    assert "missing (not there)" in rows["MizzenAI/HPSv3"] and "reward.hpsv3.checkpoint_repo" in rows["MizzenAI/HPSv3"]


def test_a_job_with_missing_weights_and_the_hub_offline_stops_before_ray(tmp_path, monkeypatch, capsys):
    import ray

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = write_config(tmp_path, tmp_path / "w")
    assert main(["train", "--config", str(cfg)]) == 2
    out = capsys.readouterr().out
    assert f"policy.model: {REPO}" in out and "HF_HUB_OFFLINE is set" in out
    assert f"fetch them first: brushrl weights fetch {cfg} --to {tmp_path / 'w'}\n" in out  # its one model: no --only
    assert not ray.is_initialized() and not (tmp_path / "runs").exists()  # no cluster, no actor, no run dir


def test_an_unreachable_hub_is_named_with_why(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    cfg = parse_config({"policy": {"model": REPO, "sft": {"enabled": False}}})
    with pytest.raises(WeightsUnavailable, match=r"weights.dir is not set and the hub is unreachable \(Connect"):
        resolve_weights(cfg, "cfg.yaml")


def test_fetched_weights_resolve_to_local_paths_and_the_actors_go_offline(tmp_path, hub, monkeypatch):
    endpoint, requests = hub
    wdir = tmp_path / "w"
    path = write_config(tmp_path, wdir)
    assert main(["weights", "fetch", str(path), "--endpoint", endpoint]) == 0
    requests.clear()
    resolved = resolve_weights(parse_config(yaml.safe_load(path.read_text())), str(path))
    assert resolved.cfg.policy.model == str(wdir / REPO)
    assert resolved.env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"} and requests == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from brushrl.reward.base import runtime_env_for

    assert offline_env() == {"HF_HUB_OFFLINE": "1"}
    assert runtime_env_for(None)["env_vars"]["HF_HUB_OFFLINE"] == "1"  # what the scorer-side actors get
    judged = {**yaml.safe_load(path.read_text()), "reward": {"weights": {"gate": 0.1, "judge": 0.9},
                                                             "judge": {"backend": "transformers", "model": "org/judge"}}}
    with pytest.raises(WeightsUnavailable, match=rf"--to {wdir} --only org/judge$") as err:  # the one missing
        resolve_weights(parse_config(judged), str(path))
    assert "reward.judge.model: org/judge" in str(err.value) and REPO not in str(err.value)


def test_a_reachable_hub_still_serves_a_model_unless_local_is_required(tmp_path, hub, monkeypatch):
    endpoint, requests = hub
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    data = {"policy": {"model": REPO, "sft": {"enabled": False}}, "weights": {"dir": str(tmp_path / "w")}}
    resolved = resolve_weights(parse_config(data), "cfg.yaml")
    assert resolved.cfg.policy.model == REPO and resolved.env == {}
    assert "from the hub (not local" in resolved.notes[0] and downloads(requests) == []
    data["weights"]["require_local"] = True
    with pytest.raises(WeightsUnavailable, match="weights.require_local is set"):
        resolve_weights(parse_config(data), "cfg.yaml")


def test_the_tiny_cpu_config_names_no_model_and_costs_nothing():
    cfg = parse_config({})
    resolved = resolve_weights(cfg, "configs/local.yaml", reason=lambda repo: pytest.fail(f"asked the hub for {repo}"))
    assert resolved.cfg is cfg and resolved.env == {} and resolved.notes == []


def test_a_local_path_that_is_not_there_names_its_field(tmp_path):
    cfg = parse_config({"policy": {"model": str(tmp_path / "nope"), "sft": {"enabled": False}}})
    with pytest.raises(WeightsUnavailable, match=rf"policy.model: {tmp_path / 'nope'} is missing"):
        resolve_weights(cfg, "cfg.yaml")


def test_the_gpu_configs_name_every_model_explicitly():
    from brushrl.config import load_config

    h200 = {(r.field, r.name) for r in models_of(load_config(ROOT / "configs/h200.yaml"))}
    assert h200 == {("policy.model", "Qwen/Qwen3.5-35B-A3B"), ("reward.judge.model", "Qwen/Qwen3-VL-30B-A3B-Instruct"),
                    ("reward.hpsv3.checkpoint_repo", "MizzenAI/HPSv3"),
                    ("reward.hpsv3.base_model", "Qwen/Qwen2-VL-7B-Instruct")}
    cluster = load_config(ROOT / "configs/cluster.yaml")
    assert "Qwen/Qwen3-VL-30B-A3B-Instruct-FP8" in {r.name for r in models_of(cluster)}
    assert cluster.weights.require_local and cluster.weights.dir


def test_hpsv3_model_yaml_is_derived_with_the_configured_base(tmp_path):
    from brushrl.reward.hpsv3 import derived_model_yaml

    template = tmp_path / "t.yaml"
    template.write_text(yaml.safe_dump({"model_name_or_path": "Qwen/Qwen2-VL-7B-Instruct", "bf16": True}))
    out = yaml.safe_load(Path(derived_model_yaml(str(template), "/mnt/weights/Qwen/Qwen2-VL-7B-Instruct",
                                                 str(tmp_path))).read_text())
    assert out == {"model_name_or_path": "/mnt/weights/Qwen/Qwen2-VL-7B-Instruct", "bf16": True}


def test_the_rehearsal_of_h200_is_all_local_despite_require_local(tmp_path):
    """``brushrl rehearse configs/h200.yaml`` swaps every model for a local stand-in, so h200's
    ``weights.require_local`` passes without the hub and the actors go offline."""
    from brushrl.config import load_config
    from brushrl.rehearse.overrides import StandIns, rehearsal_overrides

    judge, hps = tmp_path / "judge", tmp_path / "hps"
    for folder in (judge, hps / "base"):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"\0" * 8)
    (hps / "hpsv3_tiny.safetensors").write_bytes(b"\0" * 8)
    (hps / "hpsv3_tiny.yaml").write_text(yaml.safe_dump({"model_name_or_path": str(hps / "base")}))
    stand_ins = StandIns(tmp_path / "py", tmp_path / "py", judge, hps, tmp_path / "work", tmp_path / "sft")
    h200 = ROOT / "configs/h200.yaml"
    reh = load_config(h200, rehearsal_overrides(load_config(h200), stand_ins))
    assert reh.weights.require_local
    resolved = resolve_weights(reh, str(h200), reason=lambda repo: pytest.fail(f"asked the hub for {repo}"))
    assert {r.name for r in models_of(reh)} == {str(judge), str(hps / "hpsv3_tiny.safetensors"), str(hps / "base")}
    assert resolved.env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def tiny_policy_files(out: Path) -> dict[str, bytes]:
    """A real (random) Qwen3 causal LM with its tokenizer and chat template, saved by
    ``save_pretrained`` in shards of at most 20 KB (so with ``model.safetensors.index.json``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(["paint a loose watercolour flower"] * 4, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                        chat_template="{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}")
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                         head_dim=8, tie_word_embeddings=False))
    model.save_pretrained(out, max_shard_size="20KB")
    tokenizer.save_pretrained(out)
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_fetched_policy_loads_with_the_hub_offline(tmp_path, monkeypatch):
    """What the fetch keeps is what transformers needs: a real sharded checkpoint served by the
    stand-in hub, fetched, resolved by the job's check and loaded by brushrl's loader offline."""
    from brushrl.policy.model import load_pretrained

    repo = "brushrl-test/tiny-policy"
    files = tiny_policy_files(tmp_path / "saved")
    assert "model.safetensors.index.json" in files  # sharded, as the real models are
    server = serve_hub(repo, files)
    try:
        path = tmp_path / "cfg.yaml"
        path.write_text(yaml.safe_dump({"policy": {"model": repo, "sft": {"enabled": False}},
                                        "weights": {"dir": str(tmp_path / "w")}}))
        assert main(["weights", "fetch", str(path), "--endpoint",
                     f"http://127.0.0.1:{server.server_address[1]}"]) == 0
    finally:
        server.shutdown()
        server.server_close()
    resolved = resolve_weights(parse_config(yaml.safe_load(path.read_text())), str(path))
    monkeypatch.setenv("HF_HUB_OFFLINE", resolved.env["HF_HUB_OFFLINE"])  # what the actors run with
    model, tokenizer = load_pretrained(resolved.cfg.policy.model)
    ids = tokenizer("a flower", return_tensors="pt").input_ids
    assert model.generate(ids, max_new_tokens=2, do_sample=False).shape[1] == ids.shape[1] + 2


def test_a_model_two_fields_name_is_fetched_once_and_resolved_in_both(tmp_path, hub):
    endpoint, requests = hub
    wdir = tmp_path / "w"
    path = write_config(tmp_path, wdir, reward={"weights": {"gate": 0.1, "hpsv3": 0.9},
                                                "hpsv3": {"base_model": REPO, "checkpoint_path": str(tmp_path / "c")}})
    (tmp_path / "c").write_bytes(b"\0")
    cfg = parse_config(yaml.safe_load(path.read_text()))
    assert [(r.field, r.targets) for r in models_of(cfg) if r.name == REPO] == [
        ("policy.model", ("policy.model", "reward.hpsv3.base_model"))]
    assert main(["weights", "fetch", str(path), "--endpoint", endpoint]) == 0
    assert len(downloads(requests)) == len(WANTED)  # once, not once per field
    resolved = resolve_weights(cfg, str(path))
    assert resolved.cfg.policy.model == resolved.cfg.reward.hpsv3.base_model == str(wdir / REPO)
    assert resolved.cfg.reward.hpsv3.checkpoint_path == str(tmp_path / "c") and resolved.env
