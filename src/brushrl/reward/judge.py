"""Pairwise VLM judge: how often a painting beats references drawn from the reference pool.

Protocol (after the HF reproduction's ``core/pairwise_judge.py``, made configurable):

* References: ``refs_per_tier`` paintings from each tier in ``tiers`` (``ReferencePool.sample``),
  drawn with the group seed, so every member of a GRPO group faces the same references (the draw
  alone moved a judge score from 0.250 to 0.625 on one painting in the reproduction).
* Each (painting, reference) pair is asked twice, the painting first (``A``) and second (``B``), to
  cancel position bias. Both orders won: 1; split: 0.5; both lost: 0. If either order fails
  (transport error, timeout, malformed answer) the comparison is dropped.
* The sample's score is the mean over its resolved comparisons, in [0, 1] on a ``1 / (2 * n_refs)``
  grid; None when no comparison resolved (an infrastructure failure, never 0).

Backends answer one question, "which image is the better watercolour, A or B?", through the
:class:`PairwiseBackend` protocol:

* :class:`OpenAIJudgeBackend`: any OpenAI-compatible ``/v1/chat/completions`` endpoint with image
  input (a vLLM server, a hosted provider), JSON-schema output ``{winner, reason}``.
* :class:`TransformersJudgeBackend`: an in-process ``transformers`` VLM, decoding the same JSON
  answer constrained to ``{"winner": "A"|"B"``.

Both images are resized to ``image_side`` pixels so that resolution (the pool stores thumbnails,
renders are full size) cannot decide a comparison.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol, Sequence

import httpx
from PIL import Image

from brushrl.config import JudgeConfig
from brushrl.pool import ReferencePool

log = logging.getLogger(__name__)

Winner = Literal["A", "B"]

#: JSON schema of a verdict (HF reproduction: winner enum A/B, reason at most 160 characters).
VERDICT_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["A", "B"]},
        "reason": {"type": "string", "maxLength": 160},
    },
    "required": ["winner", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Verdict:
    """One answer of a backend to one ordered pair.

    Attributes:
        winner: ``"A"`` (first image) or ``"B"``; None when the question could not be answered.
        cause: why ``winner`` is None: ``timeout``, ``connection``, ``http_<status>``,
            ``malformed`` or ``error:<ExceptionType>``; None when answered.
        reason: the judge's short reason (may be empty).
    """

    winner: Winner | None
    cause: str | None = None
    reason: str = ""


@dataclass
class JudgeScore:
    """A sample's judge result.

    Attributes:
        score: mean over resolved comparisons in [0, 1]; None if none resolved.
        resolved: comparisons (both orders answered) that count.
        dropped: causes of dropped comparisons, one count per failed order.
        stage: the reference curriculum stage the group was judged in (0: the base mix).
    """

    score: float | None
    resolved: int = 0
    dropped: Counter = field(default_factory=Counter)
    stage: int = 0


class ReferenceCurriculum:
    """Which references a group faces: the base mix, then ``cfg.curriculum``'s stages as the policy
    improves.

    The running mean is over the last ``cfg.curriculum_window`` groups' mean judge score (samples
    with a score only; a group with none is not observed). The stage is the last one whose
    ``min_score`` the running mean has reached; it never moves back, so a bad group after a stage
    change (the new references are harder, scores drop) does not flip the mix to and fro.
    Invariant: ``0 <= stage <= len(cfg.curriculum)``; stage 0 is ``refs_per_tier`` of each of
    ``cfg.tiers``. State is per judge actor and starts at 0 when the actor starts; a resumed run
    brings back its stage with :meth:`resume` (the trainer checkpoints the newest stage a group
    was judged in), not the running mean.
    """

    def __init__(self, cfg: JudgeConfig):
        self.cfg = cfg
        self.stage = 0
        self._recent: deque[float] = deque(maxlen=cfg.curriculum_window)
        self._lock = threading.Lock()

    def resume(self, stage: int) -> int:
        """Move to ``stage`` (a checkpointed run's stage) unless already past it; returns the stage.

        Raises:
            ValueError: ``stage`` is not in ``0..len(cfg.curriculum)``.
        """
        if not 0 <= stage <= len(self.cfg.curriculum):
            raise ValueError(f"curriculum stage {stage} is not in 0..{len(self.cfg.curriculum)} "
                             f"(reward.judge.curriculum has {len(self.cfg.curriculum)} stages)")
        with self._lock:
            self.stage = max(self.stage, stage)
            return self.stage

    def current(self) -> tuple[int, dict[str, int]]:
        """(stage, tier -> references per group) of the current stage, read together."""
        with self._lock:
            stage = self.stage
        if stage == 0:
            return 0, {t: self.cfg.refs_per_tier for t in self.cfg.tiers}
        return stage, dict(self.cfg.curriculum[stage - 1].refs)

    def running_mean(self) -> float | None:
        """Mean of the last ``curriculum_window`` group means, None before the first group."""
        with self._lock:
            return self._mean()

    def _mean(self) -> float | None:
        """``running_mean`` with the lock held."""
        return sum(self._recent) / len(self._recent) if self._recent else None

    def observe(self, scores: Sequence[float | None]) -> int:
        """Record one group's judge scores (None entries ignored); returns the stage after it."""
        values = [v for v in scores if v is not None]
        with self._lock:
            if values:
                self._recent.append(sum(values) / len(values))
            mean = self._mean() or 0.0
            for i, stage in enumerate(self.cfg.curriculum, start=1):
                if i > self.stage and mean >= stage.min_score:
                    log.info("judge curriculum: stage %d (running mean %.3f >= %.3f): refs %s",
                             i, mean, stage.min_score, stage.refs)
                    self.stage = i
            return self.stage


class PairwiseBackend(Protocol):
    """Answers ordered pairwise questions. Invariant: one Verdict per pair, in order; never raises
    for a per-pair failure (it becomes ``Verdict(None, cause)``)."""

    def compare_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Verdict]:
        """``pairs``: (image A PNG, image B PNG). Returns one Verdict per pair."""
        ...


def judge_prompt(cfg: JudgeConfig) -> str:
    """The question text: ``cfg.prompt`` with ``{criteria}`` filled in."""
    return cfg.prompt.format(criteria=cfg.criteria)


def resize_png(png: bytes, side: int) -> bytes:
    """Composite ``png`` on white and resize it to ``side`` x ``side`` RGB (Lanczos); PNG bytes.

    Raises:
        PIL.UnidentifiedImageError: ``png`` is not an image.
    """
    img = Image.open(io.BytesIO(png)).convert("RGBA")
    white = Image.new("RGBA", img.size, (255, 255, 255, 255))
    img = Image.alpha_composite(white, img).convert("RGB").resize((side, side), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def image_item(png: bytes) -> dict:
    """An OpenAI chat content item holding ``png`` as a base64 data URL."""
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}}


def parse_verdict(content: str | None) -> Verdict:
    """Parse a judge's message content ``{"winner": "A"|"B", "reason": str}``.

    Tolerates a fenced code block around the JSON. Anything else is ``Verdict(None, "malformed")``.
    """
    if not content:
        return Verdict(None, "malformed")
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return Verdict(None, "malformed")
    if not isinstance(data, dict) or data.get("winner") not in ("A", "B"):
        return Verdict(None, "malformed")
    return Verdict(data["winner"], None, str(data.get("reason", ""))[:160])


class OpenAIJudgeBackend:
    """Judge through an OpenAI-compatible chat endpoint (``POST {base_url}/chat/completions``).

    Request: one user message with the question text and both images as base64 PNG data URLs
    (image A first), ``temperature`` 0, ``max_tokens`` from config and ``response_format`` a strict
    JSON schema (:data:`VERDICT_SCHEMA`), as vLLM and OpenAI accept it.

    Failure handling, per pair, ``cfg.attempts`` tries at most:

    * timeout (``cfg.timeout_s`` for the whole request), connection errors (refused, reset, the
      server closing the connection without an answer), HTTP 429 and 5xx: retried after
      ``cfg.backoff_s * attempt`` seconds;
    * other HTTP 4xx (a bad request will stay bad) and a malformed answer (temperature 0 repeats
      it): not retried.

    Connections come from one ``httpx.Client`` pool shared by ``cfg.max_concurrency`` worker
    threads. httpcore checks an idle pooled connection before reuse and discards it when the far
    end has closed it; a connection that dies mid-request raises a transport error and is retried
    on a fresh one. (The reproduction lost two runs to a cached closed socket that broke every
    later call; here a closed connection costs at most one retry.)

    Where requests go: ``endpoints`` picks a base URL per request (``acquire() -> (i, url)``,
    ``release(i, failed_to_connect)``): a :class:`~brushrl.reward.judge_server.ReplicaRouter` over
    the servers brushrl serves, where a retry after a connection failure goes to another replica;
    by default ``cfg.base_url`` (:class:`~brushrl.reward.judge_server.StaticEndpoint`).

    Args:
        cfg: the judge config (``base_url`` required unless ``endpoints`` is given).
        transport: optional httpx transport (tests); default ``httpx.HTTPTransport(retries=1)``
            which also retries failed connects once.
        endpoints: see above.

    Raises:
        ValueError: neither ``cfg.base_url`` nor ``endpoints``.
    """

    def __init__(self, cfg: JudgeConfig, transport: httpx.BaseTransport | None = None, endpoints=None):
        from brushrl.reward.judge_server import StaticEndpoint

        if not cfg.base_url and endpoints is None:
            raise ValueError("reward.judge.base_url: required for the openai judge backend")
        self.cfg = cfg
        self.endpoints = endpoints or StaticEndpoint(cfg.base_url)
        headers = {}
        if cfg.api_key_env:
            key = os.environ.get(cfg.api_key_env)
            if not key:
                raise ValueError(f"reward.judge.api_key_env: environment variable {cfg.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(cfg.timeout_s),
            limits=httpx.Limits(
                max_connections=cfg.max_concurrency,
                max_keepalive_connections=cfg.max_concurrency,
                keepalive_expiry=30.0,
            ),
            transport=transport or httpx.HTTPTransport(retries=1),
        )
        self._pool = ThreadPoolExecutor(cfg.max_concurrency, thread_name_prefix="judge")
        self.prompt = judge_prompt(cfg)
        self.calls = Counter()
        self._lock = threading.Lock()

    def _payload(self, a: bytes, b: bytes) -> dict:
        return {
            "model": self.cfg.model,
            "messages": [{"role": "user", "content": [{"type": "text", "text": self.prompt}, image_item(a),
                                                      image_item(b)]}],
            "temperature": 0.0,
            "max_tokens": self.cfg.max_tokens,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "pairwise_verdict", "strict": True, "schema": VERDICT_SCHEMA},
            },
        }

    def _count(self, key: str) -> None:
        with self._lock:
            self.calls[key] += 1

    def compare(self, a: bytes, b: bytes) -> Verdict:
        """Ask one ordered pair (A = ``a``, B = ``b``); see the class docstring for retries."""
        content, cause = self.chat(self._payload(a, b))
        if cause is not None:
            return Verdict(None, cause)
        verdict = parse_verdict(content)
        self._count("ok" if verdict.winner else "malformed")
        return verdict

    def chat(self, payload: dict) -> tuple[str | None, str | None]:
        """POST one chat-completions ``payload`` with the class docstring's retries (the judge's
        verdicts and the judge critic's critiques, ``brushrl.reward.judge_critic``, both go here).

        Returns:
            ``(message content, None)`` on HTTP 200 (content None when the answer has none), or
            ``(None, cause)``: ``timeout``, ``connection``, ``http_<status>`` after the last try.
        """
        cause = "error:no_attempt"
        for attempt in range(1, self.cfg.attempts + 1):
            replica, url = self.endpoints.acquire()
            refused = False
            try:
                resp = self.client.post(f"{url}/chat/completions", json=payload)
            except httpx.TimeoutException:
                cause, retry = "timeout", True
            except httpx.TransportError as exc:
                log.debug("judge transport error: %r", exc)
                cause, retry, refused = "connection", True, True
            else:
                if resp.status_code == 200:
                    try:
                        content = resp.json()["choices"][0]["message"]["content"]
                    except (ValueError, KeyError, IndexError, TypeError):
                        content = None
                    self.endpoints.release(replica)
                    return content, None
                cause = f"http_{resp.status_code}"
                retry = resp.status_code == 429 or resp.status_code >= 500
            self.endpoints.release(replica, failed_to_connect=refused)
            self._count(cause)
            if not retry or attempt == self.cfg.attempts:
                break
            time.sleep(self.cfg.backoff_s * attempt)
        return None, cause

    def compare_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Verdict]:
        """All pairs concurrently (``cfg.max_concurrency`` requests in flight)."""
        return list(self._pool.map(lambda p: self.compare(*p), pairs))

    def close(self) -> None:
        """Close the connection pool and the worker threads."""
        self._pool.shutdown(wait=False)
        self.client.close()


class TransformersJudgeBackend:
    """Judge with an in-process ``transformers`` VLM (any ``AutoModelForImageTextToText`` with a
    processor whose chat template takes ``{"type": "image"}`` items, e.g. Qwen2-VL/Qwen3-VL).

    The model reads the question with image A then image B and answers in the same JSON as the
    endpoint backend. Decoding is constrained: the assistant turn is prefixed with
    ``{"winner": "`` and the winner is the argmax of the next-token logits over the tokens of
    ``A`` and ``B``, which is exactly what greedy (temperature 0) schema-constrained decoding of
    the ``winner`` field picks. No reason is generated (one forward pass per pair).

    Args:
        model: the VLM (eval mode is set here).
        processor: its processor (tokenizer + image processor + chat template).
        cfg: the judge config (prompt, criteria, ``batch_size``).

    Raises:
        ValueError: ``A`` or ``B`` is not a single token for this tokenizer.
    """

    ANSWER_PREFIX = '{"winner": "'

    def __init__(self, model, processor, cfg: JudgeConfig):
        self.model = model.eval()
        self.processor = processor
        self.cfg = cfg
        self.prompt = judge_prompt(cfg)
        tok = processor.tokenizer
        ids = [tok.encode(x, add_special_tokens=False) for x in ("A", "B")]
        if any(len(i) != 1 for i in ids):
            raise ValueError(f"judge tokenizer: 'A'/'B' must be single tokens, got {ids}")
        self.choice_ids = [ids[0][0], ids[1][0]]

    @classmethod
    def from_pretrained(cls, cfg: JudgeConfig) -> "TransformersJudgeBackend":
        """Load ``cfg.model`` (local path or hub id) with ``AutoProcessor`` and
        ``AutoModelForImageTextToText`` in ``cfg.dtype`` on ``cfg.device``."""
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(cfg.model)
        model = AutoModelForImageTextToText.from_pretrained(cfg.model, dtype=getattr(torch, cfg.dtype))
        return cls(model.to(cfg.device), processor, cfg)

    def _text(self) -> str:
        messages = [{
            "role": "user",
            "content": [{"type": "text", "text": self.prompt}, {"type": "image"}, {"type": "image"}],
        }]
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + self.ANSWER_PREFIX

    def compare_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Verdict]:
        """Batches of ``cfg.batch_size`` pairs, one forward pass each; a batch that raises gives
        ``Verdict(None, "error:<Type>")`` for its pairs."""
        import torch

        text = self._text()
        out: list[Verdict] = []
        step = self.cfg.batch_size
        for i in range(0, len(pairs), step):
            chunk = pairs[i : i + step]
            try:
                images = [Image.open(io.BytesIO(png)).convert("RGB") for pair in chunk for png in pair]
                self.processor.tokenizer.padding_side = "left"
                inputs = self.processor(text=[text] * len(chunk), images=images, padding=True, return_tensors="pt")
                inputs = inputs.to(self.model.device)
                with torch.inference_mode():
                    logits = self.model(**inputs).logits[:, -1, self.choice_ids]
                picks = logits.argmax(dim=-1).tolist()
                out.extend(Verdict("AB"[p], None, "") for p in picks)
            except Exception as exc:  # noqa: BLE001 - a failed batch drops its comparisons, never the run
                log.warning("judge batch failed: %r", exc)
                out.extend(Verdict(None, f"error:{type(exc).__name__}") for _ in chunk)
        return out


class PairwiseJudge:
    """Scores paintings by pairwise comparison with pool references (module docstring).

    Args:
        pool: the reference pool.
        backend: a :class:`PairwiseBackend`.
        cfg: the judge config (``tiers``, ``refs_per_tier``, ``image_side``).

    Raises:
        ValueError: the pool has no reference in ``cfg.tiers``, or none for a curriculum stage.
    """

    def __init__(self, pool: ReferencePool, backend: PairwiseBackend, cfg: JudgeConfig):
        self.pool, self.backend, self.cfg = pool, backend, cfg
        if not any(pool.tier(t) for t in cfg.tiers):
            raise ValueError(f"reward.judge.tiers: pool {pool.root} has no reference in tiers {cfg.tiers}")
        for i, stage in enumerate(cfg.curriculum, start=1):
            if not any(pool.tier(t) for t, k in stage.refs.items() if k):
                raise ValueError(f"reward.judge.curriculum[{i - 1}]: pool {pool.root} has no reference in tiers "
                                 f"{sorted(t for t, k in stage.refs.items() if k)}")
        self.curriculum = ReferenceCurriculum(cfg)
        tiers = set(cfg.tiers) | {t for stage in cfg.curriculum for t in stage.refs}
        self._refs = {e.id: resize_png(e.path.read_bytes(), cfg.image_side) for e in pool.entries if e.tier in tiers}

    def references(self, seed: int) -> list[str]:
        """Reference ids for a group in the curriculum's current mix (same seed and stage, same
        references)."""
        return [e.id for e in self.pool.draw(self.curriculum.current()[1], seed)]

    def score_many(self, pngs: Sequence[bytes], seed: int) -> list[JudgeScore]:
        """Judge a group's paintings against the references drawn with ``seed`` in the curriculum's
        current mix; the group's scores then feed the curriculum (:class:`ReferenceCurriculum`).

        Args:
            pngs: the group's rendered PNGs (any size; RGBA composited on white).
            seed: the group seed.

        Returns:
            One :class:`JudgeScore` per PNG; an unreadable PNG gets ``score`` None with cause
            ``bad_image``. Never raises for a backend failure.
        """
        stage, mix = self.curriculum.current()
        refs = [self._refs[e.id] for e in self.pool.draw(mix, seed)]
        images: list[bytes | None] = []
        for png in pngs:
            try:
                images.append(resize_png(png, self.cfg.image_side))
            except Exception:  # noqa: BLE001 - a bad image is that sample's None
                images.append(None)
        pairs, index = [], []
        for i, img in enumerate(images):
            if img is None:
                continue
            for j, ref in enumerate(refs):
                pairs.append((img, ref))  # painting is A
                pairs.append((ref, img))  # painting is B
                index.append((i, j))
        verdicts = self.backend.compare_many(pairs)
        results = [JudgeScore(None, stage=stage) for _ in pngs]
        values: list[list[float]] = [[] for _ in pngs]
        for k, (i, _j) in enumerate(index):
            first, second = verdicts[2 * k], verdicts[2 * k + 1]
            failed = [v.cause or "malformed" for v in (first, second) if v.winner is None]
            if failed:
                results[i].dropped.update(failed)
                continue
            values[i].append(((first.winner == "A") + (second.winner == "B")) / 2)
        for i, img in enumerate(images):
            if img is None:
                results[i].dropped["bad_image"] += 1
            elif values[i]:
                results[i].score = sum(values[i]) / len(values[i])
                results[i].resolved = len(values[i])
        self.curriculum.observe([r.score for r in results])
        return results


def make_backend(cfg: JudgeConfig, endpoints=None) -> PairwiseBackend:
    """The backend named by ``cfg.backend`` (``openai`` or ``transformers``); ``endpoints``: where the
    openai backend sends requests (see :class:`OpenAIJudgeBackend`)."""
    if cfg.backend == "openai":
        return OpenAIJudgeBackend(cfg, endpoints=endpoints)
    return TransformersJudgeBackend.from_pretrained(cfg)
