"""What every tracker gets, built once from the run directory's own records: the protocol a
backend implements and the pure conversions (a step's scalars, paintings and samples table; the
resolved config as flat hyperparameters; ``eval.json`` as scalars).

Pure: no tracker library is imported here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from brushrl.prompts import subject_of


class TrackerUnavailable(RuntimeError):
    """A tracker named in ``logging.trackers`` cannot be used (its package is missing, it has no
    server address, or it did not start); raised before the run starts."""


@dataclass
class StepImage:
    """One painting of a step. ``key``: ``paintings/<k>``, k its position among the step's
    paintings (``00``, ``01``, ...): the same keys every step, so a tracker's step slider moves
    through them (group ids grow from step to step; the caption names the group and sample)."""

    key: str
    path: Path
    caption: str


@dataclass
class SampleTable:
    """The step's samples: one row per sample (``SAMPLE_COLUMNS`` then ``reward_<component>``)."""

    columns: list[str]
    rows: list[list] = field(default_factory=list)

    def as_dict(self) -> dict[str, list]:
        """Column name -> values (MLflow's ``log_table``)."""
        return {c: [r[i] for r in self.rows] for i, c in enumerate(self.columns)}


#: The fixed columns of a step's samples table (``rollouts.parquet`` names; ``subject`` is the
#: prompt's subject).
SAMPLE_COLUMNS = ("step", "group_id", "sample", "turn", "subject", "prompt", "code", "gate_verdict", "total",
                  "none_cause", "policy_version")


class Tracker(Protocol):
    """One experiment tracker (TensorBoard, W&B, MLflow). Every method may raise; the fan-out
    (:class:`brushrl.artifacts.trackers.Trackers`) isolates the failure."""

    name: str

    def state(self) -> dict:
        """What reattaches a later process to the same tracker run (``trackers.json``)."""

    def log_params(self, params: dict[str, str | int | float | bool], config_yaml: str) -> None:
        """The resolved config: flat dotted keys (:func:`flat_params`) and the YAML text."""

    def log_step(self, step: int, scalars: dict[str, float], images: list[StepImage], table: SampleTable) -> None:
        """One learner step: its ``metrics.jsonl`` numbers, paintings and samples."""

    def log_summary(self, step: int, scalars: dict[str, float], report: Path) -> None:
        """``brushrl eval``'s results (:func:`eval_scalars`) at the run's last step, and the
        ``eval.json`` file itself."""

    def log_artifact(self, files: list[Path], name: str, kind: str) -> None:
        """Files uploaded together (the final LoRA adapter: ``kind`` ``model``)."""

    def close(self) -> None:
        """Flush and end this process's connection to the tracker run."""


def step_scalars(record: dict) -> dict[str, float]:
    """The numbers of a ``metrics.jsonl`` record under the same names: None (a mean over nothing)
    and non-numbers are left out, booleans become 0/1, ``step`` is the step itself."""
    out = {}
    for key, value in record.items():
        if key == "step" or value is None or isinstance(value, str):
            continue
        if isinstance(value, (bool, int, float)):
            out[key] = float(value)
    return out


def _is_set(value) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


def caption(row: dict, template: str) -> str:
    """``<subject> · gate <verdict> · reward <total> · v<policy version> · g<group>_s<sample>``
    (``_t<turn>`` for a revision turn) of a ``rollouts.parquet`` row (its PNG's name in ``png/``)."""
    subject = subject_of(row.get("prompt") or "", template) or row.get("prompt") or "?"
    total = row.get("total")
    reward = f"{total:.3f}" if _is_set(total) else f"None ({row.get('none_cause')})"
    turn = f"_t{int(row['turn'])}" if _is_set(row.get("turn")) else ""
    return (f"{subject} · gate {row.get('gate_verdict')} · reward {reward} · v{row.get('policy_version')} · "
            f"g{row.get('group_id')}_s{row.get('sample')}{turn}")


def step_images(rows: list[dict], template: str, limit: int) -> list[StepImage]:
    """The first ``limit`` rows with a PNG on disk as :class:`StepImage` s (what ``gallery.html``
    shows for the step: the same rows, the same files)."""
    out = []
    for row in rows:
        if len(out) >= limit:
            break
        png = row.get("png")
        if not png or not Path(png).exists():
            continue
        out.append(StepImage(f"paintings/{len(out):02d}", Path(png), caption(row, template)))
    return out


def sample_table(rows: list[dict], template: str) -> SampleTable:
    """The step's samples (``SAMPLE_COLUMNS`` with ``subject`` filled, then each ``reward_<component>``
    of the rows, in name order); None stays None."""
    components = sorted({k for r in rows for k in r if k.startswith("reward_") and k not in ("reward_raw",
                                                                                           "reward_causes")})
    columns = [*SAMPLE_COLUMNS, *components]
    table = SampleTable(columns)
    for row in rows:
        values = []
        for c in columns:
            if c == "subject":
                v = subject_of(row.get("prompt") or "", template) or row.get("prompt")
            else:
                v = row.get(c)
            values.append(v if _is_set(v) else None)
        table.rows.append(values)
    return table


def flat_params(config: dict, prefix: str = "") -> dict[str, str | int | float | bool]:
    """A nested config mapping as dotted keys (``learner.lr``); a list becomes its JSON text, None
    the text ``None`` (trackers take scalars and strings only)."""
    out: dict[str, str | int | float | bool] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_params(value, name + "."))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        elif value is None:
            out[name] = "None"
        else:
            out[name] = json.dumps(value, default=str)
    return out


def eval_scalars(report: dict) -> dict[str, float]:
    """The numbers of ``eval.json``'s ``results`` as ``eval/<policy>/<split>/<measure>[/<part>]``
    (e.g. ``eval/step_0020/held_out/reward/mean``, ``eval/step_0020/vs_base/held_out/reward/mean``);
    booleans (``improved``) become 0/1, None and text are left out."""
    out: dict[str, float] = {}

    def walk(node, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}/{k}")
        elif isinstance(node, (bool, int, float)) and node == node:
            out[path] = float(node)

    walk(report.get("results", {}), "eval")
    return out


#: Characters MLflow allows in a metric or parameter name (its ``_validate_metric_name``):
#: alphanumerics, ``_ - . /`` space and ``:``; anything else becomes ``_``.
_MLFLOW_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /:]")


def mlflow_name(name: str) -> str:
    """``name`` with every character MLflow refuses in a key replaced by ``_`` (brushrl's own
    names, ``reward/pool_similarity``, ``time/score/judge_s``, pass unchanged)."""
    return _MLFLOW_UNSAFE.sub("_", name)
