"""``logging.trackers`` (``brushrl.artifacts.trackers``) against the real libraries: TensorBoard
event files read back with TensorBoard's ``EventAccumulator``, a W&B offline run read back from
its run folder, and a real local MLflow tracking server (started here, queried with
``MlflowClient``, then killed mid-run). The steps logged are built like the driver's: a
``metrics.jsonl`` record and its ``rollouts.parquet`` rows with PNGs on disk.
(``tests/test_train.py`` runs a real 2-step training with TensorBoard on.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from brushrl.artifacts.trackers import STATE_FILE, Trackers, TrackerUnavailable, tracker_problems
from brushrl.artifacts.trackers.base import eval_scalars, mlflow_name, step_scalars
from brushrl.config import parse_config

TEMPLATE = "Paint {subject} in watercolour."
#: The names of a real ``metrics.jsonl`` record that these steps carry (a subset, same shapes:
#: ``/`` in names, None for a mean over nothing, ints, a bool-free record).
COMPONENTS = ("gate", "length", "pool_similarity")


def _record(step: int) -> dict:
    return {
        "step": step, "policy_version": step - 1, "reward/mean": 0.25 * step, "gate/pass_rate": 0.5,
        "samples": 3, "samples/none": 1, "staleness/max": None, "time/step_s": 1.5 + step,
        "time/score/pool_similarity_s": 0.1, "reward/gate": 0.5, "reward/length": 0.9,
        "reward/pool_similarity": 0.1 * step, "ledger/running": 0, "learner/loss": -0.01 * step,
    }


def _rows(tmp_path: Path, step: int) -> list[dict]:
    """Three samples of one group: two painted (PNG on disk), one failed the gate, one None."""
    folder = tmp_path / "png" / f"step_{step:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (verdict, total) in enumerate((("pass", 0.75), ("pass", 0.5), ("no_paint", None))):
        png = None
        if verdict == "pass":
            png = folder / f"g{step - 1}_s{i}.png"
            Image.new("RGB", (32, 32), (40 * i + 40, 90, 160)).save(png)
        # group ids grow from step to step, as in a run
        rows.append({"step": step, "group_id": step - 1, "sample": i, "prompt": TEMPLATE.replace("{subject}", "a red poppy"),
                     "code": f"circle({i}, 0, 10); // sketch {i}", "gate_verdict": verdict, "total": total,
                     "none_cause": "scorer_timeout" if total is None else None, "policy_version": step - 1,
                     "png": str(png) if png else None, "reward_gate": 1.0 if verdict == "pass" else 0.0,
                     "reward_length": 0.9, "reward_pool_similarity": None if total is None else 0.2 * i,
                     "reward_raw": "{}", "reward_causes": "{}"})
    return rows


def _cfg(tmp_path: Path, trackers: list[str], **logging):
    return parse_config({"run": {"name": "trk", "output_dir": str(tmp_path)}, "prompts": {"template": TEMPLATE},
                         "logging": {"trackers": trackers, **logging}})


def _log_run(trackers: Trackers, cfg, tmp_path: Path, steps=(1, 2)) -> None:
    trackers.log_params(cfg)
    for step in steps:
        trackers.log_step(_record(step), _rows(tmp_path, step), TEMPLATE, cfg.logging.images_per_step)


def test_tensorboard_event_files_hold_the_steps_scalars_paintings_and_samples(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = _cfg(tmp_path, ["tensorboard"])
    trackers = Trackers.open(cfg, tmp_path)
    _log_run(trackers, cfg, tmp_path)
    report = {"results": {"base": {"held_out": {"reward": {"mean": 0.3, "lo": 0.1, "hi": 0.5, "n": 4}}},
                          "step_0002": {"vs_base": {"held_out": {"improved": True}}}}}
    (tmp_path / "eval.json").write_text(json.dumps(report))
    trackers.log_eval(report, tmp_path / "eval.json", step=2)
    trackers.close()
    # `brushrl eval` on a run with trackers sends its eval.json's results to the same tracker runs.
    from brushrl.orchestrator.evaluate import Evaluator

    (tmp_path / "metrics.jsonl").write_text(json.dumps(_record(1)) + "\n" + json.dumps(_record(2)) + "\n")
    (tmp_path / "config.yaml").write_text("{}")
    evaluator = Evaluator(cfg, tmp_path, [], log=open(os.devnull, "w"))
    evaluator._track({"results": {"step_0002": {"training": {"gate_pass": {"mean": 0.75}}}}})
    assert json.loads((tmp_path / STATE_FILE).read_text())["tensorboard"]["logdir"] == str(tmp_path / "tensorboard")

    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"images": 0, "scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    names = set(step_scalars(_record(1)))  # the record's numbers: None (staleness/max) and step left out
    assert names == set(_record(1)) - {"step", "staleness/max"}
    assert names | {"eval/base/held_out/reward/mean", "eval/step_0002/vs_base/held_out/improved"} <= set(tags["scalars"])
    for name in names:
        assert [(e.step, pytest.approx(e.value)) for e in acc.Scalars(name)] == [
            (s, float(_record(s)[name])) for s in (1, 2)], name
    assert acc.Scalars("eval/base/held_out/reward/lo")[0].value == pytest.approx(0.1)
    assert [(e.step, e.value) for e in acc.Scalars("eval/step_0002/training/gate_pass/mean")] == [(2, 0.75)]
    # Each painting under its own key, every step, as a real PNG of the painting's size.
    assert set(tags["images"]) == {"paintings/00", "paintings/01"}  # the same keys every step
    assert [(e.step, e.width, e.height) for e in acc.Images("paintings/01")] == [(1, 32, 32), (2, 32, 32)]
    texts = {t: acc.Tensors(t) for t in tags["tensors"]}
    captions = texts["paintings/captions/text_summary"][-1].tensor_proto.string_val[0].decode()
    assert "`paintings/00`: a red poppy · gate pass · reward 0.750 · v1 · g1_s0" in captions
    samples = texts["rollouts/text_summary"][0].tensor_proto.string_val[0].decode()
    assert "circle(2, 0, 10)" in samples and "no_paint" in samples and "reward_pool_similarity" in samples
    assert "learner:" in texts["config/text_summary"][0].tensor_proto.string_val[0].decode()
    from tensorboard.plugins.hparams import plugin_data_pb2  # the HParams tab: the config, flat

    start = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(start).session_start_info.hparams
    assert hparams["run.name"].string_value == "trk" and hparams["learner.lr"].number_value == cfg.learner.lr


def test_a_missing_package_or_address_stops_the_run_before_it_starts(tmp_path, monkeypatch):
    import importlib.util

    from brushrl.orchestrator.trainer import Trainer

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = _cfg(tmp_path, ["tensorboard", "wandb", "mlflow"])
    problems = tracker_problems(cfg)
    assert len(problems) == 2
    assert "'wandb' needs the Python package 'wandb'" in problems[0] and "brushrl[trackers]" in problems[0]
    assert "MLFLOW_TRACKING_URI" in problems[1]
    with pytest.raises(TrackerUnavailable, match="wandb"):
        Trainer(cfg)
    assert not (tmp_path / "trk").exists()  # nothing was started or written
    import contextlib
    import io

    from brushrl.cli import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["config", "check", str(Path(__file__).parents[1] / "configs/local.yaml"), "--plan-only",
                         "--set", "logging.trackers=[tensorboard, wandb]"])
    assert code == 1 and "'wandb' needs the Python package 'wandb'" in " ".join(out.getvalue().split())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    assert len(tracker_problems(cfg)) == 1
    assert tracker_problems(_cfg(tmp_path, [])) == []


class _Broken:
    name = "broken"

    def __init__(self):
        self.calls = 0

    def state(self):
        return {}

    def log_step(self, *args):
        self.calls += 1
        raise ConnectionError("server gone")

    log_params = log_summary = log_artifact = close = log_step


class _Kept:
    name = "kept"

    def __init__(self):
        self.steps = []

    def state(self):
        return {}

    def log_step(self, step, scalars, images, table):
        self.steps.append((step, scalars, [i.caption for i in images], table.rows))

    def log_params(self, *a):
        pass

    log_summary = log_artifact = close = log_params


def test_a_failing_tracker_warns_once_is_counted_and_the_others_still_log(tmp_path):
    said = []
    broken, kept = _Broken(), _Kept()
    trackers = Trackers([broken, kept], say=said.append)
    cfg = _cfg(tmp_path, [])
    _log_run(trackers, cfg, tmp_path, steps=(1, 2, 3))
    trackers.close()
    assert broken.calls == 5 and [s for s, *_ in kept.steps] == [1, 2, 3]
    assert trackers.failure_counts() == {"trackers/broken/failures": 5, "trackers/kept/failures": 0}
    assert len(said) == 1 and "tracker broken failed (log_params: ConnectionError: server gone)" in said[0]
    _, scalars, captions, table = kept.steps[0]
    assert scalars == step_scalars(_record(1))
    assert captions == ["a red poppy · gate pass · reward 0.750 · v0 · g0_s0",
                        "a red poppy · gate pass · reward 0.500 · v0 · g0_s1"]
    assert len(table) == 3 and table[2][7:10] == ["no_paint", None, "scorer_timeout"]


def test_eval_and_metric_names():
    report = {"results": {"base": {"training": {"reward": {"mean": 0.5, "lo": None}, "none": {"render_infra": 2}}}}}
    assert eval_scalars(report) == {"eval/base/training/reward/mean": 0.5, "eval/base/training/none/render_infra": 2.0}
    assert mlflow_name("time/score/judge_s") == "time/score/judge_s"
    assert mlflow_name("turn/1/reward_mean") == "turn/1/reward_mean"
    assert mlflow_name("gate/fail[x]=1") == "gate/fail_x__1"


def wandb_records(run_file: Path) -> list:
    """The records of a W&B run file (``run-<id>.wandb``, what ``wandb sync`` uploads): W&B's
    7-byte header (``:W&B``, magic, version), then LevelDB's log format (32 KiB blocks of chunks
    with a 7-byte header: CRC, length, type full/first/middle/last), each record a
    ``wandb_internal_pb2.Record``. wandb 0.31 ships no Python reader of it (its core is in Go)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, block, pos, buf, out = run_file.read_bytes(), 32768, 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = block - pos % block
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or kind == 0:  # block trailer or zero padding
            pos += left
            continue
        buf = (b"" if kind in (1, 2) else buf) + data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            out.append(pb.Record.FromString(buf))
    return out


def test_wandb_offline_run_holds_the_steps_config_paintings_table_and_adapter(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = _cfg(tmp_path, ["wandb"])
    trackers = Trackers.open(cfg, tmp_path)
    _log_run(trackers, cfg, tmp_path)
    (tmp_path / "ckpt").mkdir()
    for name in ("adapter_model.safetensors", "adapter_config.json", "learner_state.pt"):
        (tmp_path / "ckpt" / name).write_bytes(b"{}")
    trackers.log_adapter(tmp_path / "ckpt", "trk")
    trackers.close()
    assert trackers.failure_counts() == {"trackers/wandb/failures": 0}

    state = json.loads((tmp_path / STATE_FILE).read_text())["wandb"]
    (run_file,) = (tmp_path / "wandb").glob(f"offline-run-*-{state['id']}/run-{state['id']}.wandb")
    records = wandb_records(run_file)
    history = {r.history.step.num: {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"}
    assert sorted(history) == [1, 2]
    for step, logged in history.items():
        for name, value in step_scalars(_record(step)).items():
            assert logged[name] == pytest.approx(value), name
        assert logged["paintings/captions"] == [f"a red poppy · gate pass · reward {r:.3f} · v{step - 1} · g{step - 1}_s{i}"
                                                for i, r in enumerate((0.75, 0.5))]
        assert logged["paintings/count"] == 2 and logged["rollouts/nrows"] == 3
    files = run_file.parent / "files"
    table = json.loads((files / history[2]["rollouts/path"]).read_text())
    assert "code" in table["columns"] and table["data"][2][table["columns"].index("gate_verdict")] == "no_paint"
    assert all((files / f).exists() for f in history[2]["paintings/filenames"])
    config = next(r.config for r in records if r.WhichOneof("record_type") == "config")
    assert json.loads({u.key: u.value_json for u in config.update}["run"])["name"] == "trk"
    (adapter,) = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact" and r.artifact.type == "model"]
    assert adapter.name == "trk-adapter"
    assert sorted(e.path for e in adapter.manifest.contents) == ["adapter_config.json", "adapter_model.safetensors"]


class MlflowServer:
    """``mlflow server`` on 127.0.0.1 (a free port, SQLite store and proxied artifacts under
    ``root``) in its own process group. ``ready`` is set when its log says uvicorn is listening
    (or the process ended: ``wait`` then fails with the log)."""

    def __init__(self, root: Path):
        from conftest import free_port

        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.ready, self.lines = threading.Event(), []
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job runner: a faster start
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--artifacts-destination", str(root / "artifacts")],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if "Uvicorn running on" in line:
                self.ready.set()
        self.ready.set()  # ended

    def wait(self, timeout_s: float = 240) -> None:
        assert self.ready.wait(timeout_s), f"mlflow server not up after {timeout_s} s:\n{''.join(self.lines)[-3000:]}"
        for _ in range(50):  # the log line comes as uvicorn binds; /health answers right after
            assert self.proc.poll() is None, f"mlflow server exited:\n{''.join(self.lines)[-3000:]}"
            try:
                if urllib.request.urlopen(f"{self.uri}/health", timeout=5).read().strip() == b"OK":
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"{self.uri}/health never answered OK")

    def kill(self) -> None:
        """SIGKILL the server and its uvicorn worker (the process group): a crash, no goodbye."""
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module", autouse=True)
def mlflow_server(request, tmp_path_factory):
    """Starts the MLflow server before this module's first test when its MLflow test is selected,
    so the server's ~10-40 s start overlaps the other tests."""
    if not any(item.module is request.module and "mlflow" in item.name for item in request.session.items):
        yield None
        return
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.kill()


class _NoMetrics:
    """Stands in for ``PipelineMetrics`` (Ray's metrics are not under test here)."""

    def publish(self, *args) -> None:
        pass


def test_mlflow_server_gets_the_run_and_a_killed_server_does_not_stop_training(tmp_path, mlflow_server):
    from mlflow.tracking import MlflowClient

    from brushrl.artifacts.run_dir import RunDir
    from brushrl.orchestrator.loop import StepReport
    from brushrl.orchestrator.progress import StepLine
    from brushrl.orchestrator.state import TrainerState
    from brushrl.orchestrator.writer import StepWriter

    cfg = _cfg(tmp_path, ["mlflow"], mlflow_tracking_uri=None)
    run_dir = RunDir(tmp_path / "trk")
    mlflow_server.wait()
    os.environ["MLFLOW_TRACKING_URI"] = mlflow_server.uri  # the variable, as a job's env would set it
    try:
        said = []
        trackers = Trackers.open(cfg, run_dir.root, say=said.append)
    finally:
        del os.environ["MLFLOW_TRACKING_URI"]
    _log_run(trackers, cfg, tmp_path)
    (tmp_path / "ckpt").mkdir()
    for name in ("adapter_model.safetensors", "adapter_config.json", "learner_state.pt"):
        (tmp_path / "ckpt" / name).write_bytes(b"{}")
    trackers.log_adapter(tmp_path / "ckpt", "trk")
    (tmp_path / "eval.json").write_text("{}")
    trackers.log_eval({"results": {"base": {"held_out": {"reward": {"mean": 0.4}}}}}, tmp_path / "eval.json", step=2)
    assert trackers.failure_counts() == {"trackers/mlflow/failures": 0} and not said

    client = MlflowClient(mlflow_server.uri)
    run_id = json.loads((run_dir.root / STATE_FILE).read_text())["mlflow"]["run_id"]
    run = client.get_run(run_id)
    assert run.info.run_name == "trk" and client.get_experiment(run.info.experiment_id).name == "brushrl"
    assert set(run.data.metrics) == set(step_scalars(_record(1))) | {"eval/base/held_out/reward/mean"}
    for name in ("reward/mean", "time/score/pool_similarity_s", "samples"):
        assert [(m.step, m.value) for m in client.get_metric_history(run_id, name)] == [
            (s, pytest.approx(_record(s)[name])) for s in (1, 2)]
    assert run.data.params["run.name"] == "trk" and float(run.data.params["learner.lr"]) == cfg.learner.lr
    artifacts = {f.path for folder in ("images", "paintings", "rollouts", "trk-adapter", "eval")
                 for f in client.list_artifacts(run_id, folder)}
    assert {"trk-adapter/adapter_model.safetensors", "trk-adapter/adapter_config.json", "eval/eval.json",
            "rollouts/step_0001.json", "paintings/captions_step_0002.json"} <= artifacts
    assert "trk-adapter/learner_state.pt" not in artifacts
    pngs = sorted(p for p in artifacts if p.startswith("images/paintings~01+step+") and p.endswith(".png"))
    assert len(pngs) == 2  # one per step under the same key
    (tmp_path / "dl").mkdir()
    table = json.loads(Path(client.download_artifacts(run_id, "rollouts/step_0002.json", str(tmp_path / "dl"))).read_text())
    assert "code" in table["columns"] and len(table["data"]) == 3

    # The server dies mid-run: each step's record still lands in metrics.jsonl, the failure is
    # warned about once and counted, and a step is not held up by MLflow's retries.
    mlflow_server.kill()
    writer = StepWriter(cfg, run_dir, TrainerState(), _NoMetrics(), StepLine(5, open(os.devnull, "w")), trackers)
    for step in (3, 4, 5):
        t0 = time.perf_counter()
        writer.write(StepReport(step, step - 1, step, [], [], [], {"loss": 0.1 * step}, 0.0, 0.1, 0.0, {}, 0))
        assert time.perf_counter() - t0 < 20
    trackers.close()
    records = run_dir.metrics()
    assert [(r["step"], r["learner/loss"], r["trackers/mlflow/failures"]) for r in records] == [
        (3, pytest.approx(0.3), 0), (4, pytest.approx(0.4), 1), (5, pytest.approx(0.5), 2)]
    assert trackers.failures["mlflow"] == 4  # the three steps and the close
    assert len(said) == 1 and said[0].startswith("[brushrl] warning: tracker mlflow failed (step 3:")
