"""End to end: a short training run on real parts (tiny transformer, Chromium, p5.brush, local Ray).

``cluster`` (module fixture) starts one local Ray cluster for every run of this module: a
``Trainer`` joins a running cluster (``init_ray``) and its ``Pipeline.stop`` kills every actor it
started, so each run gets the whole cluster and new actors, as in a cluster of its own (one Ray
start instead of four: issue 23). ``two_step_run`` (module fixture) runs the whole pipeline
in-process on it once; ``test_two_step_run_writes_every_artefact`` checks its run directory and the
Prometheus endpoint, ``test_eval_scores_base_and_checkpoint_...`` runs ``brushrl eval`` on a copy of
it in the same cluster, ``test_resumed_run_keeps_the_judges_...`` resumes another copy for a third
step (its reward has the judge for that: one training for the three, issue 23). ``ray job submit`` of ``rayjobs/train.py``
is tested in ``test_ray_job.py``, on that file's shared head.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import ray
import yaml

from brushrl.artifacts.summary import summarize
from brushrl.cli import main as cli_main
from brushrl.config import load_config
from brushrl.orchestrator.trainer import Trainer
from conftest import SFT_CACHE, TEST_WARM_STARTS, free_port

ROOT = Path(__file__).resolve().parents[1]


def small_overrides(tmp_path: Path, steps: int = 2) -> dict:
    """A config small enough for CI: 2 steps, G=3, one renderer, and a tiny policy that memorises
    two corpus sketches (300 SFT steps, ~25 s quiet; shipped in ``tests/warm_starts``) so that some
    completions pass the gate and render."""
    return {
        "run.steps": steps,
        "run.name": "e2e",
        "run.output_dir": str(tmp_path / "runs"),
        "run.checkpoint_every": 1,
        "rollout.group_size": 3,
        # the memoriser's groups often lack reward spread (3 equal sketches, 3 equal failures; 5 of
        # 12 groups had some, `python -m brushrl.rollout.check` and a render of its samples): a step
        # waits for up to 20 groups' worth before it goes ahead short (0.6^20 < 1e-4), so a run
        # trains; the cap costs time only when groups keep failing
        "orchestrator.max_rejected_batches": 20,
        "render.num_actors": 1,
        "ray.num_cpus": 4,
        "policy.tiny": {"vocab_size": 1024, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "intermediate_size": 344, "max_position_embeddings": 2048},
        "policy.sft": {"variations": 1, "max_examples": 2, "epochs": 300, "batch_size": 2, "lr": 0.003,
                       "cache_dir": str(SFT_CACHE)},
    }


def _scrape(port: int, names: list[str], timeout_s: float = 90.0) -> str:
    """The node's Prometheus text once every one of ``names`` is in it (Ray exports every ~10 s),
    or the last text seen after ``timeout_s`` seconds."""
    deadline = time.time() + timeout_s
    text = ""
    while time.time() < deadline:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            if all(name in text for name in names):
                return text
        except OSError:
            pass
        time.sleep(2)
    return text


def _check_tensorboard(run: Path) -> None:
    """``logging.trackers: [tensorboard]``: the run's event files hold every number of every
    ``metrics.jsonl`` record under the record's own name, at its step, and the step's paintings."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    numbers = {(k, m["step"]): float(v) for m in metrics for k, v in m.items()
               if k != "step" and isinstance(v, (int, float))}
    assert "trackers/tensorboard/failures" in metrics[-1] and "reward/mean" in {k for k, _ in numbers}
    assert set(acc.Tags()["scalars"]) == {k for k, _ in numbers}
    logged = {(tag, e.step): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
    assert logged == pytest.approx(numbers)
    pngs = list((run / "png").rglob("*.png"))
    assert bool(acc.Tags()["images"]) == bool(pngs)


def test_the_shipped_memoriser_is_the_tests_recipe(tmp_path):
    """``tests/warm_starts`` holds the warm start of ``small_overrides`` as the code now computes its
    key (a corpus, tokenizer, prompt or SFT change moves the key: then every test file sharing it
    would train it again, ~70 s of each fresh CI), trained, and ``conftest`` installed it."""
    from brushrl.policy.ship import config_key
    from brushrl.policy.sft import DONE_MARKER

    key = config_key(load_config(ROOT / "configs/local.yaml", small_overrides(tmp_path)))
    shipped = sorted(p.name for p in TEST_WARM_STARTS.glob("*"))
    assert (TEST_WARM_STARTS / key / DONE_MARKER).exists(), (
        f"tests/warm_starts lacks the memoriser's key {key} (has {shipped}): run "
        "`.venv/bin/python tests/ship_memoriser.py` and commit tests/warm_starts")
    assert shipped == [key], f"stale entries beside {key}: {shipped}"
    done = json.loads((TEST_WARM_STARTS / key / DONE_MARKER).read_text())
    assert done["steps"] > 0 and done["final_loss"] < 0.5  # memorised: ln(1024) = 6.9 nats untrained
    assert (SFT_CACHE / key / DONE_MARKER).exists()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The module's local Ray cluster, started as a ``Trainer`` of ``small_overrides`` starts its
    own (``init_ray(cfg.ray)``: 4 logical CPUs, the same runtime env) with Prometheus on a free port;
    every run of the module joins it (``init_ray`` returns when Ray is up) and ends by killing its
    actors (``Pipeline.stop``), freeing the CPUs for the next run. Yields the metrics port; Ray
    stops at the module's end."""
    from brushrl.ray_setup import init_ray

    if ray.is_initialized():
        ray.shutdown()
    port = free_port()
    overrides = small_overrides(tmp_path_factory.mktemp("cluster")) | {"ray.metrics_export_port": port}
    init_ray(load_config(ROOT / "configs/local.yaml", overrides).ray)
    yield port
    ray.shutdown()


@pytest.fixture(scope="module")
def judge_url():
    """A real HTTP server speaking the chat API for the module's judged runs ("darker wins",
    ``test_judge.ChatServer``); its base URL."""
    from test_judge import ChatServer

    server = ChatServer("judge")
    yield server.url
    server.close()


def judged(overrides: dict, url: str) -> dict:
    """``overrides`` plus the pairwise judge at ``url`` in the reward, with a one-stage reference
    curriculum that any score reaches (min_score 0): stage 1 from the second judged group on."""
    return overrides | {
        "rollout.groups_per_step": 1,
        "reward.weights": {"gate": 0.05, "length": 0.05, "pool_similarity": 0.5, "judge": 0.4},
        "reward.judge": {"base_url": url, "refs_per_tier": 1, "image_side": 32, "backoff_s": 0,
                         "curriculum": [{"min_score": 0.0, "refs": {"love": 1}}]},
    }


@pytest.fixture(scope="module")
def two_step_run(cluster, judge_url, tmp_path_factory):
    """A finished 2-step run (checkpoints at steps 1 and 2, TensorBoard on, Prometheus on the
    cluster's port, the judge at ``judge_url`` in the reward), trained once for the module in
    ``cluster`` (its metrics endpoint, the eval's actors; the resume test resumes a copy of it).
    Yields ``(cfg, run_dir, gallery, log, port)``."""
    tmp = tmp_path_factory.mktemp("two_step")
    port = cluster
    overrides = judged(small_overrides(tmp), judge_url) | {
        "ray.metrics_export_port": port, "logging.trackers": ["tensorboard"]}
    cfg = load_config(ROOT / "configs/local.yaml", overrides)
    log = io.StringIO()
    gallery = Trainer(cfg, log=log).run()
    yield cfg, tmp / "runs" / "e2e", gallery, log, port


@pytest.mark.slow
def test_two_step_run_writes_every_artefact(two_step_run, tmp_path):
    cfg, run, gallery, log, port = two_step_run
    _check_tensorboard(run)
    assert gallery == run / "gallery.html" and gallery.exists()
    assert yaml.safe_load((run / "config.yaml").read_text())["run"]["steps"] == 2
    assert json.loads((run / "pool.json").read_text())["version_id"].startswith("starter@v1+")

    rows = pd.read_parquet(run / "rollouts.parquet")
    assert len(rows) >= 2 * 3
    for col in ("step", "prompt", "completion", "code", "seed", "gate_verdict", "reward_gate", "reward_length",
                "reward_pool_similarity", "total", "policy_version", "gen_s", "render_s", "score_s"):
        assert col in rows.columns, col
    assert set(rows["step"]) == {1, 2}
    # A sample's total is 0 exactly when its gate failed, None only with a recorded cause.
    failed = rows[rows.gate_verdict != "pass"]
    assert (failed.total.fillna(-1) == 0).all() or failed.none_cause.notna().all()
    assert rows[rows.total.isna()].none_cause.notna().all()

    pngs = list((run / "png").rglob("*.png"))
    assert pngs, "no painting was rendered"
    assert all(Path(p).exists() for p in rows.png.dropna())
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all("gate/pass_rate" in m and "time/step_s" in m for m in metrics)
    # what the passing paintings look like, measured every step against the pool (issue 24)
    assert "[brushrl] paint/* measures against 16 pool subjects" in log.getvalue()
    passing = rows[rows.gate_verdict == "pass"].groupby("step").size()
    assert [m["paint/measured"] for m in metrics] == [int(passing.get(m["step"], 0)) for m in metrics]
    assert all(m["paint/copies"] >= 0 and m["time/paint_s"] >= 0 for m in metrics)
    assert all((m["paint/subject_fidelity"] is None) == (m["paint/measured"] == 0) for m in metrics)
    assert (run / "checkpoints" / "step_0002" / "adapter_model.safetensors").exists()
    html = gallery.read_text()
    assert "step 2" in html and "reward_curve.svg" in html and (run / "reward_curve.svg").exists()

    # the synchronous trainer is on-policy; a step whose one group was filtered trained none (None)
    assert all(m["staleness/max"] == (0 if m["groups/accepted"] else None) for m in metrics)
    # The sync canary checked version 0 and every step's sync (a step that trained synced): the
    # fp32 engine serves exactly the learner's adapter (docs/async.md).
    tolerance = cfg.orchestrator.sync_check.tolerance
    assert "[brushrl] sync check, policy version 0: log-prob gap" in log.getvalue()
    assert any(m["groups/accepted"] for m in metrics), "no step trained: the sync was never checked after an update"
    for m in filter(lambda m: m["groups/accepted"], metrics):
        assert 0 <= m["sync/logprob_gap"] <= m["sync/logprob_gap_max"] < tolerance, m
        assert m["sync/engine_shift"] == pytest.approx(m["sync/adapter_shift"], abs=tolerance), m
    from brushrl.reward.report import summarize_run

    assert ([(s["sync"] or {}).get("logprob_gap") for s in summarize_run(run)["steps"]]
            == [m.get("sync/logprob_gap") for m in metrics])
    from brushrl.reward.report import main as report_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert report_main([str(run), "--json", str(tmp_path / "report.json")]) == 0
    synced = [m for m in metrics if "sync/logprob_gap" in m]  # the steps that trained
    assert "sync gap" in printed.getvalue() and f"{synced[-1]['sync/logprob_gap']:.1e}" in printed.getvalue()
    assert all(m["time/update_s"] > 0 and m["time/sync_s"] >= 0 for m in metrics)
    assert "data-state='finished'" in html and (run / "gate_mix.svg").exists()

    from test_metrics import documented_metrics

    documented = documented_metrics()
    # A labelled counter is exported from its first event on (Ray cannot record a zero increment):
    # None rewards are rare, so a 2-step run may have none.
    if not sum(m["samples/none"] for m in metrics):
        documented.pop("ray_brushrl_reward_none_total")
    rows = pd.read_parquet(run / "rollouts.parquet")
    # A scorer's None has the cause "<scorer>:<cause>" (a render infra None does not count here).
    if not rows["none_cause"].dropna().str.contains(":").any():  # every scorer is weighted here
        documented.pop("ray_brushrl_scorer_none_total")  # also a labelled counter: from its first event on
    if cfg.render.network_isolation == "netns":  # counted by a browser started without a namespace only
        documented.pop("ray_brushrl_renderers_unisolated_total")
    # The run ends with its summary, the same as `brushrl summary` prints from the folder.
    summary = summarize(run)
    assert (summary.state, summary.last_step, summary.planned_steps) == ("finished", 2, 2)
    assert sum(summary.gate.values()) == len(rows) and summary.gate["pass"] == (rows.gate_verdict == "pass").sum()
    assert summary.step_rewards == [m["reward/mean"] for m in metrics if m["reward/mean"] is not None]
    assert sum(summary.none_causes.values()) == rows.total.isna().sum()
    lines = summary.lines()
    assert log.getvalue().splitlines()[-len(lines):] == [f"[brushrl] {line}" for line in lines]
    assert f"gallery: {run / 'gallery.html'}" in lines and any("brushrl serve" in line for line in lines)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_main(["summary", str(run), "--wall-s", "125"]) == 0
    assert "time: 2 min 5 s wall; 2 steps" in printed.getvalue() and len(printed.getvalue()) < 2000

    text = _scrape(port, list(documented))
    missing = [name for name in documented if name not in text]
    assert not missing, f"documented metrics not on the Prometheus endpoint: {missing}"


@pytest.mark.slow
def test_eval_scores_base_and_checkpoint_and_the_same_seed_gives_the_same_numbers(two_step_run, tmp_path):
    """``brushrl eval`` of a copy of the module's run (its base policy vs step 2) in the cluster the
    run trained in; a second evaluation in a new set of actors gives the same numbers."""
    from brushrl.orchestrator.evaluate import Evaluator, eval_config, eval_prompts, resolve_policies

    run = tmp_path / "e2e"
    shutil.copytree(two_step_run[1], run)  # the artefact test reads the original
    scope = ["--samples", "2", "--held-out", "1", "--training", "1", "--unseen", "0"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_main(["eval", str(run), "--report-only", *scope]) == 2  # nothing evaluated yet
    assert "no finished evaluation" in printed.getvalue()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_main(["eval", str(run), "--checkpoint", "latest", *scope]) == 0
    report = json.loads((run / "eval" / "eval.json").read_text())
    assert report["policies"] == ["base", "step_0002"] and report["samples_per_prompt"] == 2
    assert set(report["results"]["base"]) == {"held_out", "training"}
    assert "vs_base" in report["results"]["step_0002"]
    assert "step_0002 - base" in printed.getvalue()  # the side-by-side table
    # one progress line per finished group, with an ETA: 2 prompts x 2 policies
    assert re.findall(r"^\[eval\] groups (\d)/4 \((\w+) \d/2\) \d+ s, eta \d+m\d\ds$", printed.getvalue(), re.M) == [
        ("1", "base"), ("2", "base"), ("3", "step_0002"), ("4", "step_0002")]
    rows = pd.read_parquet(run / "eval" / "samples.parquet")
    assert len(rows) == 2 * 2 * 2 and set(rows.policy) == {"base", "step_0002"}
    assert all((run / p).exists() for p in rows.png.dropna())
    page = (run / "eval.html").read_text()
    assert "<th>base</th><th>step_0002</th>" in page and "held-out prompts" in page
    assert 'href="eval.html"' in (run / "gallery.html").read_text()
    assert any(line.startswith("eval held-out (1x2)") for line in summarize(run).lines())

    # The same seed gives the same numbers: a second evaluation in a new set of actors.
    again = eval_config(run, {"eval.samples_per_prompt": 2})
    prompts = eval_prompts(again, held_out=1, training=1)
    second = Evaluator(again, run, prompts, log=io.StringIO()).run(resolve_policies(run, ["latest"]))
    assert second["results"] == report["results"]
    assert pd.read_parquet(run / "eval" / "samples.parquet")[["policy", "completion", "total"]].equals(
        rows[["policy", "completion", "total"]])

    # --report-only: the statistics again from samples.parquet, nothing sampled (no Ray needed).
    (run / "eval" / "eval.json").write_text(json.dumps({**report, "results": {}}))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_main(["eval", str(run), "--report-only", *scope]) == 0
    assert json.loads((run / "eval" / "eval.json").read_text())["results"] == report["results"]
    assert "step_0002 - base" in printed.getvalue()


@pytest.mark.slow
def test_a_step_with_two_deepspeed_learner_workers(tmp_path, cluster):
    """``learner.strategy: deepspeed``: two ZeRO-3 workers on gloo train behind the one learner the
    driver sees; every artefact is written and the checkpoint holds both ranks' shards. Runs in the
    module's cluster (new actors: the earlier runs killed theirs). One step: what the workers share
    is set up, stepped and saved in it; a third step asserted nothing new and took a third of the
    test's 805 s in CI's run of stop 43, a second step 40-50 s of 138 at stop 45 (issue 38)."""
    overrides = small_overrides(tmp_path, steps=1) | {
        "learner.strategy": "deepspeed", "learner.workers": 2, "learner.deepspeed": {"zero_stage": 3}}
    log = io.StringIO()
    gallery = Trainer(load_config(ROOT / "configs/local.yaml", overrides), log=log).run()
    run = tmp_path / "runs" / "e2e"
    assert "[brushrl] learner: deepspeed ZeRO-3 x 2 workers (gloo)" in log.getvalue(), log.getvalue()[-3000:]
    assert "data-state='finished'" in gallery.read_text()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1]
    assert all(m["time/update_s"] > 0 for m in metrics)
    assert set(pd.read_parquet(run / "rollouts.parquet")["step"]) == {1}
    assert list((run / "png").rglob("*.png")), "no painting was rendered"
    files = {p.name for p in (run / "checkpoints" / "step_0001").rglob("*") if p.is_file()}
    assert {"trainer_state.json", "adapter_model.safetensors", "learner_state.pt", "rng_rank001.pt",
            "zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= files, sorted(files)
    # one optimizer step per step with an accepted group (a group where the memorised policy failed
    # or passed every sample has no variance and is filtered; a step waits for up to 20 groups for
    # one with some): one, and the checkpoint agrees
    trained = sum(1 for m in metrics if m.get("groups/accepted", 0) > 0)
    state = json.loads((run / "checkpoints" / "step_0001" / "trainer_state.json").read_text())
    assert trained >= 1 and state["policy_version"] == trained, (trained, state)


@pytest.mark.slow
def test_resumed_run_keeps_the_judges_reference_curriculum_stage(two_step_run, tmp_path):
    """The judge's curriculum stage is checkpointed: after a resume the judge does not fall back to
    the base reference mix (a fresh judge actor starts at stage 0). Resumes a copy of the module's
    run (judged, stage 1 from its second group on) for a third step: that run's ``Pipeline.stop``
    killed its judge actor, so the resumed run's judge is a new actor that knows the stage only from
    the checkpoint."""
    cfg, original, *_ = two_step_run
    run = tmp_path / "runs" / cfg.run.name
    shutil.copytree(original, run)  # the other tests read the original
    state = json.loads((run / "checkpoints" / "step_0002" / "trainer_state.json").read_text())
    assert state["judge_curriculum_stage"] == 1, state
    # A step whose samples all fail the gate is not judged (no stage in its record); the memoriser
    # does that now and then, so resume one more step at a time (each a fresh judge actor) until
    # a step was judged, at most 3.
    for steps in (3, 4, 5):
        resumed = cfg.model_copy(update={"run": cfg.run.model_copy(
            update={"steps": steps, "output_dir": str(tmp_path / "runs")})})
        log = io.StringIO()
        Trainer(resumed, log=log, resume=True).run()
        assert "judge reference curriculum resumed at stage 1" in log.getvalue(), log.getvalue()[-3000:]
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        new = [m for m in metrics if m["step"] == steps]
        assert new, f"step {steps} wrote no metrics"
        if "judge/curriculum_stage" in new[0]:
            break
        assert new[0]["gate/pass_rate"] == 0, new[0]  # unjudged only when no sample passed the gate
    assert new[0]["judge/curriculum_stage"] == 1  # judged in stage 1, not the base mix
