"""The judge model as a critic (``reward.critic.kind: judge``): a short written critique of a painting
against one reference of the same subject, in its own request to the judge's endpoint.

RRVF (arXiv 2507.20766) appends a stronger model's text critique of the render as the next turn;
here that model is the judge already serving the pairwise verdicts (``reward.judge``: the same
servers, through the same :class:`~brushrl.reward.judge.OpenAIJudgeBackend` with its retries and
replica routing), asked a different question: ``reward.critic.judge_prompt`` with image A (the
painting) and image B (a reference of the subject, drawn with the group seed from the subject's
entries of the judge's tiers, or from all of them when the subject has none), both resized to
``reward.judge.image_side``. The answer is JSON ``{"critique": str, "done": bool}``
(:data:`CRITIQUE_SCHEMA`, guided decoding on vLLM).

A sample without a painting (its gate failed before or at the render) cannot be shown to the judge:
it gets the CPU critic's text (the gate's reason and the JS error). A request that fails after its
retries, or an answer that is not the schema's JSON, gives ``Critique(cause=...)`` (``timeout``,
``connection``, ``http_<status>``, ``malformed``): the trajectory's reward is then None.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from brushrl.config import CriticConfig, JudgeConfig
from brushrl.pool import ReferencePool
from brushrl.reward.critic import CpuCritic, stamp_seconds
from brushrl.reward.judge import image_item, resize_png
from brushrl.types import Critique, Sample

#: JSON schema of the judge critic's answer.
CRITIQUE_SCHEMA: dict = {
    "type": "object",
    "properties": {"critique": {"type": "string", "maxLength": 400}, "done": {"type": "boolean"}},
    "required": ["critique", "done"],
    "additionalProperties": False,
}


def parse_critique(content: str | None) -> Critique:
    """The judge's answer as a :class:`Critique` (a fenced JSON block is tolerated); anything else
    is ``Critique(cause="malformed")``."""
    text = (content or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return Critique(cause="malformed")
    if not isinstance(data, dict) or not isinstance(data.get("critique"), str) or not data["critique"].strip():
        return Critique(cause="malformed")
    return Critique(data["critique"].strip()[:400], done=bool(data.get("done", False)))


class JudgeCritic:
    """The judge critic (module docstring); a :class:`~brushrl.reward.critic.Critic`.

    Args:
        backend: an object with ``chat(payload) -> (content | None, cause | None)`` (an
            ``OpenAIJudgeBackend`` pointed at the judge's servers).
        pool: the reference pool. judge: ``reward.judge`` (model name, tiers, image side).
        cfg: ``reward.critic`` (question, answer tokens). cpu: words the samples without a painting.

    Raises:
        ValueError: the pool has no entry in the judge's tiers.
    """

    def __init__(self, backend, pool: ReferencePool, judge: JudgeConfig, cfg: CriticConfig, cpu: CpuCritic):
        self.backend, self.judge, self.cfg, self.cpu = backend, judge, cfg, cpu
        self._entries = [e for e in pool.entries if e.tier in judge.tiers]
        if not self._entries:
            raise ValueError(f"reward.judge.tiers: pool {pool.root} has no reference in {judge.tiers}")
        self._pool = ThreadPoolExecutor(judge.max_concurrency, thread_name_prefix="critic")

    def reference(self, subject: str, seed: int):
        """The reference a group of ``subject`` is compared with (same subject and seed, same one)."""
        own = [e for e in self._entries if e.prompt == subject] or self._entries
        return random.Random(seed).choice(sorted(own, key=lambda e: e.id))

    def payload(self, png: bytes, reference_png: bytes, prompt: str) -> dict:
        """The chat request: the question, then image A (the painting) and image B (the reference)."""
        side = self.judge.image_side
        content = [{"type": "text", "text": self.cfg.judge_prompt.format(prompt=prompt)},
                   image_item(resize_png(png, side)), image_item(resize_png(reference_png, side))]
        return {
            "model": self.judge.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": 0.0,
            "max_tokens": self.cfg.judge_max_tokens,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "critique", "strict": True, "schema": CRITIQUE_SCHEMA}},
        }

    def _one(self, sample: Sample, prompt: str, reference_png: bytes) -> Critique:
        if not (sample.gate.passed and sample.render is not None and sample.render.png):
            return self.cpu.critique_one(sample, prompt)
        try:
            payload = self.payload(sample.render.png, reference_png, prompt)
        except Exception as exc:  # noqa: BLE001 - an unreadable PNG is that sample's failure
            return Critique(cause=f"error:{type(exc).__name__}")
        content, cause = self.backend.chat(payload)
        return Critique(cause=cause) if cause is not None else parse_critique(content)

    def critique(self, samples: Sequence[Sample], prompt: str, seed: int) -> list[Critique]:
        """:class:`~brushrl.reward.critic.Critic`: the group's requests run concurrently."""
        t0 = time.perf_counter()
        reference_png = self.reference(self.cpu.subject(prompt), seed).path.read_bytes()
        out = list(self._pool.map(lambda s: self._one(s, prompt, reference_png), samples))
        return stamp_seconds(out, t0)
