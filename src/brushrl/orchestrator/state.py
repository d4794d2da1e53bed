"""The driver's state: what a run needs, besides the learner's own state, to resume where it stopped.

One object, saved and restored in one place: ``checkpoints/step_NNNN/trainer_state.json`` of the
run directory (``brushrl.artifacts.run_dir``), next to the learner's ``learner_state.pt`` and the
LoRA adapter. It holds two kinds of fields:

* the loop's position, taken right after a step's weight sync and before the next learner call is
  issued (:meth:`TrainerState.at`, while the learner actor saves its own state for that step): ``step``, ``policy_version``, the prompt cursor
  (``next_group_id`` and the prompt sampler's ``rng`` state), the group ``ledger`` and how many
  accepted groups were ``ready`` (waiting to be trained);
* the run's totals through that step, kept by the step writer (:meth:`TrainerState.count`,
  joined to the position by :meth:`TrainerState.with_totals` when the step is written): ``group_counts`` (groups by end
  state) and ``judge_curriculum_stage`` (the newest
  reference-curriculum stage a group was judged in; a resumed run's judge starts there).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from brushrl.artifacts.run_dir import TRAINER_STATE, RunDir
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.producer import GroupProducer


@dataclass
class TrainerState:
    """See the module docstring. A fresh run's state is ``TrainerState()`` (step 0, version 0)."""

    step: int = 0
    policy_version: int = 0
    next_group_id: int = 0
    rng: tuple | None = None
    """``random.Random.getstate()`` of the prompt sampler (None: a fresh run, seeded from ``run.seed``)."""
    ledger: dict | None = None
    """``GroupLedger.as_dict()`` (None: a fresh run)."""
    ready: int = 0
    group_counts: Counter = field(default_factory=Counter)
    judge_curriculum_stage: int = 0

    # ------------------------------------------------------------------ position
    def at(self, step: int, policy_version: int, producer: GroupProducer, ledger: GroupLedger,
           ready: int) -> TrainerState:
        """A copy at the loop's position now (the totals are completed when the step is written)."""
        return dataclasses.replace(self, step=step, policy_version=policy_version, rng=producer.rng.getstate(),
                                   next_group_id=producer.next_group_id, ledger=ledger.as_dict(), ready=ready,
                                   group_counts=Counter())

    def with_totals(self, totals: TrainerState) -> TrainerState:
        """This position with ``totals``' group counts and curriculum stage."""
        return dataclasses.replace(self, group_counts=Counter(totals.group_counts),
                                   judge_curriculum_stage=totals.judge_curriculum_stage)

    def restore(self, producer: GroupProducer, ledger: GroupLedger, max_staleness: int) -> int:
        """Put the producer's prompt cursor and ``ledger`` where the checkpoint left them; groups
        that were running or ready then are lost and counted as failed (``GroupLedger.recover``).
        The ledger takes this run's ``max_staleness``. Returns the first step to run (1 when fresh)."""
        if self.ledger is None:
            return self.step + 1
        producer.rng.setstate(self.rng)
        producer.next_group_id = self.next_group_id
        restored = GroupLedger.from_dict(self.ledger)
        restored.max_staleness = max_staleness
        restored.recover(self.ready)
        for key, value in restored.as_dict().items():
            setattr(ledger, key, value)
        return self.step + 1

    # ------------------------------------------------------------------ totals
    def count(self, group_counts: Counter, curriculum_stage: int | None) -> None:
        """Add one written step's group ends and judge curriculum stage."""
        self.group_counts.update(group_counts)
        if curriculum_stage is not None:
            self.judge_curriculum_stage = max(self.judge_curriculum_stage, int(curriculum_stage))

    # ------------------------------------------------------------------ files
    def as_dict(self) -> dict:
        """The JSON record of ``trainer_state.json``."""
        return dataclasses.asdict(self) | {"group_counts": dict(self.group_counts)}

    @classmethod
    def from_dict(cls, data: dict) -> TrainerState:
        """Inverse of :meth:`as_dict` (JSON turned the RNG state's tuples into lists)."""
        known = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in data.items() if k in known})
        state.rng = _tuples(state.rng) if state.rng is not None else None
        state.group_counts = Counter(state.group_counts)
        return state

    def save(self, run_dir: RunDir) -> Path:
        """Complete step ``self.step``'s checkpoint with this state (``RunDir.commit_checkpoint``:
        the folder is renamed into place with it); returns the checkpoint folder."""
        return run_dir.commit_checkpoint(self.step, self.as_dict())

    @classmethod
    def load(cls, checkpoint: Path) -> TrainerState:
        """The state saved in a complete checkpoint folder."""
        return cls.from_dict(json.loads((Path(checkpoint) / TRAINER_STATE).read_text()))


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
