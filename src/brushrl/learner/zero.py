"""DeepSpeed ZeRO under the learner's TRL ``GRPOTrainer`` (an HF ``Trainer``), through accelerate.

``GRPOLearner`` with ``learner.strategy: deepspeed`` runs in each of ``learner.workers`` processes
(the Ray actors of :mod:`brushrl.learner.group`), which have ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in their environment. There:

1. :func:`init_distributed` starts torch.distributed through accelerate's ``PartialState``, which
   calls ``deepspeed.init_distributed`` (NCCL on GPUs, gloo on CPU);
2. ``GRPOConfig(deepspeed=deepspeed_config(...), accelerator_config={"use_configured_state": True})``
   makes the Trainer's accelerator a DeepSpeed one (transformers ``HfTrainerDeepSpeedConfig`` fills
   the ``"auto"`` entries from the Trainer's arguments and, in step 3, the model's hidden size);
3. :func:`prepare_engine` does for DeepSpeed what ``Trainer._prepare_for_training`` does before a
   training loop (transformers 5.24): ``deepspeed_init`` (TRL's AdamW, ``zero_allow_untested_optimizer``),
   ``accelerator.prepare(model, optimizer)`` (``deepspeed.initialize``) and the HF LR scheduler
   on the wrapped optimizer (stepped by the learner, not by the engine).

Under DeepSpeed ``accelerator.backward`` runs ``engine.backward`` and, when
``accelerator.sync_gradients`` is set, ``engine.step`` (gradient averaging over the ranks, clipping
at ``gradient_clipping`` = ``learner.max_grad_norm``, the optimizer step, zeroing the gradients);
``accelerator.clip_grad_norm_`` then returns the engine's pre-clip global norm
(accelerate ``DeepSpeedEngineWrapper``).
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta

import torch
from torch import nn

from brushrl.config import DeepSpeedConfig

#: Seconds a collective waits for the other ranks before failing (torch.distributed's timeout). A rank
#: that dies is noticed sooner by the group (``brushrl.learner.group``), which then ends the others.
COLLECTIVE_TIMEOUT_S = 1800


def deepspeed_config(cfg: DeepSpeedConfig) -> dict:
    """The DeepSpeed config dict for ``GRPOConfig(deepspeed=...)``.

    ``"auto"`` entries are filled by transformers' ``HfTrainerDeepSpeedConfig``: micro-batch size and
    accumulation (1; the learner accumulates micro-batches itself), ``gradient_clipping`` from
    ``max_grad_norm``, ``bf16`` from the Trainer's ``bf16`` (on GPUs), and the ZeRO-3 bucket sizes and
    ``stage3_param_persistence_threshold`` (10 x hidden size) from the model config.
    The optimizer stays the Trainer's torch AdamW, also when offloaded (``zero_force_ds_cpu_optimizer``
    off: no DeepSpeedCPUAdam, which DeepSpeed would compile at run time).
    """
    zero: dict = {"stage": cfg.zero_stage, "reduce_bucket_size": "auto"}
    if cfg.zero_stage == 3:
        zero |= {"stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                 "stage3_gather_16bit_weights_on_model_save": False}  # the learner gathers the adapter itself
    if cfg.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    if cfg.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    return {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def init_distributed(backend: str):
    """Join this worker's torch.distributed group through accelerate (``PartialState(backend=...)``
    with ``ACCELERATE_USE_DEEPSPEED``, which calls ``deepspeed.init_distributed``), so that the Trainer
    built next finds a DeepSpeed state with the right rank and world size.

    On CPU, accelerate's own path (``use_cpu``) would leave DeepSpeed out and its DeepSpeed path finds
    no backend, hence the explicit one. DeepSpeed's CPU backend also JIT-compiles a shared-memory
    all-reduce on start (110 s measured on the 2-core box) that only ``inference_all_reduce`` uses;
    training collectives go through torch.distributed, so that build is switched off for gloo.

    Args:
        backend: ``nccl`` or ``gloo``.

    Returns:
        accelerate's ``PartialState``.

    Raises:
        KeyError: ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` missing from the environment.
    """
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        os.environ[key]  # noqa: B018 - fail early, naming the missing variable
    from accelerate import PartialState

    if backend == "gloo":
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    try:
        return PartialState(backend=backend, timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    finally:
        del os.environ["ACCELERATE_USE_DEEPSPEED"]


def prepare_engine(trainer, total_steps: int):
    """Wrap ``trainer.model`` in a DeepSpeed engine with the Trainer's optimizer and scheduler.

    Sets ``trainer.optimizer`` (accelerate ``DeepSpeedOptimizerWrapper``; ``step``/``zero_grad`` are
    no-ops, the engine steps in ``accelerator.backward``), ``trainer.lr_scheduler`` (the HF schedule,
    stepped by the caller), ``trainer.model_wrapped`` and ``trainer.deepspeed`` (the engine).

    Returns:
        The ``deepspeed.DeepSpeedEngine``.
    """
    from transformers.integrations.deepspeed import deepspeed_init

    trainer.optimizer, trainer.lr_scheduler = deepspeed_init(trainer, num_training_steps=total_steps)
    engine, trainer.optimizer = trainer.accelerator.prepare(trainer.model, trainer.optimizer)
    trainer.create_scheduler(num_training_steps=total_steps)
    trainer.model_wrapped = trainer.deepspeed = engine
    return engine


def gathered(params: list[nn.Parameter]):
    """Context in which ZeRO-3-partitioned ``params`` hold their full values on every rank
    (``deepspeed.zero.GatheredParameters``, read-only); a no-op for unpartitioned parameters. A
    collective under ZeRO-3: every rank must enter it with the same parameters."""
    if not any(hasattr(p, "ds_id") for p in params):
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=None)


def parameter_counts(model: nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts; ZeRO-3-partitioned parameters count at full size."""
    trainable = total = 0
    for p in model.parameters():
        n = int(getattr(p, "ds_numel", p.numel()))
        total += n
        trainable += n if p.requires_grad else 0
    return trainable, total
