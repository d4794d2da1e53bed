"""``ray job submit`` and ``ray job stop`` of real training jobs on one private local Ray head (a
module fixture: the tests need no head of their own, each job has its own id, run directory and tag).

The head is started by the Makefile's ``make ray-head`` in an empty ``HOME`` (no Ray token: the
Makefile must create it), on free ports bound to 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``),
with its own temp dir and token auth (``RAY_AUTH_MODE=token``, as the Makefile), so it never touches
another Ray cluster on the machine; it is stopped by ending its ``ray start --block`` process group
(a ``ray stop`` would stop every cluster on the machine). The job is ``rayjobs/train.py`` submitted with the
Makefile's ``RUNTIME_ENV`` (plus a tag variable that marks every process the job starts), stopped
with ``ray job stop`` once its first checkpoint is on disk. Then: the job is STOPPED in bounded time,
the driver took the graceful path, no process of the job is left (driver, actors, Chromium), and the
run directory is consistent and accepted by ``brushrl train --resume``'s loader.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest

from brushrl.ray_setup import PrivateHead, free_port, job_runtime_env
from test_train import small_overrides

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: Seconds we let ``ray job stop`` run: the runtime env's SIGTERM -> SIGKILL grace
#: (RAY_JOB_STOP_WAIT_TIME_S, 60) plus slack for two ``ray`` CLI starts on a loaded machine. That
#: the graceful path ran (not the SIGKILL) is checked by the job's own log lines.
STOP_BOUND_S = 150


def tagged_processes(tag: str) -> list[str]:
    """``pid cmdline`` of every live process of this user whose environment holds ``tag``."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.info["pid"] == me:
            continue
        try:
            if tag in (proc.environ() or {}).get("BRUSHRL_JOB_TAG", ""):
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
        except (psutil.Error, OSError):
            continue  # gone, zombie or not ours
    return found


class LocalHead(PrivateHead):
    """A :class:`~brushrl.ray_setup.PrivateHead` started by the Makefile's ``make ray-head`` (as
    ``make demo`` starts one) in a new empty ``HOME``: a home where Ray never ran, so the head starts
    only if the Makefile creates the auth token. The head's output goes to ``keep/head.log``, make's
    own to ``keep/make.log``, the session's Ray logs to ``keep`` when it stops.
    """

    def __init__(self, keep: Path) -> None:
        self.keep = keep
        self.home = Path(tempfile.mkdtemp(prefix="home", dir=keep))
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
        super().__init__(keep / "head.log", num_cpus=4, env=env | {"HOME": str(self.home)}, keep_logs=keep)

    def _launch(self, args: list[str]) -> subprocess.Popen:
        cmd = ["make", "-s", "--no-print-directory", "-C", str(ROOT), "ray-head", f"RAY_LOG={self.log_path}",
               f"RAY_HEAD_ARGS={' '.join(args)}"]  # options given again win (click keeps the last value)
        with open(self.keep / "make.log", "a") as log:
            return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def job(self, command: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """``ray job COMMAND`` against this head, run from the checkout as a user would."""
        return self.jobs(command, *args, timeout=timeout, cwd=ROOT)

    def job_status(self, job_id: str) -> str:
        """``PENDING``, ``RUNNING``, ``STOPPED``, ``SUCCEEDED``, ``FAILED`` of a job (``ray job status``,
        which words the terminal states as sentences: ``ray/dashboard/modules/job/cli.py``)."""
        out = self.job("status", job_id, timeout=120)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
        match = re.search(r"Status for job '[^']+': (\w+)|Job '[^']+' (succeeded|was stopped|failed)", text)
        assert match, text
        final = {"succeeded": "SUCCEEDED", "was stopped": "STOPPED", "failed": "FAILED"}
        return match.group(1) or final[match.group(2)]

    def job_logs(self, job_id: str) -> str:
        return self.job("logs", job_id, timeout=120).stdout


@pytest.fixture(scope="module")
def local_head(tmp_path_factory):
    """One head for the module's tests (one ``make ray-head`` start instead of three: issue 23).
    They need no head of their own: the token test reads the home the head started in and only
    lists jobs; each job test submits its own job (its own submission id, run directory and process
    tag) and waits for it to end, so the next test finds the head's 4 CPUs free again."""
    head = LocalHead(tmp_path_factory.mktemp("head"))
    try:
        head.start()
        yield head
    finally:
        head.stop()


def assert_consistent_run_dir(run: Path) -> int:
    """Every file of a stopped run describes whole steps; returns the newest checkpoint's step."""
    import torch
    from peft.utils import load_peft_weights

    text = (run / "metrics.jsonl").read_text()
    assert text.endswith("\n"), "metrics.jsonl ends in a torn line"
    steps = [json.loads(line)["step"] for line in text.splitlines()]
    assert steps == list(range(1, len(steps) + 1)), steps
    rows = pd.read_parquet(run / "rollouts.parquet")
    assert set(rows["step"]) <= set(steps)
    assert "data-latest-step" in (run / "gallery.html").read_text()
    folders = sorted((run / "checkpoints").glob("step_*"))
    assert folders, "no complete checkpoint"
    for folder in folders:  # a step_* folder appears only complete (renamed into place)
        state = json.loads((folder / "trainer_state.json").read_text())
        assert state["step"] == int(folder.name.split("_")[1]) <= steps[-1]
        blob = torch.load(folder / "learner_state.pt", map_location="cpu", weights_only=False)
        assert blob["policy_version"] == state["policy_version"]
        assert load_peft_weights(str(folder), device="cpu"), f"{folder}: empty adapter"
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "stopped" and status["signal"] == "SIGTERM", status
    assert status["last_step"] == steps[-1] and status["checkpoint"] == f"checkpoints/{folders[-1].name}", status
    return int(folders[-1].name.split("_")[1])


def test_make_ray_head_starts_in_a_home_where_ray_never_ran(local_head):
    """``make ray-head`` creates the token a token-auth head needs (``ray start`` does not), and the
    ``ray job`` CLI of a new shell finds it: RAY_AUTH_MODE=token plus ~/.ray/auth_token (the
    fixture's ``start`` already waited for ``ray job list`` to answer with it)."""
    token = local_head.home / ".ray" / "auth_token"
    assert token.is_file() and token.read_text().strip(), f"no token in the fresh home {local_head.home}"
    assert local_head.job("list", timeout=120).returncode == 0
    # token auth is on: the same request without the token is refused
    bare = dict(local_head.env, RAY_AUTH_MODE="disabled")
    refused = subprocess.run([str(BIN / "ray"), "job", "list", "--address", local_head.address], env=bare,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0, refused.stdout[-2000:]


def test_a_started_head_has_a_live_raylet_and_wait_healthy_knows_a_dead_port(local_head):
    """``start`` returned only once the node's agent reported the raylet and GCS alive (issue 38: the
    job API alone answered while the raylet could still abort); ``python -m brushrl.ray_setup
    wait-healthy`` (what ``make ray-head`` runs after ``ray start``) agrees, and names a port where
    no agent listens."""
    from brushrl.ray_setup import node_healthy

    assert node_healthy(local_head.agent_port)
    ok = subprocess.run([str(BIN / "python"), "-m", "brushrl.ray_setup", "wait-healthy",
                         "--agent-port", str(local_head.agent_port), "--timeout", "60"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    dead = free_port()
    refused = subprocess.run([str(BIN / "python"), "-m", "brushrl.ray_setup", "wait-healthy",
                              "--agent-port", str(dead), "--timeout", "2"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and f"127.0.0.1:{dead}" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_ray_job_stop_ends_a_training_job_cleanly(tmp_path, local_head):
    tag = uuid.uuid4().hex
    runtime_env = job_runtime_env(ROOT)  # what `make submit` submits with
    runtime_env["env_vars"]["BRUSHRL_JOB_TAG"] = tag  # inherited by the driver, the actors and Chromium
    steps = 30  # far more than run before the stop
    overrides = small_overrides(tmp_path, steps=steps)
    overrides["logging.trackers"] = ["tensorboard"]  # the job's driver logs (no actor does)
    sets = [f"--set={k}={json.dumps(v)}" for k, v in overrides.items() if not k.startswith("ray.")]
    job_id = f"brushrl-stop-{tag[:8]}"
    out = local_head.job("submit", "--no-wait", "--submission-id", job_id, "--working-dir", str(ROOT),
                         "--runtime-env-json", json.dumps(runtime_env), "--",
                         "python", "rayjobs/train.py", "--config", "configs/local.yaml", *sets)
    assert out.returncode == 0, out.stdout + out.stderr

    run = tmp_path / "runs" / "e2e"
    deadline = time.time() + 900
    checked = 0.0
    while not (run / "checkpoints" / "step_0001" / "trainer_state.json").exists():
        if time.time() - checked > 20:  # the CLI takes seconds; files are the fast signal
            status, checked = local_head.job_status(job_id), time.time()
            assert status in ("PENDING", "RUNNING"), f"job {status}: {local_head.job_logs(job_id)[-4000:]}"
        assert time.time() < deadline, f"no first checkpoint: {local_head.job_logs(job_id)[-4000:]}"
        time.sleep(1)

    running = tagged_processes(tag)  # the tag reaches what the check below must find gone
    for part in ("--brushrl-browser=", "ray::LearnerActor", "ray::RendererWorker", "rayjobs/train.py"):
        assert any(part in p for p in running), f"no {part} process tagged:\n" + "\n".join(p[:160] for p in running)

    # `ray job stop` waits until the job has ended (it polls the status); bounded here.
    t0 = time.time()
    out = local_head.job("stop", job_id, timeout=STOP_BOUND_S)
    stop_s = time.time() - t0
    assert out.returncode == 0, out.stdout + out.stderr
    status, logs = local_head.job_status(job_id), local_head.job_logs(job_id)
    assert status == "STOPPED", logs[-3000:]
    # The graceful path ran (not Ray's SIGKILL after the grace period): final status and gallery.
    assert "[brushrl] stopped (SIGTERM)" in logs and "[brushrl] gallery:" in logs, logs[-3000:]
    # The job's driver wrote its trackers (a 1-step job run to its end asserted this once: it cost
    # 216 s of CI's tests and showed nothing this job does not; `make demo`, which CI runs, submits
    # the same runtime env to a job that succeeds).
    assert "[brushrl] trackers: tensorboard" in logs, logs[-3000:]
    assert list((run / "tensorboard").glob("events.out.tfevents.*")), "the job's driver wrote no TensorBoard events"
    print(f"ray job stop -> STOPPED in {stop_s:.1f} s")

    left = tagged_processes(tag)
    deadline = time.time() + 90  # the raylet reaps the job's workers after the driver exits
    while left and time.time() < deadline:
        time.sleep(1)
        left = tagged_processes(tag)
    assert not left, "processes of the stopped job still running:\n" + "\n".join(p[:160] for p in left)

    last_checkpoint = assert_consistent_run_dir(run)
    assert last_checkpoint < steps, "the run finished before it was stopped"

    # `brushrl train --resume RUN` accepts the directory: its loader finds the newest complete
    # checkpoint and rewinds the run to it (no Ray needed up to here).
    from brushrl.orchestrator.cli import add_train_arguments, config_from_args
    from brushrl.orchestrator.trainer import Trainer

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    trainer = Trainer(config_from_args(parser.parse_args(["--resume", str(run)])), resume=True)
    assert trainer.checkpoint == run / "checkpoints" / f"step_{last_checkpoint:04d}"
    assert trainer.state.step == last_checkpoint
    kept = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert kept == list(range(1, last_checkpoint + 1))


def test_graceful_stop_raises_once_then_lets_cleanup_finish():
    """The first SIGTERM interrupts; a second one during cleanup does not; handlers come back."""
    from brushrl.orchestrator.stop import GracefulStop

    before = signal.getsignal(signal.SIGTERM)
    with GracefulStop() as stop:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode; never reached
        assert stop.received == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # a second stop request while cleaning up: ignored
        time.sleep(0.1)
    assert signal.getsignal(signal.SIGTERM) is before
    with GracefulStop() as stop:
        stop.shutting_down()  # a run that is already ending is never interrupted
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        assert stop.received == "SIGTERM"


def test_status_file_names_last_step_and_checkpoint(tmp_path):
    from brushrl.artifacts.run_dir import RunDir

    run = RunDir(tmp_path / "r")
    assert run.write_status("running", 5) | {"updated": 0} == {
        "state": "running", "steps": 5, "last_step": 0, "checkpoint": None, "updated": 0}
    run.log_metrics({"step": 1})
    run.checkpoint_tmp(1).mkdir()
    run.commit_checkpoint(1, {"step": 1})
    run.checkpoint_tmp(2).mkdir()  # half-written: not named
    status = run.write_status("stopped", 5, signal="SIGTERM")
    assert json.loads((run.root / "status.json").read_text()) == status
    assert (status["last_step"], status["checkpoint"], status["signal"]) == (1, "checkpoints/step_0001", "SIGTERM")
    with pytest.raises(ValueError):
        run.write_status("paused", 5)
