"""The GPU-memory plan: what each GPU-using actor needs, derived from its model's architecture
(``brushrl.plan.models``), which GPU Ray puts it on, and whether every GPU holds what lands there.

Estimates (GiB = 2**30 bytes), each a sum of named parts:

* **learner** (:func:`learner_memory`, per learner worker, ``learner.workers`` of them with
  ``strategy: deepspeed``): model states from ``brushrl.learner.memory`` (the ZeRO paper's
  accounting: weights ``2 x params``, and for the LoRA parameters gradients 2 + Adam state 12
  bytes, 16 bytes in all as PEFT's fp32 adapter over a bf16 base; the LoRA parameters counted on
  the policy's meta-device module tree with the learner's own target rule (``brushrl.plan.lora``),
  the architecture formula ``ModelFigures.lora_parameters`` only where no config can be built;
  ZeRO-2 divides gradients and
  optimizer state by the workers, ZeRO-3 also the weights; offload moves them to CPU memory);
  checkpointed activations of one micro-batch,
  ``2 s b h L`` bytes of layer inputs plus one recomputed layer ``s b (34 h + 4 w)`` bytes
  (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  eq. 2 with full recomputation and flash attention, so no ``5as/h`` term; ``w`` the widest MoE /
  MLP intermediate, in 16-bit) where ``s`` = ``rollout.max_model_len`` (or ``max_new_tokens`` +
  :data:`PROMPT_TOKENS`), ``b`` = ``learner.micro_batch_size``; TRL's fused LM head never holds the
  ``(b, s, vocab)`` logits; plus :data:`CUDA_CONTEXT_GIB`.
* **vLLM engines** (rollout, judge servers; :func:`vllm_memory`): vLLM takes
  ``gpu_memory_utilization x`` the GPU's total memory and refuses to start when less is free
  (vLLM docs, "GPU memory utilization": requested = total x utilization, checked against free
  memory); inside that share it needs weights (``/ tensor_parallel_size``), the KV cache for
  ``max_num_seqs`` sequences of ``max_model_len`` tokens (``kv_bytes_per_token`` = 2 x attention
  layers x KV heads x head dim x bytes), the linear-attention state of each sequence, the profile
  run's activations (:data:`VLLM_BATCHED_TOKENS` tokens x the widest layer, and fp32 logits of
  ``max_num_seqs`` rows), CUDA graphs (:data:`VLLM_GRAPH_GIB`, 0 with ``enforce_eager``), a
  CUDA context, and for the rollout engine its LoRA buffers (:func:`vllm_lora_bytes`). What it
  holds on the GPU is the larger of its share and that need.
* **HF inference** (HPSv3, the in-process judge; :func:`inference_memory`): weights + one layer's
  activations for ``batch x seq`` tokens + a CUDA context.

A typed ``resources.<actor>.gpu_memory_gb`` raises an estimate, never lowers it.

Placement follows Ray's own GPU assignment on one node (``NodeResourceInstanceSet::TryAllocate``,
ray ``src/ray/common/scheduling/resource_instance_set.cc``): a whole-number ``num_gpus`` takes
that many fully free GPUs, lowest index first; a fraction takes the best-fitting GPU (least room
left after it). Actors are taken in the order the trainer starts them (learner, rollout, judge
servers, HPSv3, in-process judge, pool scorer). A GPU whose actors' memory exceeds its own is an
error naming the actor that did not fit and by how much.

Headroom (:func:`headroom_problem`, :func:`_utilization_problems`): what is counted is not all a process holds (the caching
allocator's fragmentation, NCCL buffers: ``resources.gpu_memory_refuse``'s docstring), so a GPU
planned above ``resources.gpu_memory_refuse`` of its memory (0.95) is an error, above
``resources.gpu_memory_warn`` (0.90) a warning, and a vLLM engine whose ``gpu_memory_utilization``
alone exceeds the refuse fraction is an error naming that field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from brushrl.config import ActorPlacement, BrushRLConfig
from brushrl.hub.weights import hpsv3_base
from brushrl.plan.lora import LoraCount
from brushrl.plan.models import DTYPE_BYTES, ModelFigures, UnknownModel, figures_from_config, model_figures, tiny_config

GIB = 2**30
#: Memory of one GPU by ``resources.nodes.<kind>.gpu_type``, GiB: nvidia-smi's memory.total in MiB
#: / 1024 (H200 143771 MiB, H100 80 GB 81559, A100 80 GB 81920, L40S 46068, L4 23034).
GPU_MEMORY_GIB: dict[str, float] = {"H200": 143771 / 1024, "H100": 81559 / 1024, "A100": 81920 / 1024,
                                    "L40S": 46068 / 1024, "L4": 23034 / 1024}
#: CUDA context + cuBLAS/cuDNN workspaces of one process. An assumption (PyTorch's context alone is
#: 0.3-0.5 GiB on recent drivers); the GPU smoke (``brushrl.rehearse.gpu_smoke``) measures the real one.
CUDA_CONTEXT_GIB = 1.0
#: vLLM's CUDA graphs (its log's "Graph capturing finished ... took X GiB": 0.5-2 GiB for 30B-class
#: models on one GPU; an assumption until measured).
VLLM_GRAPH_GIB = 1.5
#: Tokens of vLLM's profile run (its ``max_num_batched_tokens`` default with chunked prefill, 8192).
VLLM_BATCHED_TOKENS = 8192
#: Prompt tokens assumed when ``rollout.max_model_len`` is unset (the built-in system prompt is
#: ~400 tokens at chars/4).
PROMPT_TOKENS = 1024
#: HPSv3's tokens per image: 448 x 448 (``min_pixels = max_pixels = 256 x 28 x 28``) -> 256 merged
#: patches, plus its instruction text (~300 tokens).
HPSV3_TOKENS = 640
#: Adapters the rollout engine holds at once: ``VLLMEngine`` passes ``max_loras=1``
#: (``brushrl/rollout/vllm_engine.py``); vLLM preallocates its LoRA stacks for that many.
VLLM_MAX_LORAS = 1
#: Slack for float rounding when a share is compared with a fraction (0.9 x total / total).
_EPS = 1e-9


def _gib(n_bytes: float) -> float:
    return n_bytes / GIB


@dataclass
class Estimate:
    """One actor's GPU memory per GPU it occupies.

    Attributes:
        component: ``learner``, ``rollout``, ``hpsv3``, ``judge[i]``, ...
        model: the model id or path the figures came from.
        parts: part name -> GiB (sums to :attr:`derived_gib`).
        typed_gib: ``resources.<actor>.gpu_memory_gb`` if set.
        reserved_gib: for vLLM, ``gpu_memory_utilization x`` the GPU's memory (what it takes).
        note: how the figures were obtained (e.g. ``params from safetensors``).
    """

    component: str
    model: str
    parts: dict[str, float]
    typed_gib: float | None = None
    reserved_gib: float = 0.0
    note: str = ""

    @property
    def derived_gib(self) -> float:
        return sum(self.parts.values())

    @property
    def used_gib(self) -> float:
        """What it holds: the largest of derived need, vLLM's share and the typed figure."""
        return max(self.derived_gib, self.reserved_gib, self.typed_gib or 0.0)


def learner_lora(fig: ModelFigures, cfg: BrushRLConfig) -> LoraCount:
    """The learner's trainable LoRA parameters for policy ``cfg.policy.model``: counted on its
    meta-device module tree (``brushrl.plan.lora.policy_lora``), or, where no config of the model can
    be built (not a local folder, not shipped, a ``model_type`` this transformers lacks), the
    architecture formula ``fig.lora_parameters`` (which adapts router, shared expert and vision
    tower too, and never the routed experts).

    Raises:
        LoraTargetError: ``learner.lora.experts`` on a model without routed experts.
    """
    from brushrl.plan.lora import LoraTargetError, policy_lora

    lora = cfg.learner.lora
    tiny = tiny_config(cfg.policy.tiny) if cfg.policy.model == "tiny" else None
    try:
        return policy_lora(cfg.policy.model, lora.r, lora.target_modules, lora.experts, tiny)
    except LoraTargetError:
        raise
    except (LookupError, ValueError, OSError, ImportError):
        return LoraCount(fig.lora_parameters(lora.r), sum(lin.count for lin in fig.lora_linears), "formula")


def learner_memory(fig: ModelFigures, cfg: BrushRLConfig, dtype_bytes: int = 2,
                   lora: LoraCount | None = None) -> dict[str, float]:
    """GiB per learner worker: its model states under ``cfg.learner``'s strategy (weights,
    gradients, optimizer state: ``brushrl.learner.memory.learner_memory_per_worker``, the ZeRO
    paper's accounting, so ZeRO-2 divides gradients and optimizer state and ZeRO-3 also the weights
    by ``learner.workers``, and offloaded states leave the GPU), one micro-batch's checkpointed
    activations and a CUDA context (module docstring). ``dtype_bytes``: 2 (a GPU learner trains the
    bf16 base). ``lora``: the trainable parameters; None: :func:`learner_lora`."""
    from brushrl.learner.memory import learner_memory_per_worker

    lc, ds = cfg.learner, cfg.learner.deepspeed
    lora = (lora or learner_lora(fig, cfg)).params
    states = learner_memory_per_worker(
        fig.weight_bytes(dtype_bytes) / dtype_bytes, lora, strategy=lc.strategy, zero_stage=ds.zero_stage,
        workers=lc.workers, dtype="bf16" if dtype_bytes == 2 else "fp32", offload_optimizer=ds.offload_optimizer,
        offload_params=ds.offload_params)
    s = cfg.rollout.max_model_len or (cfg.rollout.max_new_tokens + PROMPT_TOKENS)
    b = lc.micro_batch_size
    h, L, w = fig.hidden_size, fig.num_layers, fig.widest_layer
    return {
        "weights": _gib(states.weights),
        "grads": _gib(states.grads),
        "optimizer": _gib(states.optimizer),
        "activations": _gib(2 * s * b * h * L + s * b * (34 * h + 4 * w)),
        "cuda": CUDA_CONTEXT_GIB,
    }


def vllm_lora_bytes(lora_params: int, dtype_bytes: int, max_loras: int = VLLM_MAX_LORAS) -> int:
    """Bytes of the LoRA stacks a vLLM engine with ``enable_lora`` preallocates for ``max_loras``
    adapters of rank ``max_lora_rank`` = ``learner.lora.r``.

    vLLM wraps each module it adapts (brushrl restricts them to the ones the learner trains:
    ``lora_target_modules``, ``brushrl.rollout.vllm_lora``) and its ``create_lora_weights`` allocates
    ``lora_a_stacked`` ``(max_loras, 1, rank, input_size)`` per slice and ``lora_b_stacked``
    ``(max_loras, 1, output_slice, rank)`` per output slice, zeros in ``lora_dtype`` (``auto``: the
    model's dtype) (vllm 0.32 ``vllm/lora/layers/base_linear.py``, ``column_parallel_linear.py``;
    fused experts ``(max_loras, experts, rank, in)`` / ``(max_loras, experts, out, rank)``,
    ``vllm/lora/layers/fused_moe.py``). A packed layer (``qkv_proj``) has one A per part and B
    slices summing to its output, so each wrapped module costs ``rank x (in + out)`` elements per
    adapter, as in PEFT: the learner's LoRA parameter count x ``max_loras`` x bytes (tensor
    parallelism aside: the rollout engine runs on one GPU)."""
    return lora_params * max_loras * dtype_bytes


def vllm_memory(fig: ModelFigures, *, dtype_bytes: int, max_num_seqs: int, max_model_len: int,
                tensor_parallel: int = 1, enforce_eager: bool = False, lora_bytes: float = 0.0) -> dict[str, float]:
    """GiB per GPU a vLLM engine needs inside its share (module docstring); ``lora_bytes``: its LoRA
    stacks (:func:`vllm_lora_bytes`; 0 for an engine serving no adapter)."""
    tokens = max_num_seqs * max_model_len
    act = VLLM_BATCHED_TOKENS * fig.widest_layer * 2 * 2 + max_num_seqs * fig.vocab_size * 4 * 2
    return {
        "weights": _gib(fig.weight_bytes(dtype_bytes)) / tensor_parallel,
        "kv cache": _gib(tokens * fig.kv_bytes_per_token(dtype_bytes)) / tensor_parallel,
        "linear state": _gib(max_num_seqs * fig.linear_state_per_seq * dtype_bytes) / tensor_parallel,
        "activations": _gib(act),
        "cuda graphs": 0.0 if enforce_eager else VLLM_GRAPH_GIB,
        "lora buffers": _gib(lora_bytes),
        "cuda": CUDA_CONTEXT_GIB,
    }


def inference_memory(fig: ModelFigures, *, dtype_bytes: int, batch: int, seq: int) -> dict[str, float]:
    """GiB of a transformers model answering ``batch`` sequences of ``seq`` tokens (no grad): weights,
    one layer's activations (input, output and the widest intermediate), CUDA context."""
    return {
        "weights": _gib(fig.weight_bytes(dtype_bytes)),
        "activations": _gib(batch * seq * (4 * fig.hidden_size + 2 * fig.widest_layer) * dtype_bytes),
        "cuda": CUDA_CONTEXT_GIB,
    }


@dataclass
class GpuUse:
    """One actor's claim on one GPU: Ray's GPU ``share`` and the memory it holds there."""

    component: str
    share: float
    gib: float


@dataclass
class GpuRow:
    """One physical GPU of the first node of a kind (index as ``CUDA_VISIBLE_DEVICES`` numbers it)."""

    node: str
    index: int
    gpu_type: str | None
    total_gib: float
    uses: list[GpuUse] = field(default_factory=list)

    @property
    def used_gib(self) -> float:
        return sum(u.gib for u in self.uses)

    @property
    def share(self) -> float:
        return sum(u.share for u in self.uses)

    @property
    def label(self) -> str:
        return f"{self.node}:{self.index}"


@dataclass
class MemoryPlan:
    """Per-actor estimates, the per-GPU table, and the problems (``errors`` make the plan fail)."""

    estimates: list[Estimate]
    gpus: list[GpuRow]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _GpuActor:
    """A GPU-using actor to place: its ``resources`` field, Ray GPU ask, estimate."""

    field: str
    placement: ActorPlacement
    num_gpus: float
    estimate: Estimate
    gpus_needed: int = 1


def gpu_memory_gib(cfg: BrushRLConfig, node: str) -> float | None:
    """Memory of one GPU of node kind ``node``: its ``gpu_memory_gb`` or its ``gpu_type``'s."""
    kind = cfg.resources.nodes[node]
    if kind.gpu_memory_gb:
        return kind.gpu_memory_gb
    return GPU_MEMORY_GIB.get((kind.gpu_type or "").upper())


def _bytes(dtype: str, fig: ModelFigures) -> int:
    if dtype in ("auto", None):
        dtype = fig.dtype
    return DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 2)


class _Figures:
    """Model figures by name, looked up once; unknown models become errors."""

    def __init__(self, errors: list[str], tiny=None, warnings: list[str] | None = None):
        self.errors, self.cache, self.tiny = errors, {}, tiny
        self.warnings = warnings if warnings is not None else []
        self.lora_count: LoraCount | None = None

    def lora(self, fig: ModelFigures, cfg: BrushRLConfig) -> LoraCount:
        """The learner's LoRA count (:func:`learner_lora`), built once for the learner and the engine.
        ``experts`` on a dense model becomes an error (and a zero count); the formula fallback with
        ``experts`` a warning (the formula has no experts)."""
        from brushrl.plan.lora import LoraTargetError

        if self.lora_count is None:
            try:
                self.lora_count = learner_lora(fig, cfg)
            except LoraTargetError as exc:
                self.errors.append(str(exc))
                self.lora_count = LoraCount(0, 0, "none")
            if self.lora_count.source == "formula" and cfg.learner.lora.experts:
                self.warnings.append(f"learner.lora.experts: no config to build {cfg.policy.model!r} from, so the "
                                     f"LoRA count is the formula's, which leaves the routed experts out")
        return self.lora_count

    def get(self, model: str, what: str) -> ModelFigures | None:
        if model not in self.cache:
            try:
                if model == "tiny":
                    self.cache[model] = figures_from_config("tiny", tiny_config(self.tiny))
                    return self.cache[model]
                self.cache[model] = model_figures(model)
            except UnknownModel as exc:
                self.errors.append(f"{what}: {exc}")
                self.cache[model] = None
        return self.cache[model]


def _gpu_actors(cfg: BrushRLConfig, figures: _Figures) -> list[_GpuActor]:
    """The GPU-using actors of ``cfg`` in the trainer's start order, each with its estimate."""
    res, out = cfg.resources, []
    total = {name: gpu_memory_gib(cfg, name) or 0.0 for name in res.nodes}

    def typed(p: ActorPlacement) -> float | None:
        return p.gpu_memory_gb

    if res.learner.num_gpus:
        fig = figures.get(_policy_model(cfg), "resources.learner")
        if fig:
            lora = figures.lora(fig, cfg)
            workers = cfg.learner.workers
            for r in range(workers):  # one per DeepSpeed rank, each its own GPU (resources.learner is per worker)
                out.append(_GpuActor("learner", res.learner, res.learner.num_gpus, Estimate(
                    "learner" if workers == 1 else f"learner[{r}]", fig.name, learner_memory(fig, cfg, lora=lora),
                    typed(res.learner), note=_note(fig, lora))))
    if res.rollout.num_gpus and cfg.rollout.backend == "vllm":
        fig = figures.get(_policy_model(cfg), "resources.rollout")
        if fig:
            lora = figures.lora(fig, cfg)
            dtype_bytes = _bytes(cfg.policy.dtype, fig)
            parts = vllm_memory(fig, dtype_bytes=dtype_bytes, max_num_seqs=cfg.rollout.max_num_seqs,
                                max_model_len=cfg.rollout.max_model_len or fig.max_position_embeddings,
                                lora_bytes=vllm_lora_bytes(lora.params, dtype_bytes))
            share = cfg.rollout.gpu_memory_utilization * total[res.rollout.node]
            n = cfg.rollout.replicas  # each replica its own engine (max_num_seqs is per replica)
            for i in range(n):
                out.append(_GpuActor("rollout", res.rollout, res.rollout.num_gpus, Estimate(
                    "rollout" if n == 1 else f"rollout[{i}]", fig.name, parts, typed(res.rollout), share,
                    _note(fig, lora))))
    elif res.rollout.num_gpus:
        fig = figures.get(_policy_model(cfg), "resources.rollout")
        if fig:
            parts = inference_memory(fig, dtype_bytes=_bytes(cfg.policy.dtype, fig),
                                     batch=cfg.rollout.group_size,
                                     seq=cfg.rollout.max_new_tokens + PROMPT_TOKENS)
            out.append(_GpuActor("rollout", res.rollout, res.rollout.num_gpus,
                                 Estimate("rollout", fig.name, parts, typed(res.rollout), note=_note(fig))))
    rew = cfg.reward
    judge = rew.judge
    if "judge" in rew.scorers and judge.serve is not None and res.judge.num_gpus:
        serve = judge.serve
        fig = figures.get(serve.weights or judge.model, "resources.judge")
        if fig:
            parts = vllm_memory(fig, dtype_bytes=_bytes(serve.dtype, fig), max_num_seqs=serve.max_num_seqs,
                                max_model_len=serve.max_model_len, tensor_parallel=serve.tensor_parallel_size,
                                enforce_eager=serve.enforce_eager)
            share = serve.gpu_memory_utilization * total[res.judge.node]
            for i in range(serve.replicas):
                out.append(_GpuActor("judge", res.judge, res.judge.num_gpus, Estimate(
                    f"judge[{i}]", fig.name, parts, typed(res.judge), share, _note(fig)),
                    gpus_needed=serve.tensor_parallel_size))
    if "hpsv3" in rew.scorers and res.hpsv3.num_gpus:
        fig = figures.get(hpsv3_base(rew.hpsv3),  # reward.hpsv3.base_model, else its YAML's
                          "resources.hpsv3")
        if fig:
            parts = inference_memory(fig, dtype_bytes=2, batch=rew.hpsv3.batch_size, seq=HPSV3_TOKENS)
            out.append(_GpuActor("hpsv3", res.hpsv3, res.hpsv3.num_gpus,
                                 Estimate("hpsv3", fig.name, parts, typed(res.hpsv3), note=_note(fig))))
    if "judge" in rew.scorers and judge.backend == "transformers" and res.judge.num_gpus:
        fig = figures.get(judge.model, "resources.judge")
        if fig:
            side_tokens = (judge.image_side // 28) ** 2 * 2 + 256
            parts = inference_memory(fig, dtype_bytes=DTYPE_BYTES[judge.dtype], batch=judge.batch_size, seq=side_tokens)
            out.append(_GpuActor("judge", res.judge, res.judge.num_gpus,
                                 Estimate("judge", fig.name, parts, typed(res.judge), note=_note(fig))))
    return out


def _policy_model(cfg: BrushRLConfig) -> str:
    return cfg.policy.model



def _note(fig: ModelFigures, lora: LoraCount | None = None) -> str:
    """How the figures were obtained: parameters and their source, the LoRA count and its source."""
    note = f"{fig.num_parameters / 1e9:.2f} B params ({fig.parameters_source})"
    if lora is not None:
        note += f", LoRA {lora.params / 1e6:.1f} M ({lora.source})"
    return note


def _assign(row_free: list[float], ask: float, count: int) -> list[int] | None:
    """Ray's choice of GPU indices for a GPU ask (module docstring); None when it does not fit.
    ``row_free``: free Ray GPU share per index, updated in place."""
    if ask >= 1:
        n = int(round(ask))
        free = [i for i, f in enumerate(row_free) if f >= 1 - 1e-9][:n]
        if len(free) < n:
            return None
        for i in free:
            row_free[i] = 0.0
        return free
    fits = [(f - ask, i) for i, f in enumerate(row_free) if f + 1e-9 >= ask]
    if not fits:
        return None
    _, best = min(fits)
    row_free[best] -= ask
    return [best]


def build_memory_plan(cfg: BrushRLConfig) -> MemoryPlan:
    """Estimate every GPU-using actor of ``cfg``, place it on the GPUs of the first node of its kind
    as Ray would, and check every GPU's memory. Never raises: problems are in ``errors``."""
    errors: list[str] = []
    warnings: list[str] = []
    actors = _gpu_actors(cfg, _Figures(errors, cfg.policy.tiny, warnings))
    rows: dict[str, list[GpuRow]] = {}
    free_share: dict[str, list[float]] = {}
    for name, kind in cfg.resources.nodes.items():
        if not kind.gpus:
            continue
        total = gpu_memory_gib(cfg, name)
        if total is None:
            errors.append(f"resources.nodes.{name}: GPU memory unknown for gpu_type {kind.gpu_type!r}: set "
                          f"gpu_memory_gb (known types: {sorted(GPU_MEMORY_GIB)})")
            total = 0.0
        rows[name] = [GpuRow(name, i, kind.gpu_type, total) for i in range(kind.gpus)]
        free_share[name] = [1.0] * kind.gpus
    for a in actors:
        est = a.estimate
        if a.field == "learner" and a.num_gpus > 1:
            warnings.append(f"resources.learner.num_gpus={a.num_gpus:g}: the learner trains on one GPU; "
                            f"the others stay idle")
        if a.gpus_needed > 1 and a.num_gpus != a.gpus_needed:
            errors.append(f"resources.{a.field}.num_gpus={a.num_gpus:g}: {est.component} runs tensor parallel "
                          f"over {a.gpus_needed} GPUs and needs num_gpus={a.gpus_needed}")
            continue
        if est.reserved_gib:
            errors.extend(_utilization_problems(cfg, a))
        if est.reserved_gib and est.derived_gib > est.reserved_gib + 1e-9:
            share_field = _share_field(a)
            node_total = gpu_memory_gib(cfg, a.placement.node) or 0.0
            need = est.derived_gib / node_total if node_total else math.inf
            errors.append(
                f"{est.component}: vLLM would not start: its share {est.reserved_gib:.1f} GiB ({share_field} of "
                f"{node_total:.1f} GiB) < the {est.derived_gib:.1f} GiB it needs ({_parts(est)}); raise "
                f"{share_field} to >= {need:.2f}, or lower max_num_seqs / max_model_len")
        if a.placement.node not in rows:
            errors.append(f"resources.{a.field}: {est.component} asks for {a.num_gpus:g} GPU(s) on a "
                          f"{a.placement.node} node, which has none")
            continue
        idx = _assign(free_share[a.placement.node], a.num_gpus, a.gpus_needed)
        if idx is None:
            continue  # the Ray-share error is brushrl.plan.resources' (``does not fit ... GPU``)
        per_gpu_share = a.num_gpus / len(idx)
        for i in idx:
            row = rows[a.placement.node][i]
            left = row.total_gib - row.used_gib
            if est.used_gib > left + 1e-9:
                others = " + ".join(f"{u.component} {u.gib:.1f}" for u in row.uses)
                room = (f"only {max(left, 0):.1f} GiB is left after {others} GiB" if others
                        else f"the GPU holds {row.total_gib:.1f} GiB")
                errors.append(
                    f"GPU {row.label} ({row.gpu_type or 'GPU'}, {row.total_gib:.1f} GiB) over-subscribed: "
                    f"{est.component} needs {est.used_gib:.1f} GiB ({_parts(est)}) but {room}: "
                    f"short by {est.used_gib - left:.1f} GiB")
            row.uses.append(GpuUse(est.component, per_gpu_share, est.used_gib))
    gpus = [r for rs in rows.values() for r in rs]
    for row in gpus:
        problem = headroom_problem(row, cfg.resources.gpu_memory_warn, cfg.resources.gpu_memory_refuse)
        if problem:
            (errors if problem[0] == "error" else warnings).append(problem[1])
    return MemoryPlan([a.estimate for a in actors], gpus, errors, warnings)


def _share_field(a: _GpuActor) -> str:
    """The config field of a vLLM actor's ``gpu_memory_utilization``."""
    return "rollout.gpu_memory_utilization" if a.field == "rollout" else "reward.judge.serve.gpu_memory_utilization"


def _utilization_problems(cfg: BrushRLConfig, a: _GpuActor) -> list[str]:
    """An error when a vLLM actor's ``gpu_memory_utilization`` alone is over
    ``resources.gpu_memory_refuse``: vLLM takes that share whatever it needs (module docstring), so
    the GPU is over the refuse fraction however little else it holds."""
    field_name = _share_field(a)
    util = cfg.rollout.gpu_memory_utilization if a.field == "rollout" else cfg.reward.judge.serve.gpu_memory_utilization
    refuse = cfg.resources.gpu_memory_refuse
    if util <= refuse + _EPS:
        return []
    return [f"{field_name}={util:g}: {a.estimate.component}'s vLLM share alone is over resources.gpu_memory_refuse "
            f"{refuse:g} of its GPU, leaving no room for what the plan does not count (allocator fragmentation, "
            f"NCCL buffers); set {field_name} <= {refuse:g} (vLLM's own default: 0.9, 0.92 in vllm 0.32)"]


def headroom_problem(row: GpuRow, warn: float, refuse: float) -> tuple[str, str] | None:
    """``("error", message)`` when ``row`` is planned above ``refuse`` of its memory, ``("warning",
    message)`` above ``warn``, else None (``resources.gpu_memory_refuse`` / ``gpu_memory_warn``; the
    reasons in their docstrings). A GPU over its whole memory is left to the over-subscription error."""
    if not row.uses or not row.total_gib or row.used_gib > row.total_gib + _EPS:
        return None
    frac = row.used_gib / row.total_gib
    if frac > refuse + _EPS:
        level, limit, name = "error", refuse, "gpu_memory_refuse"
    elif frac > warn + _EPS:
        level, limit, name = "warning", warn, "gpu_memory_warn"
    else:
        return None
    uses = " + ".join(f"{u.component} {u.gib:.1f}" for u in row.uses)
    return level, (
        f"GPU {row.label} ({row.gpu_type or 'GPU'}, {row.total_gib:.1f} GiB) planned at {row.used_gib:.1f} GiB "
        f"({uses}) = {frac:.3f} of its memory, over resources.{name} {limit:g} ({limit * row.total_gib:.1f} GiB): "
        f"the caching allocator's fragmentation and NCCL buffers are not in the estimate; move an actor to another "
        f"GPU or shrink it (micro_batch_size, max_num_seqs, max_model_len, gpu_memory_utilization)")


def format_parts(parts: dict[str, float]) -> list[str]:
    """``name GiB`` of each non-zero part: one decimal, two below 0.05 GiB (so small parts, LoRA
    gradients or vLLM's LoRA stacks, show rather than vanish)."""
    return [f"{k} {v:.1f}" if v >= 0.05 else f"{k} {v:.2f}" for k, v in parts.items() if v >= 0.005]


def _parts(est: Estimate) -> str:
    parts = format_parts(est.parts)
    if est.reserved_gib:
        parts.append(f"vLLM share {est.reserved_gib:.1f}")
    if est.typed_gib:
        parts.append(f"typed {est.typed_gib:.1f}")
    return ", ".join(parts)
