"""Checkpoints of a DeepSpeed learner: every rank's ZeRO shards plus what the driver and rollout read.

A checkpoint folder (``runs/<name>/checkpoints/step_NNNN``, made visible atomically by the driver,
``brushrl.artifacts.run_dir``) holds, written by all ranks of the group together:

* ``adapter_config.json``, ``adapter_model.safetensors``: the full LoRA adapter (rank 0, gathered
  under ZeRO-3), as the single learner writes it: the rollout engine loads it on resume;
* ``learner_state.pt`` (rank 0): ``strategy`` (``deepspeed``), ``zero_stage``, ``workers``,
  ``policy_version`` and the LR ``scheduler`` state (the engine has no scheduler of its own);
* ``latest`` and ``zero/``: DeepSpeed's ``engine.save_checkpoint(tag="zero",
  exclude_frozen_parameters=True)``: the trainable weights' module states
  (``mp_rank_00_model_states.pt``; ``zero_pp_rank_<r>_mp_rank_00_model_states.pt`` per rank under
  ZeRO-3) and each rank's optimizer shard ``zero_pp_rank_<r>_mp_rank_00_optim_states.pt`` (fp32
  master weights and Adam moments of its 1/W partition);
* ``rng_rank<r>.pt`` (rank r): its torch / Python / NumPy (/ CUDA) RNG states.

The frozen base weights are not written (they come from ``policy.model``). On a cluster the run
directory must be on storage every learner node mounts (each rank writes its own shard).

Resume needs the same ``learner.workers`` and ``learner.deepspeed.zero_stage``: DeepSpeed's ZeRO
shards are cut for W ranks (re-cutting them goes through DeepSpeed's universal checkpoint
conversion, not wired here); a mismatch is refused before anything is loaded.
"""

from __future__ import annotations

from pathlib import Path

import torch

from brushrl.learner.rng import rng_state, set_rng_state

#: Rank 0's state file; the single learner writes one of the same name (with the optimizer in it).
LEARNER_STATE = "learner_state.pt"
#: DeepSpeed's checkpoint tag (the sub-folder of the shards).
DS_TAG = "zero"


def _rng_file(path: Path, rank: int) -> Path:
    return path / f"rng_rank{rank:03d}.pt"


class ZeroCheckpoint:
    """Saves and restores one rank's part of a DeepSpeed learner checkpoint (module docstring).

    Args:
        learner: a ``GRPOLearner`` with a DeepSpeed ``engine``; every rank of the group must call
            :meth:`save` / :meth:`load` together with the same folder.
    """

    def __init__(self, learner) -> None:
        self.learner = learner
        self.engine = learner.engine

    def save(self, path: Path) -> Path:
        """Write this rank's files into folder ``path`` (created); returns ``path``."""
        ln = self.learner
        path.mkdir(parents=True, exist_ok=True)
        ln.save_adapter(path)
        self.engine.save_checkpoint(str(path), tag=DS_TAG, exclude_frozen_parameters=True,
                                    client_state={"policy_version": ln.policy_version})
        torch.save(rng_state(), _rng_file(path, ln.rank))
        if ln.rank == 0:
            torch.save({"strategy": "deepspeed", "zero_stage": ln.cfg.deepspeed.zero_stage,
                        "workers": ln.world_size, "policy_version": ln.policy_version,
                        "scheduler": ln.trainer.lr_scheduler.state_dict()}, path / LEARNER_STATE)
        torch.distributed.barrier()  # the folder is complete when any rank returns
        return path

    def load(self, path: Path) -> int:
        """Restore this rank from folder ``path``: the ZeRO shards (LoRA weights, optimizer state),
        the LR schedule and this rank's RNG states. Returns the policy version.

        Raises:
            FileNotFoundError: ``learner_state.pt``, the shards or this rank's RNG file are missing.
            ValueError: the checkpoint is the single learner's, or was written by a different number
                of workers or ZeRO stage (named, with the values to resume with).
        """
        ln = self.learner
        blob = torch.load(path / LEARNER_STATE, map_location="cpu", weights_only=False)
        stage = ln.cfg.deepspeed.zero_stage
        if blob.get("strategy") != "deepspeed":
            raise ValueError(f"checkpoint {path} was written by the single learner; resume it with "
                             "learner.strategy 'single'")
        if (blob["workers"], blob["zero_stage"]) != (ln.world_size, stage):
            raise ValueError(
                f"checkpoint {path} was written by {blob['workers']} learner workers with ZeRO-{blob['zero_stage']}; "
                f"this learner has {ln.world_size} with ZeRO-{stage}: resume with learner.workers "
                f"{blob['workers']} and learner.deepspeed.zero_stage {blob['zero_stage']}")
        rng_file = _rng_file(path, ln.rank)
        if not rng_file.exists():
            raise FileNotFoundError(f"checkpoint {path}: no {rng_file.name}")
        loaded, client = self.engine.load_checkpoint(str(path), tag=DS_TAG, load_module_strict=False,
                                                     load_optimizer_states=True, load_lr_scheduler_states=False)
        if loaded is None:
            raise FileNotFoundError(f"checkpoint {path}: no DeepSpeed shards under {DS_TAG}/")
        ln.trainer.lr_scheduler.load_state_dict(blob["scheduler"])
        set_rng_state(torch.load(rng_file, map_location="cpu", weights_only=False))
        version = int(blob["policy_version"])
        assert client.get("policy_version") == version, f"checkpoint {path}: shards and learner_state.pt disagree"
        return version
