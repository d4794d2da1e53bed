"""The full-size GPU smoke in one process: the real policy's structure and memory on one GPU, no cluster.

    make gpu-smoke                       # = PYTHONPATH=src python -m brushrl.rehearse.gpu_smoke --config configs/h200.yaml
    make gpu-smoke DRY=1                 # CPU, tiny twins: --dry --out runs/gpu_smoke_dry.json (CI: tests/test_gpu_smoke.py)
    python -m brushrl.rehearse.gpu_smoke --pipeline --vllm-python ... --hpsv3-python ...   # brushrl.rehearse.gpu_pipeline

What it does, in this order (each step one *phase* of the report):

1. ``build_policy``: the config's policy (``policy.model``, Qwen3.5-35B-A3B for ``configs/h200.yaml``)
   built from its shipped ``config.json`` (``brushrl.hub.shipped``) as the class brushrl loads and vLLM
   serves (``brushrl.policy.model.policy_class``), random weights in bf16 created directly on the GPU
   (``brushrl.policy.model.random_model``: no host copy of the 67 GiB).
2. ``learner_init``: brushrl's ``GRPOLearner`` wraps it (PEFT LoRA on ``brushrl.learner.moe.lora_targets``
   with ``learner.lora``'s r / alpha, TRL's GRPO loss, bf16 autocast and activation checkpointing on a
   GPU, the optimizer) exactly as the learner actor builds it (``brushrl.learner.actor.LearnerActor``).
3. ``learner_warmup``, ``learner_step_1``, ``learner_step_2`` (``--timed-steps``, default 2, timed steps
   after the warm-up): ``GRPOLearner.step`` on a synthetic group
   of ``--sequences`` samples (default ``learner.micro_batch_size``: one micro-batch) of ``P`` prompt +
   ``C`` completion tokens (``P = rollout.max_model_len - rollout.max_new_tokens``, ``C =
   rollout.max_new_tokens``), with ``learner.truncated_is_clip`` and ``learner.loss_type`` as configured.
4. ``save_adapter`` (PEFT ``save_pretrained``) and ``adapter_keys``: the saved keys against the modules
   the serving class adapts (``brushrl.learner.moe.adapter_key_problems`` with ``trained_module_names``
   of ``policy_class(config)`` on the meta device; the check ``tests/test_twins.py`` makes on the twin).
5. The policy is freed; ``hpsv3_build`` and ``hpsv3_forward``: HPSv3's base VLM (Qwen2-VL-7B-Instruct
   from its shipped config, random bf16 weights) answers ``reward.hpsv3.batch_size`` sequences of
   ``brushrl.plan.memory.HPSV3_TOKENS`` tokens, one 448 x 448 image each (256 merged patches), no grad,
   through its base model (HPSv3 puts its reward head on the last hidden state, not the LM head).
6. ``gpu0_total``: the learner's peak plus HPSv3's peak (two processes in a run: two CUDA contexts)
   against the GPU-memory plan's row of the GPU they share (``brushrl.plan.memory.build_memory_plan``).

Memory (GiB = 2**30 bytes): ``peak_allocated_gib`` / ``peak_reserved_gib`` are
``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` since the phase started (reset at its
start, so a phase's peak includes what earlier phases left allocated); ``context_gib`` is what the
process holds outside PyTorch's allocator (``mem_get_info``'s used memory minus ``memory_reserved``
at the phase's end: the CUDA context, cuBLAS workspaces), and ``peak_gib`` = peak reserved +
context, what ``nvidia-smi`` would have shown at the peak; ``ratio`` = ``peak_gib / plan_gib``.
Times: wall seconds after ``torch.cuda.synchronize``. The learner phases' ``plan_s`` is the plan's
learner cost (``resources.estimates.learn_s``, the learn stage of ``brushrl.plan.timing``, for a step
of ``rollout.groups_per_step x rollout.group_size`` sequences) scaled to ``--sequences`` sequences.

``--dry`` runs the same code on the CPU with the tiny structural twins' configurations
(``brushrl.hub.twins.twin_config``: same classes and module names, tiny sizes, float32) and tiny
sequences; memory is not measured there (every memory figure ``None``, never 0).

No Ray, vLLM, DeepSpeed or Chromium on this module's import path (``tests/test_gpu_smoke.py``
runs ``--dry`` with them hidden). It needs torch, transformers (with the policy's and HPSv3's
classes), peft, accelerate, TRL and datasets (``GRPOLearner``'s loss), pydantic and PyYAML
(``brushrl.config``); :func:`check_environment` names what is missing before any model is built.
docs/perf/gpu_smoke.md says which wheels a bare GPU machine needs.

Writes a JSON report (``--out``) and prints a table; progress lines are flushed as they happen.

``--pipeline`` runs the other smoke instead, :mod:`brushrl.rehearse.gpu_pipeline`:
the whole pipeline (Ray, vLLM, Chromium) with the rehearsal's tiny stand-ins on one GPU. One entry
point for both, so ``make gpu-smoke``, CI's dry run and docs/perf/gpu_smoke.md name one module.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import inspect
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

GIB = 2**30

#: Module -> what to carry when it is missing (pip requirement). ``check_environment`` asks for them.
REQUIRED_MODULES = {
    "torch": "torch", "transformers": "transformers", "peft": "peft", "accelerate": "accelerate",
    "trl": "trl==1.16.0", "datasets": "datasets==5.2.0 (+ dill, multiprocess)", "pydantic": "pydantic==2.14.4 "
    "(+ pydantic-core, annotated-types, typing-inspection)", "yaml": "pyyaml", "tokenizers": "tokenizers",
    "safetensors": "safetensors",
}
#: This repo's pins (pyproject.toml) of what the GPU machine has in another version; the wheels to carry.
PINNED = {"transformers": "5.24.0", "peft": "0.21.2", "trl": "1.16.0"}
#: Optional kernels whose absence makes transformers fall back to slower torch code (recorded, not needed).
FAST_PATH_MODULES = ("fla", "causal_conv1d", "flash_attn")
#: Phases of a complete report, in order.
PHASES = ("build_policy", "learner_init", "learner_warmup", "learner_step_1", "learner_step_2", "save_adapter",
          "adapter_keys", "hpsv3_build", "hpsv3_forward", "gpu0_total")
#: ``--dry``'s sizes: prompt and completion tokens, HPSv3 text tokens and image side (pixels).
DRY_SIZES = {"prompt_tokens": 8, "completion_tokens": 24, "hpsv3_text_tokens": 12, "image_side": 56}
#: HPSv3's image side (pixels): ``min_pixels = max_pixels = 256 x 28 x 28`` -> 448 x 448, 256 merged patches.
HPSV3_IMAGE_SIDE = 448


class MissingSupport(RuntimeError):
    """This Python lacks a module or a model class the smoke needs (the message names it)."""


_T0 = time.perf_counter()


def _log(msg: str) -> None:
    """A progress line, seconds since this module was imported, flushed (a remote log shows only its tail)."""
    print(f"[gpu-smoke +{time.perf_counter() - _T0:6.1f}s] {msg}", flush=True)


def check_environment(architectures: list[str] = ()) -> dict[str, str | None]:
    """Fail fast: every module of :data:`REQUIRED_MODULES` importable, and ``transformers`` has each
    class named in ``architectures``.

    Returns:
        Versions of the main packages (None where a package has no ``__version__``) and, under
        ``fast_path``, which of :data:`FAST_PATH_MODULES` are installed (``"yes"`` / ``"no"``).

    Raises:
        MissingSupport: a module or a class is missing (the message lists all of them and what to carry).
    """
    missing = [f"{mod} (carry {req})" for mod, req in REQUIRED_MODULES.items() if importlib.util.find_spec(mod) is None]
    if missing:
        raise MissingSupport(f"missing Python modules: {', '.join(missing)}; see docs/perf/gpu_smoke.md "
                             f"(single-process smoke: wheels to carry)")
    import transformers

    absent = []
    for name in architectures:
        try:
            getattr(transformers, name)
        except (AttributeError, ImportError):
            absent.append(name)
    if absent:
        raise MissingSupport(f"transformers {transformers.__version__} has no {absent} (needed to build the "
                             f"configured models); carry transformers=={PINNED['transformers']}, this repo's pin")
    from transformers import TrainingArguments

    if "activation_checkpointing" not in TrainingArguments.__dataclass_fields__:
        raise MissingSupport(f"transformers {transformers.__version__}'s TrainingArguments has no "
                             f"activation_checkpointing, which GRPOLearner passes to GRPOConfig; carry "
                             f"transformers=={PINNED['transformers']}, this repo's pin (docs/perf/gpu_smoke.md)")
    from peft import LoraConfig

    if "target_parameters" not in LoraConfig.__dataclass_fields__:
        raise MissingSupport(f"peft's LoraConfig has no target_parameters (brushrl.learner.moe.lora_targets "
                             f"sets it); carry peft=={PINNED['peft']}")
    versions: dict = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "pydantic"):
        versions[mod] = getattr(__import__(mod), "__version__", None)
    versions["fast_path"] = {m: "yes" if importlib.util.find_spec(m) else "no" for m in FAST_PATH_MODULES}
    from brushrl.learner.kernels import kernel_report

    # what transformers bound for the policy's Gated DeltaNet functions (the kernel or its fallback)
    versions["kernels"] = kernel_report("qwen3_5_moe")
    return versions


# ----------------------------------------------------------------------------- memory
class _Meter:
    """Per-phase time and CUDA memory (module docstring); on the CPU, times only."""

    def __init__(self, cuda: bool, on_phase=None):
        self.cuda = cuda
        self.phases: list[dict] = []
        self.on_phase = on_phase or (lambda: None)

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    @contextmanager
    def phase(self, name: str, **fields):
        import torch

        _log(f"{name} ...")
        self._sync()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        rec = {"phase": name, "seconds": None, "peak_allocated_gib": None, "peak_reserved_gib": None,
               "context_gib": None, "peak_gib": None, **fields}
        t = time.perf_counter()
        yield rec
        self._sync()
        rec["seconds"] = time.perf_counter() - t
        if self.cuda:
            free, total = torch.cuda.mem_get_info()
            rec["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
            rec["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
            rec["context_gib"] = (total - free - torch.cuda.memory_reserved()) / GIB
            rec["peak_gib"] = rec["peak_reserved_gib"] + rec["context_gib"]
        _finish(rec)
        self.phases.append(rec)
        _log(f"{name}: {_row(rec)}")
        self.on_phase()


def _finish(rec: dict) -> None:
    """Fill ``ratio`` (memory) and ``time_ratio`` where both sides are known."""
    if rec.get("peak_gib") is not None and rec.get("plan_gib"):
        rec["ratio"] = rec["peak_gib"] / rec["plan_gib"]
    else:
        rec.setdefault("ratio", None)
    if rec.get("seconds") is not None and rec.get("plan_s"):
        rec["time_ratio"] = rec["seconds"] / rec["plan_s"]
    else:
        rec.setdefault("time_ratio", None)


def _fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _row(rec: dict) -> str:
    return (f"{_fmt(rec.get('seconds'), '.1f')} s (plan {_fmt(rec.get('plan_s'), '.1f')} s), peak "
            f"{_fmt(rec.get('peak_gib'))} GiB (plan {_fmt(rec.get('plan_gib'))} GiB, ratio {_fmt(rec.get('ratio'))})")


def format_table(report: dict) -> str:
    """The report's phases as a text table: phase, seconds, plan seconds, peak GiB, plan GiB, ratio."""
    head = f"{'phase':<16}{'seconds':>9}{'plan s':>9}{'peak GiB':>10}{'plan GiB':>10}{'ratio':>7}"
    lines = [head, "-" * len(head)]
    for r in report["phases"]:
        lines.append(f"{r['phase']:<16}{_fmt(r.get('seconds'), '.1f'):>9}{_fmt(r.get('plan_s'), '.1f'):>9}"
                     f"{_fmt(r.get('peak_gib')):>10}{_fmt(r.get('plan_gib')):>10}{_fmt(r.get('ratio')):>7}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- inputs
def model_configs(policy_id: str, hpsv3_id: str, dry: bool):
    """``(policy config, HPSv3 base config, tokenizer)``: transformers configurations built from the
    shipped ``config.json`` files (``--dry``: the tiny twins' configurations, ``twin_config``), and the
    twins' small Qwen-layout tokenizer (``brushrl.hub.twins.build_tokenizer``; only its pad / EOS ids
    are read by the learner, and its ids lie below both real vocabularies).

    Raises:
        brushrl.hub.shipped.NotShipped: no shipped config for a model id.
    """
    from transformers import AutoConfig

    from brushrl.hub.twins import SPECIALS, build_tokenizer, shipped_config, twin_config

    tokenizer = build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    out = []
    for model_id in (policy_id, hpsv3_id):
        cfg = shipped_config(model_id)
        if dry:
            cfg = twin_config(cfg, len(tokenizer), ids)
        out.append(AutoConfig.for_model(**cfg))
    return out[0], out[1], tokenizer


def synthetic_group(n: int, prompt_tokens: int, completion_tokens: int, vocab_size: int, seed: int = 0):
    """One group of ``n`` :class:`~brushrl.learner.samples.TrainSample`: random token ids in
    ``[0, vocab_size)``, behaviour log-probs ``-ln(vocab_size)`` (a uniform policy's, about what random
    weights give), rewards ``0, 1/(n-1), ..., 1`` (distinct, so the group filter keeps the group)."""
    import torch

    from brushrl.learner.samples import TrainSample

    g = torch.Generator().manual_seed(seed)
    logp = -math.log(vocab_size)
    group = []
    for i in range(n):
        ids = torch.randint(0, vocab_size, (prompt_tokens + completion_tokens,), generator=g).tolist()
        group.append(TrainSample(ids[:prompt_tokens], ids[prompt_tokens:], [logp] * completion_tokens,
                                 reward=i / max(n - 1, 1)))
    return group


def hpsv3_inputs(config, batch: int, text_tokens: int, image_side: int, device, dtype, seed: int = 0) -> dict:
    """Inputs of one Qwen2-VL forward as HPSv3 feeds it: ``batch`` sequences, each ``text_tokens`` text
    tokens then ``<|vision_start|>``, the image's placeholder tokens and ``<|vision_end|>``, and one
    ``image_side`` x ``image_side`` image each.

    Returns:
        ``input_ids`` (B, S) long, ``attention_mask`` (B, S) long, ``mm_token_type_ids`` (B, S) int
        (1 on image placeholders, 0 elsewhere, as the processor of transformers >= 5.2x returns it for
        M-RoPE; drop it for a forward that does not take it), ``pixel_values``
        (B x grid_h x grid_w, channels x temporal_patch x patch x patch) in ``dtype`` and
        ``image_grid_thw`` (B, 3) long, on ``device``; S = text_tokens + 2 + (grid_h x grid_w) / merge**2
        with grid = image_side / patch_size.

    Raises:
        ValueError: ``image_side`` is not a multiple of ``patch_size x spatial_merge_size``.
    """
    import torch

    v = config.vision_config
    patch, merge = v.patch_size, v.spatial_merge_size
    if image_side % (patch * merge):
        raise ValueError(f"image side {image_side} is not a multiple of patch {patch} x merge {merge}")
    grid = image_side // patch
    placeholders = grid * grid // merge**2
    text = config.get_text_config()
    special = {getattr(config, k, None) for k in ("image_token_id", "video_token_id", "vision_start_token_id",
                                                  "vision_end_token_id", "vision_token_id")}
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(0, text.vocab_size, (batch, text_tokens), generator=g)
    safe = next(i for i in range(text.vocab_size) if i not in special)
    for s in special - {None}:
        words[words == s] = safe
    image = torch.tensor([config.vision_start_token_id] + [config.image_token_id] * placeholders
                         + [config.vision_end_token_id]).expand(batch, -1)
    input_ids = torch.cat([words, image], dim=1)
    channels = getattr(v, "in_chans", None) or getattr(v, "in_channels", 3)
    pixels = torch.randn(batch * grid * grid, channels * v.temporal_patch_size * patch * patch, generator=g)
    return {"input_ids": input_ids.to(device), "attention_mask": torch.ones_like(input_ids).to(device),
            "mm_token_type_ids": (input_ids == config.image_token_id).int().to(device),
            "pixel_values": pixels.to(device=device, dtype=dtype),
            "image_grid_thw": torch.tensor([[1, grid, grid]] * batch, device=device)}


def adapter_check(adapter_dir: str | Path, config, target_modules, experts: bool) -> dict:
    """The saved adapter's keys against the modules the serving class adapts: ``trained_module_names``
    of ``policy_class(config)`` built on the meta device, compared by
    :func:`brushrl.learner.moe.adapter_key_problems`.

    Returns:
        ``passed``, ``problems`` (lines), ``keys`` and ``modules`` (counts), ``serving_class``,
        ``key_example``.

    Raises:
        FileNotFoundError: no ``adapter_model.safetensors`` in ``adapter_dir``.
    """
    from safetensors import safe_open

    from brushrl.learner.moe import adapter_key_problems, trained_module_names
    from brushrl.policy.model import meta_model

    path = Path(adapter_dir) / "adapter_model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no adapter saved")
    with safe_open(str(path), "pt") as f:
        keys = list(f.keys())
    model = meta_model(config)
    expected = trained_module_names(model, target_modules, experts)
    problems = adapter_key_problems(keys, expected)
    return {"passed": not problems, "problems": problems, "keys": len(keys), "modules": len(expected),
            "serving_class": type(model).__name__, "key_example": sorted(keys)[0] if keys else None}


# ----------------------------------------------------------------------------- the run
def run(config_path: str | Path, *, dry: bool = False, sequences: int | None = None,
        prompt_tokens: int | None = None, completion_tokens: int | None = None,
        adapter_dir: str | Path | None = None, report: dict | None = None, on_phase=None,
        timed_steps: int = 2) -> dict:
    """Run every phase (module docstring) and return the report (the JSON ``main`` writes).

    Args:
        config_path: the run config YAML (``configs/h200.yaml``).
        dry: CPU, tiny twins, tiny sequences, no memory figures.
        sequences: samples per learner step (None: ``learner.micro_batch_size``).
        prompt_tokens, completion_tokens: per sample (None: the config's, module docstring; with
            ``dry``, :data:`DRY_SIZES`'s).
        adapter_dir: where the adapter is saved (kept); None: a temporary folder, removed.
        timed_steps: timed learner steps after the warm-up (``learner_step_1`` ...; at least 1).
        report: a dict to fill in place (so a caller still has the phases done when a phase raises).
        on_phase: called with no argument after each phase (``main`` writes the report then, so a run
            killed by a timeout leaves the phases it finished).

    Raises:
        MissingSupport: a module or model class is missing (before any model is built).
        RuntimeError: no CUDA device without ``dry``; a phase's own errors (e.g. ``torch.OutOfMemoryError``).
        ValueError: ``learner.strategy: deepspeed`` with ZeRO-3 (this smoke is one process; a ZeRO-2
            worker holds the whole weights and is measured as the single learner).
    """
    report = {} if report is None else report
    report.update(mode="dry" if dry else "gpu", config=str(config_path), phases=[])
    versions = check_environment()
    import torch

    from brushrl.config import load_config
    from brushrl.hub.shipped import shipped_config
    from brushrl.hub.weights import hpsv3_base
    from brushrl.plan.memory import HPSV3_TOKENS, PROMPT_TOKENS, build_memory_plan

    cfg = load_config(config_path)
    policy_id, hpsv3_id = cfg.policy.model, hpsv3_base(cfg.reward.hpsv3)
    archs = [shipped_config(m)["architectures"][0] for m in (policy_id, hpsv3_id)]
    versions = check_environment(archs)
    if cfg.learner.strategy == "deepspeed" and cfg.learner.deepspeed.zero_stage != 2:
        raise ValueError(f"learner.deepspeed.zero_stage {cfg.learner.deepspeed.zero_stage}: this smoke is one process; "
                         "only a ZeRO-2 worker (whole weights) is measured, as the single learner")
    # One ZeRO-2 worker's step over n sequences, without the reduce-scatter of the LoRA gradients: the
    # single learner on the same model (learn_s is one worker's seconds, brushrl.plan.timing).
    learner_cfg = cfg.learner.model_copy(update={"strategy": "single", "workers": 1})
    cuda = not dry
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: run with --dry on a machine without a GPU")
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    report["versions"] = versions
    report["device"] = torch.cuda.get_device_name(0) if cuda else "cpu"
    torch.set_num_threads(max(1, min(cfg.policy.torch_threads, os.cpu_count() or 1)))

    plan = build_memory_plan(cfg)
    by_name = {e.component: e for e in plan.estimates}
    first = "learner" if "learner" in by_name else "learner[0]"  # the single learner or worker 0 (beside HPSv3)
    learner_est, hps_est = by_name.get(first), by_name.get("hpsv3")
    row = next((r for r in plan.gpus if any(u.component == first for u in r.uses)), None)
    step_sequences = cfg.rollout.groups_per_step * cfg.rollout.group_size
    n = sequences or cfg.learner.micro_batch_size
    prompt = (cfg.rollout.max_model_len - cfg.rollout.max_new_tokens if cfg.rollout.max_model_len
              else PROMPT_TOKENS)
    completion = cfg.rollout.max_new_tokens
    hps_batch, hps_text, side = cfg.reward.hpsv3.batch_size, None, HPSV3_IMAGE_SIDE
    if dry:
        prompt, completion = DRY_SIZES["prompt_tokens"], DRY_SIZES["completion_tokens"]
        hps_text, side = DRY_SIZES["hpsv3_text_tokens"], DRY_SIZES["image_side"]
    prompt, completion = prompt_tokens or prompt, completion_tokens or completion
    plan_step_s = cfg.resources.estimates.learn_s * n / step_sequences
    report["plan"] = {
        "learner": learner_est and {"parts": learner_est.parts, "gib": learner_est.used_gib},
        "hpsv3": hps_est and {"parts": hps_est.parts, "derived_gib": hps_est.derived_gib,
                              "typed_gib": hps_est.typed_gib,
                              "gib": hps_est.used_gib},
        "gpu": row and {"label": row.label, "total_gib": row.total_gib, "used_gib": row.used_gib,
                        "uses": {u.component: u.gib for u in row.uses}},
        "learn_s": cfg.resources.estimates.learn_s, "step_sequences": step_sequences,
        "errors": plan.errors, "warnings": plan.warnings,
    }
    report["sizes"] = {"sequences": n, "prompt_tokens": prompt, "completion_tokens": completion,
                       "micro_batch_size": cfg.learner.micro_batch_size, "hpsv3_batch": hps_batch,
                       "hpsv3_image_side": side, "dtype": str(dtype).removeprefix("torch.")}
    _log(f"{report['mode']} on {report['device']}: policy {policy_id}, HPSv3 base {hpsv3_id}; {n} x ({prompt} + "
         f"{completion}) tokens per step; plan: learner {_fmt(learner_est and learner_est.used_gib)} GiB, "
         f"GPU {row.label if row else '-'} {_fmt(row and row.used_gib)} of {_fmt(row and row.total_gib)} GiB")

    from brushrl.learner.grpo import GRPOLearner  # TRL: after the checks
    from brushrl.policy.model import random_model

    policy_cfg, hps_cfg, tokenizer = model_configs(policy_id, hpsv3_id, dry)
    meter = _Meter(cuda, on_phase)
    report["phases"] = meter.phases
    lp = learner_est.parts if learner_est else {}
    torch.manual_seed(cfg.run.seed)
    with meter.phase("build_policy", plan_gib=lp.get("weights")) as rec:
        model = random_model(policy_cfg, device, dtype)
        rec["class"] = type(model).__name__
        rec["parameters"] = sum(p.numel() for p in model.parameters())
        rec["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
        rec["experts_implementation"] = getattr(model.config.get_text_config(), "_experts_implementation", None)
    states_gib = sum(lp.get(k, 0.0) for k in ("weights", "grads", "optimizer")) or None
    with meter.phase("learner_init", plan_gib=states_gib) as rec:
        learner = GRPOLearner(model, tokenizer, learner_cfg, cfg.run.steps, group_size=cfg.rollout.group_size,
                              max_completion_length=cfg.rollout.max_new_tokens, seed=cfg.run.seed,
                              micro_batch_size=cfg.learner.micro_batch_size,
                              truncated_is_clip=cfg.learner.truncated_is_clip)
        rec["trainable_parameters"] = learner.trainable_params
        base = learner.model.get_base_model()  # transformers 5.2x: is_activation_checkpointing (was is_gradient_...)
        flag = ("is_activation_checkpointing" if hasattr(type(base), "is_activation_checkpointing")
                else "is_gradient_checkpointing")
        rec["activation_checkpointing"] = bool(getattr(base, flag, False))
    vocab = policy_cfg.get_text_config().vocab_size
    steps = []
    for k, name in enumerate(["learner_warmup"] + [f"learner_step_{i}" for i in range(1, max(1, timed_steps) + 1)]):
        group = synthetic_group(n, prompt, completion, vocab, seed=cfg.run.seed + k)
        with meter.phase(name, plan_gib=learner_est and learner_est.used_gib, plan_s=plan_step_s) as rec:
            metrics = learner.step([group])
        rec["metrics"] = {key: v for key, v in metrics.items() if isinstance(v, (int, float))}
        if metrics.get("skipped"):
            raise RuntimeError(f"{name}: the learner skipped the synthetic batch ({metrics})")
        steps.append(rec)
    timed = [r["seconds"] for r in steps[1:]]
    tmp = None
    if adapter_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="brushrl-gpu-smoke-")
        adapter_dir = Path(tmp.name) / "adapter"
    with meter.phase("save_adapter") as saved:
        learner.save_adapter(adapter_dir)
    with meter.phase("adapter_keys") as rec:
        check = adapter_check(adapter_dir, policy_cfg, cfg.learner.lora.target_modules, cfg.learner.lora.experts)
        rec.update(check)
    report["adapter_check"] = check
    if tmp is not None:
        tmp.cleanup()
    learner_peak = max((r["peak_gib"] for r in steps if r["peak_gib"] is not None), default=None)
    step_s = sum(timed) / len(timed)
    report["learner"] = {
        "step_s": step_s, "plan_step_s": plan_step_s,
        "projected_full_step_s": step_s * step_sequences / n + saved["seconds"],
        "plan_learn_s": cfg.resources.estimates.learn_s, "peak_gib": learner_peak, "left_allocated_gib": None,
    }
    learner.trainer.accelerator.free_memory()  # the accelerator keeps the model and optimizer it prepared
    del learner, model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        # what the policy left allocated (0 when freed): in HPSv3's peaks below, which would overstate them
        report["learner"]["left_allocated_gib"] = torch.cuda.memory_allocated() / GIB

    with meter.phase("hpsv3_build", plan_gib=hps_est and hps_est.parts.get("weights")) as rec:
        hps = random_model(hps_cfg, device, dtype).eval()
        rec["class"] = type(hps).__name__
    if hps_text is None:  # HPSV3_TOKENS in all: the image's merged patches, its two markers, the text
        v = hps_cfg.vision_config
        hps_text = HPSV3_TOKENS - 2 - (side // v.patch_size) ** 2 // v.spatial_merge_size ** 2
    inputs = hpsv3_inputs(hps_cfg, hps_batch, hps_text, side, device, dtype, seed=cfg.run.seed)
    if "mm_token_type_ids" not in inspect.signature(hps.model.forward).parameters:  # older transformers
        inputs.pop("mm_token_type_ids")
    with meter.phase("hpsv3_forward", plan_gib=hps_est and hps_est.derived_gib) as rec:
        with torch.inference_mode():
            out = hps.model(**inputs, use_cache=False)
        rec["tokens"] = list(inputs["input_ids"].shape)
        rec["hidden"] = list(out.last_hidden_state.shape)
        rec["finite"] = bool(torch.isfinite(out.last_hidden_state).all())  # random weights: informative only
    hps_peak = meter.phases[-1]["peak_gib"]
    del hps, out, inputs
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    total = None if learner_peak is None or hps_peak is None else learner_peak + hps_peak
    rec = {"phase": "gpu0_total", "seconds": None, "peak_gib": total, "plan_gib": row and row.used_gib,
           "gpu_total_gib": row and row.total_gib, "note": "learner peak + HPSv3 peak (two processes in a run)"}
    _finish(rec)
    meter.phases.append(rec)
    _log(f"gpu0_total: {_row(rec)}")
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--pipeline" in argv:
        from brushrl.rehearse.gpu_pipeline import main as pipeline  # imports nothing of Ray until it runs

        argv.remove("--pipeline")
        return pipeline(argv)
    ap = argparse.ArgumentParser(prog="python -m brushrl.rehearse.gpu_smoke", description=__doc__.split("\n\n")[0],
                                 epilog="--pipeline: the pipeline smoke instead (--pipeline --help: its options)")
    ap.add_argument("--config", default="configs/h200.yaml", help="run config YAML (default: %(default)s)")
    ap.add_argument("--out", default="runs/gpu_smoke_one.json", help="JSON report (default: %(default)s)")
    ap.add_argument("--dry", action="store_true", help="CPU, tiny twins, tiny sequences, memory not measured")
    ap.add_argument("--sequences", type=int, default=None,
                    help="samples per learner step (default: learner.micro_batch_size)")
    ap.add_argument("--prompt-tokens", type=int, default=None,
                    help="prompt tokens per sample (default: rollout.max_model_len - rollout.max_new_tokens)")
    ap.add_argument("--completion-tokens", type=int, default=None,
                    help="completion tokens per sample (default: rollout.max_new_tokens)")
    ap.add_argument("--adapter-dir", default=None, help="keep the saved adapter here (default: a temporary folder)")
    ap.add_argument("--timed-steps", type=int, default=2, help="timed learner steps after the warm-up (default: 2)")
    args = ap.parse_args(argv)
    if args.dry:  # never touch a GPU, even where one is present (GRPOLearner trains on one if it sees it)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    report: dict = {}
    status = 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        out.write_text(json.dumps(report, indent=2, default=str))

    try:
        run(args.config, dry=args.dry, sequences=args.sequences, prompt_tokens=args.prompt_tokens,
            completion_tokens=args.completion_tokens, adapter_dir=args.adapter_dir, report=report, on_phase=write,
            timed_steps=args.timed_steps)
        report["ok"] = bool(report.get("adapter_check", {}).get("passed"))
        status = 0 if report["ok"] else 1
    except Exception as exc:  # the report is the point: write what was measured, then fail
        report["ok"] = False
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()[-4000:]
        print(report["traceback"], file=sys.stderr, flush=True)
        status = 2 if isinstance(exc, MissingSupport) else 1
    write()
    if report.get("phases"):
        print(format_table(report), flush=True)
    if report.get("adapter_check") and not report["adapter_check"]["passed"]:
        print("adapter key check FAILED:", *report["adapter_check"]["problems"], sep="\n  ", flush=True)
    print(f"{'OK' if report['ok'] else 'FAILED'}: {out}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
