"""The short summary that ends a run: ``brushrl summary RUN_DIR``, the trainer's last lines, ``make demo``'s end.

Read only from the run directory's own files (``status.json``, ``metrics.jsonl``,
``rollouts.parquet``, and ``eval/eval.json`` once ``brushrl eval`` scored the run), so the same
summary can be printed by the job that wrote them and later by anyone holding the folder.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from brushrl.artifacts.eval_report import headline_lines, load_report
from brushrl.stats import quantile

#: Steps averaged at each end of the run for the reward trend (the seeds' reproduction reported
#: reward by thirds of 110 steps; a 20-step demo has room for fives).
TREND_STEPS = 5
#: ``metrics.jsonl``'s ``groups/<outcome>`` counters, summed over the run.
GROUP_OUTCOMES = ("accepted", "filtered", "failed", "stale")


@dataclass
class RunSummary:
    """What a finished (or stopped, or failed) run came to.

    ``step_rewards`` holds each step's mean reward over its valid samples (``metrics.jsonl``
    ``reward/mean``; steps with none left out); ``gate`` counts completions by gate verdict;
    ``none_causes`` counts samples whose reward is None (infrastructure failures) by cause;
    ``groups`` counts groups by outcome (``GROUP_OUTCOMES``).
    """

    root: Path
    name: str
    state: str
    planned_steps: int
    last_step: int
    error: str | None = None
    step_seconds: list[float] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    gate: Counter = field(default_factory=Counter)
    none_causes: Counter = field(default_factory=Counter)
    groups: Counter = field(default_factory=Counter)
    eval_lines: list[str] = field(default_factory=list)
    """``brushrl eval``'s headline (``brushrl.artifacts.eval_report.headline_lines``) when the run
    directory holds ``eval/eval.json``."""

    def lines(self, wall_s: float | None = None, shown_root: str | None = None) -> list[str]:
        """The summary as at most 14 short lines.

        Args:
            wall_s: wall seconds of the whole command to report (``make demo`` passes its own),
                or None to report only the steps' seconds.
            shown_root: how to write the run directory in the commands shown (default: its path).
        """
        where = shown_root or str(self.root)
        head = f"run '{self.name}': {self.state}, {self.last_step}/{self.planned_steps} steps"
        out = [head + (f" ({self.error})" if self.error else "")]
        if self.step_seconds:
            steps = (f"{len(self.step_seconds)} steps, median {quantile(self.step_seconds, 0.5):.1f} s a step "
                     f"({sum(self.step_seconds):.0f} s of steps)")
            out.append(f"time: {_duration(wall_s)} wall; {steps}" if wall_s is not None else f"time: {steps}")
        elif wall_s is not None:
            out.append(f"time: {_duration(wall_s)} wall")
        r = self.step_rewards
        if r:
            n = min(TREND_STEPS, len(r))
            first, last = sum(r[:n]) / n, sum(r[-n:]) / n
            out.append(f"reward (mean of a step's valid samples): first {n} steps {first:.3f}, "
                       f"last {n} steps {last:.3f} ({last - first:+.3f})")
        total = sum(self.gate.values())
        if total:
            passed = self.gate.get("pass", 0)
            fails = ", ".join(f"{k} {v}" for k, v in self.gate.most_common() if k != "pass")
            out.append(f"gate: {passed / total:.0%} pass ({passed}/{total} completions)"
                       + (f"; failed: {fails}" if fails else ""))
            nones = sum(self.none_causes.values())
            causes = ", ".join(f"{k} {v}" for k, v in self.none_causes.most_common())
            out.append(f"None rewards (infrastructure, excluded): {nones}" + (f" ({causes})" if causes else ""))
        if any(self.groups.values()):
            out.append("groups: " + ", ".join(f"{k} {self.groups[k]}" for k in GROUP_OUTCOMES if self.groups[k]))
        out.extend(self.eval_lines)
        out.append(f"gallery: {self.root / 'gallery.html'}")
        out.append(f"open it: brushrl serve {shlex.quote(where)}   (then http://127.0.0.1:8765/gallery.html)")
        if self.state != "failed" and self.last_step:
            more = max(self.planned_steps, self.last_step) + 10
            out.append(f"train on: brushrl train --resume {shlex.quote(where)} --steps {more}")
        return out


def summarize(root: str | Path, rows: list[dict] | None = None, metrics: list[dict] | None = None) -> RunSummary:
    """Read a run directory into a :class:`RunSummary`.

    Args:
        root: the run directory (``<run.output_dir>/<run.name>``).
        rows: ``rollouts.parquet``'s rows when the caller holds them (the trainer); read from the
            file otherwise.
        metrics: ``metrics.jsonl``'s records when the caller holds them; read otherwise.

    Raises:
        FileNotFoundError: ``root`` holds no ``status.json`` (not a run directory, or a run that
            never started).
    """
    root = Path(root).resolve()
    status_path = root / "status.json"
    if not status_path.is_file():
        raise FileNotFoundError(f"{root}: no status.json (not a brushrl run directory?)")
    status = json.loads(status_path.read_text())
    if metrics is None:
        path = root / "metrics.jsonl"
        metrics = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    if rows is None:
        path = root / "rollouts.parquet"
        if path.exists():
            import pandas as pd

            rows = pd.read_parquet(path, columns=["gate_verdict", "total", "none_cause"]).to_dict("records")
        else:
            rows = []
    summary = RunSummary(root=root, name=root.name, state=status["state"], planned_steps=int(status["steps"]),
                         last_step=int(status.get("last_step", 0)), error=status.get("error"))
    for m in metrics:
        if m.get("time/step_s") is not None:
            summary.step_seconds.append(float(m["time/step_s"]))
        if m.get("reward/mean") is not None:
            summary.step_rewards.append(float(m["reward/mean"]))
        for outcome in GROUP_OUTCOMES:
            summary.groups[outcome] += int(m.get(f"groups/{outcome}") or 0)
    report = load_report(root)
    if report is not None:
        summary.eval_lines = [*headline_lines(report), f"eval page: {root / 'eval.html'}"]
    for row in rows:
        summary.gate[row["gate_verdict"]] += 1
        if _is_none(row.get("total")):
            summary.none_causes[row.get("none_cause") or "unknown"] += 1
    return summary


def _is_none(value) -> bool:
    """A missing reward, whether None in memory or NaN after a parquet round trip."""
    return value is None or value != value


def _duration(seconds: float) -> str:
    """``8 min 2 s`` / ``42 s``."""
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
