"""Checkpoint and resume: SIGKILL a real ``brushrl train`` driver mid-run, resume it, check numbering.

Real parts throughout (tiny warm-started policy, Chromium renderer, pool scorer, TRL learner, local
Ray), run as subprocesses exactly as a user would: ``brushrl train`` then ``brushrl train --resume``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from test_train import small_overrides

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "brushrl.cli", "train", *args]


def _env() -> dict:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", OMP_NUM_THREADS="1")


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the driver, then whatever it started in its own session (Ray, Chromium)."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the session we created with start_new_session=True
    except ProcessLookupError:
        pass


@pytest.mark.slow
def test_sigkilled_run_resumes_with_the_same_numbering(tmp_path):
    # Killed once step 1's checkpoint is on disk, resumed for step 2: one step each side of the kill
    # asserts what 2 + 2 did (the numbering, the ledger, no group twice) at half the steps (issue 38).
    overrides = small_overrides(tmp_path, steps=2) | {"orchestrator.max_staleness": 1, "run.checkpoint_every": 1}
    sets = [f"--set={k}={json.dumps(v)}" for k, v in overrides.items()]
    run = tmp_path / "runs" / "e2e"
    log1 = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(_cli("--config", str(ROOT / "configs/local.yaml"), *sets), cwd=ROOT, env=_env(),
                             stdout=log1, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 1200
        while not (run / "checkpoints" / "step_0001" / "trainer_state.json").exists():
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.time() < deadline, "no checkpoint for step 1 within the deadline"
            time.sleep(0.5)
    finally:
        _kill_session(first)
        log1.close()
    killed_at = json.loads(sorted((run / "checkpoints").glob("step_*/trainer_state.json"))[-1].read_text())["step"]
    assert killed_at < 2, "the run finished before it could be killed"

    out = subprocess.run(_cli("--resume", str(run)), cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=1800, start_new_session=True)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    assert f"resumed from step_{killed_at:04d}" in log, log[-4000:]
    # The sync canary checked the adapter the resumed engine loaded from the checkpoint.
    version = json.loads((run / "checkpoints" / f"step_{killed_at:04d}" / "trainer_state.json").read_text())[
        "policy_version"]
    assert f"[brushrl] sync check, policy version {version}: log-prob gap" in log, log[-4000:]

    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert [m["policy_version"] for m in metrics] == sorted(m["policy_version"] for m in metrics)
    rows = pd.read_parquet(run / "rollouts.parquet")
    assert set(rows["step"]) <= {1, 2} and 2 in set(rows["step"])
    assert not rows.duplicated(["group_id", "sample"]).any(), "a group was recorded twice across the resume"
    state = json.loads((run / "checkpoints" / "step_0002" / "trainer_state.json").read_text())
    ledger = state["ledger"]
    assert state["step"] == 2
    assert ledger["submitted"] == sum(ledger[k] for k in ("accepted", "filtered", "failed", "stale", "running"))
    assert (run / "checkpoints" / "step_0002" / "learner_state.pt").exists()
    assert not list((run / "checkpoints").glob(".step_*.tmp"))
