"""``runs/<name>/``: everything a run leaves behind, written so that a stopped run is consistent.

Layout::

    config.yaml          the resolved config (defaults filled in)
    pool.json            the reference pool version the run used (``ReferencePool.version_record``)
    rollouts.parquet     one row per completion (see ``ROLLOUT_COLUMNS``; a multi-turn trajectory has one
                         row per turn, with ``TURN_COLUMNS``)
    metrics.jsonl        one JSON object per learner step
    status.json          how the run stands: ``running``, ``finished``, ``stopped`` (SIGTERM from
                         ``ray job stop``, Ctrl-C) or ``failed``; last step, newest checkpoint
    png/step_0003/       the paintings, g<group>_s<sample>.png (g<group>_s<member>_t<turn>.png per turn)
    checkpoints/step_0005/   LoRA adapter (PEFT save_pretrained, safetensors), learner_state.pt
                         (optimizer, scheduler, RNG) and trainer_state.json (step, policy version,
                         prompt cursor, group ledger); renamed into place when complete
    gallery.html, reward_curve.svg

Every file is replaced atomically (write to a temporary name, then ``os.replace``) or appended
line by line and flushed, so Ctrl-C or ``ray job stop`` at any moment leaves readable files that
describe whole steps.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd

from brushrl.config import BrushRLConfig, save_resolved
from brushrl.types import Sample, Trajectory

#: File in a checkpoint folder holding the driver's state (step, version, counters, prompt cursor).
TRAINER_STATE = "trainer_state.json"

#: File in the run directory saying how the run stands (see ``RunDir.write_status``).
STATUS_FILE = "status.json"
#: The states of ``status.json``.
RUN_STATES = ("running", "finished", "stopped", "failed")

#: Columns of ``rollouts.parquet``; ``reward_<component>`` columns are added per component.
ROLLOUT_COLUMNS = (
    "step", "group_id", "sample", "prompt", "completion", "code", "seed", "gate_verdict",
    "gate_detail", "gate_stage", "total", "none_cause", "policy_version", "version_spans", "gen_s", "render_s",
    "draw_s", "score_s", "paint_fraction", "png", "group_status",
)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


#: Columns a row of a multi-turn trajectory adds (``rollout.turns`` > 1; absent from single-turn runs).
TURN_COLUMNS = (
    "turn", "trajectory_id", "critique", "critique_done", "critique_cause", "critic_s", "trajectory_reward",
    "trajectory_none_cause", "trajectory_stop", "trajectory_turns",
)


def sample_row(sample: Sample, index: int, group_status: str, trajectory: Trajectory | None = None) -> dict:
    """The ``rollouts.parquet`` row of one sample; a turn of a trajectory also gets ``TURN_COLUMNS``:
    ``turn`` (1..K), ``trajectory_id`` (``<group_id>-<member>``), the ``critique`` of this turn's
    painting that the next turn was shown (None on the last turn), whether it said done, why the
    critic failed, its seconds, and the trajectory's reward, None cause, stop reason and turns."""
    render = sample.render
    row = {
        "step": sample.step,
        "group_id": sample.group_id,
        "sample": index,
        "prompt": sample.completion.prompt,
        "completion": sample.completion.text,
        "code": sample.code,
        "seed": sample.seed,
        "gate_verdict": sample.gate.verdict,
        "gate_detail": sample.gate.detail,
        "gate_stage": sample.gate.stage,
        "total": sample.reward,
        "none_cause": sample.none_cause,
        "policy_version": sample.completion.policy_version,
        # [[version, tokens], ...] of a completion sampled across a weight sync; None: one version
        "version_spans": json.dumps(sample.completion.version_spans) if sample.completion.version_spans else None,
        "gen_s": sample.completion.gen_s,
        "render_s": render.wall_s if render else None,
        "draw_s": render.draw_s if render else None,
        "score_s": sample.score_s,
        "paint_fraction": render.paint_fraction if render else None,
        # per-render telemetry (brushrl.types.RenderResult); lists / dicts as JSON text
        "render_cpu_s": render.cpu_s if render else None,
        "render_cache_hit": render.cache_hit if render else None,
        "render_actor_id": render.actor_id if render else None,
        "brush_calls": json.dumps(render.brush_calls) if render else None,
        "render_refused": json.dumps(render.refused) if render else None,
        "render_js_errors": json.dumps(render.js_errors) if render else None,
        "render_console": json.dumps(render.console) if render else None,
        "png": sample.png_path,
        "group_status": group_status,
    }
    for name, value in sample.components.items():
        row[f"reward_{name}"] = value
    row["reward_raw"] = json.dumps(sample.raw, sort_keys=True)
    row["reward_causes"] = json.dumps(sample.component_causes, sort_keys=True)
    if trajectory is not None:
        critique = sample.critique
        row.update({
            "turn": sample.turn,
            "trajectory_id": f"{sample.group_id}-{trajectory.member}",
            "critique": critique.text if critique is not None else None,
            "critique_done": critique.done if critique is not None else None,
            "critique_cause": critique.cause if critique is not None else None,
            "critic_s": critique.seconds if critique is not None else None,
            "trajectory_reward": trajectory.reward,
            "trajectory_none_cause": trajectory.none_cause,
            "trajectory_stop": trajectory.stop,
            "trajectory_turns": len(trajectory.turns),
        })
    return row


def read_rows(parquet: str | Path) -> list[dict]:
    """The rows of a ``rollouts.parquet``-style file as dicts, missing values as None (parquet
    gives NaN back), so they compare like freshly made rows."""
    frame = pd.read_parquet(parquet)
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


class RunDir:
    """Owns one run directory.

    Args:
        root: the run directory (``<output_dir>/<name>``).
        overwrite: remove an existing directory first; otherwise an existing non-empty directory
            raises ``FileExistsError``.
    """

    def __init__(self, root: str | Path, overwrite: bool = True, resume: bool = False):
        self.root = Path(root).resolve()
        self._rows: list[dict] = []
        if resume:
            if not (self.root / "config.yaml").exists():
                raise FileNotFoundError(f"cannot resume {self.root}: no config.yaml (not a run directory)")
            return
        if self.root.exists() and any(self.root.iterdir()):
            if not overwrite:
                raise FileExistsError(f"{self.root} exists (set run.overwrite: true or pick another run.name)")
            shutil.rmtree(self.root)
        (self.root / "png").mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_tmp(self, step: int) -> Path:
        """Where step ``step``'s checkpoint is assembled before :meth:`commit_checkpoint`."""
        return self.root / "checkpoints" / f".step_{step:04d}.tmp"

    def commit_checkpoint(self, step: int, trainer_state: dict) -> Path:
        """Write ``trainer_state.json`` into the assembled checkpoint and rename the folder to
        ``checkpoints/step_NNNN`` in one ``os.replace``: a checkpoint folder either is complete
        (it has ``trainer_state.json``) or does not exist."""
        tmp, final = self.checkpoint_tmp(step), self.checkpoint_dir(step)
        atomic_write(tmp / TRAINER_STATE, json.dumps(trainer_state))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None."""
        done = sorted(p for p in (self.root / "checkpoints").glob("step_*") if (p / TRAINER_STATE).exists())
        return done[-1] if done else None

    def rewind(self, step: int) -> None:
        """Forget everything after learner step ``step`` (a resume from its checkpoint): rows,
        metrics lines and PNG folders of later steps, half-written checkpoint folders."""
        parquet = self.root / "rollouts.parquet"
        if parquet.exists():
            rows = read_rows(parquet)
            self._rows = [r for r in rows if r["step"] <= step]
            if len(self._rows) != len(rows):
                self.add_rows([])
        kept = [m for m in self.metrics() if m["step"] <= step]
        atomic_write(self.root / "metrics.jsonl", "".join(json.dumps(m, default=float) + "\n" for m in kept))
        for folder in (self.root / "png").glob("step_*"):
            if int(folder.name.split("_")[1]) > step:
                shutil.rmtree(folder)
        for folder in (self.root / "checkpoints").glob(".step_*.tmp"):
            shutil.rmtree(folder)

    def write_status(self, state: str, steps: int, **extra) -> dict:
        """Replace ``status.json`` atomically with ``state`` (one of ``RUN_STATES``), the planned
        ``steps``, the last step in ``metrics.jsonl`` (``last_step``, 0 for none), the newest complete
        checkpoint relative to the run directory (``checkpoint``, or None) and ``extra`` fields
        (e.g. ``signal``, ``error``). Returns the record written. Raises ``ValueError`` for an
        unknown state."""
        if state not in RUN_STATES:
            raise ValueError(f"run state {state!r} not in {RUN_STATES}")
        done = self.metrics()
        ckpt = self.latest_checkpoint()
        record = {"state": state, "steps": steps, "last_step": done[-1]["step"] if done else 0,
                  "checkpoint": str(ckpt.relative_to(self.root)) if ckpt else None,
                  "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}
        atomic_write(self.root / STATUS_FILE, json.dumps(record, indent=1) + "\n")
        return record

    @property
    def gallery(self) -> Path:
        return self.root / "gallery.html"

    def save_config(self, cfg: BrushRLConfig) -> None:
        save_resolved(cfg, self.root / "config.yaml")

    def save_pool(self, record: dict) -> None:
        """Record the reference pool version used (``brushrl.pool.ReferencePool.version_record()``:
        path, ``version_id`` = ``name@vN+hash12``, manifest SHA-256, tier counts) as ``pool.json``."""
        atomic_write(self.root / "pool.json", json.dumps(record, indent=2) + "\n")

    def png_path(self, step: int, group_id: int, index: int, turn: int | None = None) -> Path:
        """``png/step_NNNN/g<group>_s<index>.png``; a trajectory's turn adds ``_t<turn>``."""
        folder = self.root / "png" / f"step_{step:04d}"
        folder.mkdir(exist_ok=True)
        return folder / (f"g{group_id}_s{index}.png" if turn is None else f"g{group_id}_s{index}_t{turn}.png")

    def checkpoint_dir(self, step: int) -> Path:
        return self.root / "checkpoints" / f"step_{step:04d}"

    def add_rows(self, rows: list[dict]) -> None:
        """Append rows and rewrite ``rollouts.parquet`` atomically (runs hold thousands of rows)."""
        self._rows.extend(rows)
        tmp = self.root / ".rollouts.parquet.tmp"
        pd.DataFrame(self._rows).to_parquet(tmp, index=False)
        os.replace(tmp, self.root / "rollouts.parquet")

    @property
    def rows(self) -> list[dict]:
        return self._rows

    def log_metrics(self, record: dict) -> None:
        """Append one JSON line to ``metrics.jsonl`` and flush it to disk."""
        with open(self.root / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(record, default=float) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def metrics(self) -> list[dict]:
        path = self.root / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
