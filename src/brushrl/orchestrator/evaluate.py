"""``brushrl eval``: score policies (the base and run checkpoints) on a fixed prompt set, with the
run's own reward stack.

Everything a sample goes through is what training uses: the run's resolved ``config.yaml``, its
warm start (the SFT cache entry the run trained from), the same actors (renderer actors behind
:class:`~brushrl.render.pool.RenderPool`, the rollout engine, the scorer actors; no learner) and the
same group pipeline (:meth:`GroupProducer.produce <brushrl.orchestrator.producer.GroupProducer.produce>`:
generate -> static gate -> ``RenderPool.render`` -> runtime gate -> scorers -> ``combine``). So an
evaluation scales out the way training does, and its reward is the training reward.

The prompt set (:func:`eval_prompts`) is ``eval.subjects`` (held out: never RL's prompts; the tiny
policy's SFT corpus paints them), with ``eval.include_training`` the run's ``prompts.subjects``,
and ``eval.unseen_subjects`` (colour x species pairs neither the SFT corpus nor RL painted; reported
without a target), each split reported apart. Each prompt has a fixed
render seed and a fixed sampler seed, derived from ``eval.seed`` and the subject, and every policy
faces the same ones: the same policy and seed give the same numbers; two policies differ only by
their weights. ``eval.samples_per_prompt`` completions per prompt (one group).

Writes, under the run directory: ``eval/eval.json`` (:mod:`brushrl.artifacts.eval_report`; its
``paintings``: subject fidelity, diversity and copying of the passing paintings against the run's
reference pool, ``reward.pool``, and their colour accuracy),
``eval/samples.parquet`` (one row per completion, the ``rollouts.parquet`` columns plus
``policy``, ``split``, ``subject``), ``eval/png/<policy>/p<prompt>_s<sample>.png`` and the page
``eval.html`` (:mod:`brushrl.artifacts.eval_page`), which ``gallery.html`` links to. With
``logging.trackers`` set, ``eval.json``'s results also go to the run's tracker runs (reattached
through ``RUN_DIR/trackers.json``) at the run's last step, ``eval.json`` as a file
(:meth:`brushrl.artifacts.trackers.Trackers.log_eval`).

With ``turns`` K > 1 (``brushrl eval --turns K``; multi-turn revision, ``rollout.turns``) every
completion is the first turn of a trajectory that the run's critic (``reward.critic``) critiques and
the policy revises, up to K replies, through the same producer as training
(``GroupProducer.produce(..., turns=K)``; the revision turns sample with the prompt's sampler seed
+ k - 1). ``samples.parquet`` then has one row per turn (``TURN_COLUMNS``; PNGs
``p<prompt>_s<member>_t<turn>.png``); the policy table is over turn 1 (what a single-turn
evaluation measures) and ``eval.json`` adds ``turns`` (:func:`~brushrl.artifacts.eval_report.turn_report`):
each turn's reward and gate pass side by side, and turn k minus turn 1 paired by trajectory, with
95% intervals.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from brushrl.artifacts.eval_page import write_eval_page
from brushrl.artifacts.eval_report import (
    EVAL_DIR,
    EVAL_JSON,
    SPLITS,
    build_report,
    painting_report,
    table_lines,
    turn_report,
    turn_table_lines,
)
from brushrl.artifacts.run_dir import TRAINER_STATE, RunDir, atomic_write, read_rows, sample_row
from brushrl.config import BrushRLConfig, load_config
from brushrl.orchestrator.progress import CountLine
from brushrl.prompts import user_prompt

#: One row per completion (per turn with ``turns`` > 1), under ``eval/``.
SAMPLES = "samples.parquet"


@dataclass(frozen=True)
class EvalPrompt:
    """One prompt of the evaluation set.

    Attributes:
        index: position in the set (held-out prompts first); names the PNGs (``p<index>``).
        split: ``held_out``, ``training`` or ``unseen`` (:data:`~brushrl.artifacts.eval_report.SPLITS`).
        subject: the subject; prompt: the user prompt (``prompts.template`` filled in).
        render_seed: the render seed of every completion of this prompt (uint31).
        gen_seed: the sampler seed of this prompt's group (uint31).
    """

    index: int
    split: str
    subject: str
    prompt: str
    render_seed: int
    gen_seed: int


def eval_prompts(cfg: BrushRLConfig, held_out: int | None = None, training: int | None = None,
                 unseen: int | None = 0) -> list[EvalPrompt]:
    """The fixed prompt set of ``cfg``: the first ``held_out`` of ``eval.subjects`` (None: all),
    then (``eval.include_training``) the first ``training`` of ``prompts.subjects``, then the first
    ``unseen`` of ``eval.unseen_subjects`` (last, so that the other prompts keep their indices
    whatever ``unseen`` is). ``unseen`` is 0 unless asked for, so that a caller sized by
    ``held_out`` and ``training`` keeps its cost; ``brushrl eval`` asks for all of them unless
    told ``--unseen K``.

    Seeds come from ``random.Random(f"{eval.seed}:{subject}")`` (string seeds hash with SHA-512: the
    same across processes), so a subject keeps its seeds whatever else is in the set.
    """
    chosen = [("held_out", s) for s in cfg.eval.subjects[:held_out]]
    if cfg.eval.include_training:
        chosen += [("training", s) for s in cfg.prompts.subjects[:training]]
    chosen += [("unseen", s) for s in cfg.eval.unseen_subjects[:unseen]]
    out = []
    for i, (split, subject) in enumerate(chosen):
        rng = random.Random(f"{cfg.eval.seed}:{subject}")
        out.append(EvalPrompt(i, split, subject, user_prompt(subject, cfg.prompts.template),
                              rng.randrange(2**31), rng.randrange(2**31)))
    return out


@dataclass(frozen=True)
class PolicySpec:
    """A policy to score: ``name`` (``base`` or the checkpoint folder's name, e.g. ``step_0020``),
    ``adapter`` (the checkpoint folder with the LoRA adapter; None: the base, LoRA B = 0) and the
    policy ``version`` recorded in its samples."""

    name: str
    adapter: str | None = None
    version: int = 0


def resolve_policies(run_root: str | Path, checkpoints: list[str], base: bool = True) -> list[PolicySpec]:
    """The policies ``brushrl eval`` scores, the base first (the side-by-side reference).

    Args:
        run_root: the run directory.
        checkpoints: each ``latest`` (the newest complete checkpoint), a step (``20``), a folder name
            (``step_0020``) or a checkpoint folder path.
        base: score the base policy too.

    Raises:
        FileNotFoundError: a checkpoint that does not exist or is incomplete (no ``trainer_state.json``).
        ValueError: nothing to score.
    """
    run = RunDir(run_root, resume=True)
    out = [PolicySpec("base")] if base else []
    for ref in checkpoints:
        if ref == "latest":
            path = run.latest_checkpoint()
            if path is None:
                raise FileNotFoundError(f"{run.root}: no complete checkpoint in checkpoints/")
        elif ref.isdigit():
            path = run.checkpoint_dir(int(ref))
        elif Path(ref).is_dir():
            path = Path(ref).resolve()
        else:
            path = run.root / "checkpoints" / ref
        if not (path / TRAINER_STATE).is_file():
            raise FileNotFoundError(f"checkpoint {ref!r}: {path} is not a complete checkpoint")
        version = int(json.loads((path / TRAINER_STATE).read_text())["policy_version"])
        if path.name not in {p.name for p in out}:
            out.append(PolicySpec(path.name, str(path), version))
    if not out:
        raise ValueError("nothing to evaluate: give --checkpoint or keep the base")
    return out


class Evaluator:
    """Scores :class:`PolicySpec` s on :func:`eval_prompts` with the run's actors (module docstring).

    Args:
        cfg: the run's config (``RUN_DIR/config.yaml``), overrides applied.
        run_root: the run directory; results go to ``<run_root>/eval/`` and ``eval.html``.
        prompts: the prompt set (:func:`eval_prompts`).
        log: where progress lines go (stdout by default).
        turns: replies per trajectory (module docstring); 1: single-turn samples.

    Raises:
        ValueError: ``turns`` < 1.
    """

    def __init__(self, cfg: BrushRLConfig, run_root: str | Path, prompts: list[EvalPrompt], log=None,
                 turns: int = 1):
        if turns < 1:
            raise ValueError(f"turns must be >= 1, got {turns}")
        n = cfg.eval.samples_per_prompt
        self.turns = turns
        # One group per prompt: G is the sample count (group_size >= 2 is a training constraint);
        # rollout.turns = K starts the run's critic actor with the others.
        self.cfg = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"group_size": n,
                                                                                    "turns": turns})})
        self.root = Path(run_root).resolve()
        self.out = self.root / EVAL_DIR
        self.prompts = prompts
        self.log = log or sys.stdout

    def run(self, policies: list[PolicySpec]) -> dict:
        """Score every policy (in order; the base, if any, must come first, before an adapter is
        loaded), write the files (module docstring) and return the report (``eval.json``)."""
        import ray

        from brushrl.orchestrator.actors import Pipeline
        from brushrl.orchestrator.producer import GroupProducer
        from brushrl.policy import warm_start_policy
        from brushrl.prompts import resolve_system_prompt
        from brushrl.ray_setup import init_ray

        if any(p.adapter is None for p in policies[1:]):
            raise ValueError("the base policy must be scored first (before an adapter is loaded)")
        cfg = self.cfg
        init_ray(cfg.ray)
        system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
        cfg = warm_start_policy(cfg, system_prompt)
        shutil.rmtree(self.out, ignore_errors=True)  # a new evaluation replaces the last one
        (self.out / "png").mkdir(parents=True)
        pipe, rows = Pipeline(), []
        t0 = time.perf_counter()
        try:
            pipe.start(cfg, system_prompt, str(self.out / "logs"), learner=False)
            pipe.wait_ready(cfg, self._say)  # the judge servers brushrl serves, as in training
            producer = GroupProducer(cfg, pipe.rollout, pipe.render_pool, pipe.scorers, random.Random(0),
                                     pipe.critic)
            progress = CountLine("[eval] groups", len(policies) * len(self.prompts), self.log)
            for policy in policies:
                if policy.adapter is not None:
                    ray.get(pipe.rollout.load_adapter.remote(policy.adapter, policy.version))
                t1 = time.perf_counter()
                rows += asyncio.run(self._score_policy(producer, policy, progress))
                self._say(f"[eval] {policy.name}: {len(self.prompts)} prompts x {cfg.rollout.group_size} "
                          f"samples in {time.perf_counter() - t1:.0f} s")
        finally:
            pipe.stop()
        pd.DataFrame(rows).to_parquet(self.out / SAMPLES, index=False)
        return self._report(rows, [p.name for p in policies], wall_s=time.perf_counter() - t0)

    def rereport(self) -> dict:
        """Rebuild ``eval.json``, the page and the table from ``eval/samples.parquet`` with this
        code's statistics, without sampling again (the policies and wall time of the last
        evaluation are kept; ``prompts`` must be the set it scored, or hold it: a prompt without
        samples, such as an unseen split the last evaluation skipped, is left out). Returns the report.

        Raises:
            FileNotFoundError: the run has no finished evaluation (``eval/eval.json`` and
                ``eval/samples.parquet``).
        """
        last, samples = self.out / EVAL_JSON, self.out / SAMPLES
        if not (last.exists() and samples.exists()):
            raise FileNotFoundError(f"{self.out}: no finished evaluation to report again (run brushrl eval first)")
        old = json.loads(last.read_text())
        rows = read_rows(samples)
        # Prompts the last evaluation did not score (e.g. an unseen split added since) are left out.
        scored = {(int(r["prompt_index"]), r["subject"]) for r in rows}
        kept = [p for p in self.prompts if (p.index, p.subject) in scored]
        if len(kept) < len(self.prompts):
            self._say(f"[eval] {len(self.prompts) - len(kept)} prompt(s) not in {samples.name}: left out of the report")
        self.prompts = kept
        return self._report(rows, old["policies"], wall_s=old.get("wall_s"))

    def _report(self, rows: list[dict], names: list[str], wall_s: float | None) -> dict:
        first_turns = [r for r in rows if r.get("turn") in (None, 1)]
        report = build_report(first_turns, names, self.cfg, self.prompts, wall_s=wall_s)
        report["paintings"] = painting_report(first_turns, names, self.cfg, self.root)
        if self.turns > 1:
            report["turns"] = turn_report(rows, names, self.cfg, self.turns)
        atomic_write(self.out / EVAL_JSON, json.dumps(report, indent=1, default=float) + "\n")
        write_eval_page(self.root, report, rows)
        self._relink_gallery()
        self._track(report)
        self._say("\n".join(table_lines(report)))
        if self.turns > 1:
            self._say("\n".join(turn_table_lines(report)))
        return report

    async def _score_policy(self, producer, policy: PolicySpec, progress: CountLine | None = None) -> list[dict]:
        """One group per prompt, all in flight at once (the rollout actor generates them in turn
        while the renderers work on earlier ones); returns their rows. ``progress`` gets a line per
        finished group."""
        from brushrl.orchestrator.producer import Ticket

        finished = 0

        async def produce(ticket):
            nonlocal finished
            out = await producer.produce(ticket, step=0, turns=self.turns)
            finished += 1
            if progress is not None:
                progress.tick(f"{policy.name} {finished}/{len(tickets)}")
            return out

        tickets = [Ticket(p.index, p.prompt, p.render_seed, p.gen_seed) for p in self.prompts]
        groups = await asyncio.gather(*(produce(t) for t in tickets))
        folder = self.out / "png" / policy.name
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for prompt, (group, _counts) in zip(self.prompts, groups):
            for sample, i, trajectory in self._members(group):
                if sample.render is not None and sample.render.png:
                    name = f"p{prompt.index:02d}_s{i}" + (f"_t{sample.turn}" if trajectory is not None else "")
                    path = folder / f"{name}.png"
                    path.write_bytes(sample.render.png)
                    sample.png_path = str(path.relative_to(self.root))
                row = sample_row(sample, i, "eval", trajectory)
                row.update(policy=policy.name, split=prompt.split, subject=prompt.subject, prompt_index=prompt.index)
                rows.append(row)
        return rows

    def _track(self, report: dict) -> None:
        """``report`` to the trackers of ``logging.trackers`` (none: nothing), at the run's last
        step. A tracker that does not start now only warns: ``eval.json`` is written already."""
        if not self.cfg.logging.trackers:
            return
        from brushrl.artifacts.trackers import Trackers, TrackerUnavailable

        metrics = RunDir(self.root, resume=True).metrics()
        try:
            trackers = Trackers.open(self.cfg, self.root, say=self._say)
        except TrackerUnavailable as exc:
            self._say(f"[eval] warning: results not sent to the trackers ({exc}); they are in {self.out / EVAL_JSON}")
            return
        trackers.log_eval(report, self.out / EVAL_JSON, metrics[-1]["step"] if metrics else 0)
        trackers.close()
        self._say(f"[eval] results sent to {', '.join(t.name for t in trackers.trackers)}")

    @staticmethod
    def _members(group):
        """``(sample, member index, trajectory or None)`` of every sample of ``group``, every turn."""
        if not group.trajectories:
            return [(s, i, None) for i, s in enumerate(group.samples)]
        return [(s, t.member, t) for t in group.trajectories for s in t.turns]

    def _relink_gallery(self) -> None:
        """Rewrite ``gallery.html`` so that it links to ``eval.html`` (a run without rows is left alone)."""
        from brushrl.artifacts.gallery import write_gallery

        run = RunDir(self.root, resume=True)
        parquet = self.root / "rollouts.parquet"
        if not parquet.exists():
            return
        rows = read_rows(parquet)
        status = json.loads((self.root / "status.json").read_text()) if (self.root / "status.json").exists() else {}
        write_gallery(self.root, rows, run.metrics(), self.root.name, total_steps=status.get("steps"),
                      running=status.get("state") == "running")

    def _say(self, text: str) -> None:
        print(text, file=self.log, flush=True)


def eval_config(run_root: str | Path, overrides: dict | None = None) -> BrushRLConfig:
    """The run's resolved config (``RUN_DIR/config.yaml``) with dotted-path ``overrides``.

    Raises:
        brushrl.config.ConfigError: no readable, valid ``config.yaml`` there.
    """
    return load_config(Path(run_root) / "config.yaml", overrides)


__all__ = ["SPLITS", "EvalPrompt", "Evaluator", "PolicySpec", "eval_config", "eval_prompts", "resolve_policies"]
