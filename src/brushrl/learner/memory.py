"""Per-worker memory of the learner's model states under a strategy (single, ZeRO-2, ZeRO-3, offload).

The ZeRO paper (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC'20, arXiv:1910.02054, section 3.1 and Figure 1) counts the *model states* of mixed-precision
Adam training of a model with Psi parameters on N_d data-parallel workers as

* weights 2 Psi (fp16/bf16), gradients 2 Psi, optimizer state K Psi with K = 12 (fp32 master
  weights, momentum and variance, 4 bytes each): 16 Psi per worker without ZeRO;
* P_os (stage 1): 2 Psi + 2 Psi + K Psi / N_d;
* P_os+g (stage 2): 2 Psi + (2 + K) Psi / N_d;
* P_os+g+p (stage 3): (2 + 2 + K) Psi / N_d.

With Psi = 7.5 B, N_d = 64 these give 120 GB, 31.4 GB, 16.6 GB and 1.9 GB (Figure 1).

A LoRA learner splits Psi into the frozen base (Psi_b: weights only, no gradient, no optimizer
state) and the trainable adapter (Psi_t: weights, gradients and optimizer state), so per worker:

* weights: ``wb * (Psi_b + Psi_t)``, divided by N under ZeRO-3;
* gradients: ``gb * Psi_t``, divided by N under ZeRO-2 and ZeRO-3;
* optimizer state: ``K * Psi_t``, divided by N under ZeRO-2 and ZeRO-3;

``wb`` = ``gb`` = 2 bytes and K = 12 in bf16 (the GPU learner); in fp32 (the CPU learner) ``wb`` =
``gb`` = 4 and K = 8 (the weights are their own master copy; momentum and variance remain).
``offload_optimizer`` moves the optimizer state to CPU memory (ZeRO-Offload, Ren et al. 2021,
arXiv:2101.06840), ``offload_params`` the (sharded) weights (ZeRO-Infinity, arXiv:2104.07857).

Not counted: activations, temporary buffers and fragmentation (the paper's "residual states",
section 3.2), nor DeepSpeed's communication buckets; a plan must add them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Bytes per parameter of weights, gradients and optimizer state by training dtype (module docstring).
_BYTES = {"bf16": (2, 2, 12), "fp16": (2, 2, 12), "fp32": (4, 4, 8)}


@dataclass(frozen=True)
class LearnerMemory:
    """Model-state bytes of one learner worker.

    Attributes:
        weights: bytes of weights on the GPU (0 with ``offload_params``).
        grads: bytes of gradients on the GPU.
        optimizer: bytes of optimizer state on the GPU (0 with ``offload_optimizer``).
        cpu: bytes moved to the worker's CPU memory by offloading.
    """

    weights: float
    grads: float
    optimizer: float
    cpu: float = 0.0

    @property
    def gpu(self) -> float:
        """Bytes of model states on the worker's GPU."""
        return self.weights + self.grads + self.optimizer


def learner_memory_per_worker(
    base_params: float,
    trainable_params: float,
    *,
    strategy: Literal["single", "deepspeed"] = "single",
    zero_stage: int = 2,
    workers: int = 1,
    dtype: Literal["bf16", "fp16", "fp32"] = "bf16",
    offload_optimizer: bool = False,
    offload_params: bool = False,
) -> LearnerMemory:
    """Bytes of weights, gradients and optimizer state one learner worker holds (module docstring).

    Args:
        base_params: frozen parameters (Psi_b), e.g. 35e9 for Qwen3.5-35B-A3B; 0 for full fine-tuning.
        trainable_params: trainable parameters (Psi_t), e.g. 16.3e6 for its LoRA r=16
            all-linear (``brushrl.plan.lora``).
        strategy: ``single`` (no sharding) or ``deepspeed``.
        zero_stage: 1, 2 or 3 with ``deepspeed`` (1 shards the optimizer state only).
        workers: data-parallel workers N the states are sharded over.
        dtype: training dtype (bf16 on GPUs, fp32 on CPU).
        offload_optimizer: optimizer state in CPU memory instead.
        offload_params: weights in CPU memory instead (ZeRO-3 only).

    Returns:
        A :class:`LearnerMemory` in bytes.

    Raises:
        ValueError: negative counts, ``workers`` < 1, an unknown stage, or ``offload_params`` without stage 3.
    """
    if base_params < 0 or trainable_params < 0 or workers < 1:
        raise ValueError("parameter counts must be >= 0 and workers >= 1")
    if strategy == "deepspeed" and zero_stage not in (1, 2, 3):
        raise ValueError(f"zero_stage must be 1, 2 or 3, not {zero_stage}")
    if offload_params and not (strategy == "deepspeed" and zero_stage == 3):
        raise ValueError("offload_params needs ZeRO stage 3")
    stage = zero_stage if strategy == "deepspeed" else 0
    n = workers if strategy == "deepspeed" else 1
    weight_b, grad_b, optim_b = _BYTES[dtype]
    weights = weight_b * (base_params + trainable_params) / (n if stage >= 3 else 1)
    grads = grad_b * trainable_params / (n if stage >= 2 else 1)
    optimizer = optim_b * trainable_params / (n if stage >= 1 else 1)
    cpu = 0.0
    if offload_optimizer:
        cpu, optimizer = cpu + optimizer, 0.0
    if offload_params:
        cpu, weights = cpu + weights, 0.0
    return LearnerMemory(weights=weights, grads=grads, optimizer=optimizer, cpu=cpu)
