"""Revision examples for the warm start: teach the tiny policy to use a critique at all.

A policy that never saw a critique ignores it, and multi-turn revision (``rollout.turns`` > 1) then
has nothing to learn from. ``policy.sft.revision_examples: N`` adds N conversations to the SFT
corpus, each built from a corpus sketch like this:

1. damage it (``brushrl.corpus.damage``: drop petals, push shapes off the canvas, swap the palette,
   break the syntax; the damages take turns);
2. put the damaged sketch through what a policy's reply goes through: the static gate, a real
   render (headless Chromium, ``render`` config; results cached under ``<sft.cache_dir>/renders``),
   the runtime gate and the CPU scorer (``pool_similarity`` against the group's references; other
   scorers need GPUs and are left out, so their components are absent from these critiques);
3. have the CPU critic (``brushrl.reward.critic.CpuCritic``, the run's ``reward.critic`` config)
   write its critique of that sample, exactly as it would at training time;
4. train the conversation system -> user prompt -> assistant: damaged sketch -> user: the critique
   turn (``brushrl.prompts.revision_prompt``) -> assistant: **the original sketch**, with the loss on
   that last reply only (the damaged one is context). The tokens are assembled as the rollout engine
   assembles a revision turn (``brushrl.conversation``), so SFT and RL see the same sequences.

Examples whose render failed for infrastructure reasons are skipped (never trained on a critique of
a failure that is not the sketch's).
"""

from __future__ import annotations

import logging
import random
import zlib
from dataclasses import dataclass

from brushrl.config import BrushRLConfig
from brushrl.corpus.build import CorpusItem, as_reply
from brushrl.corpus.damage import DAMAGES
from brushrl.prompts import user_prompt
from brushrl.types import Completion, Sample

log = logging.getLogger(__name__)

#: Bump when the example recipe changes (part of the warm start's cache key).
REVISION_FORMAT = 1


@dataclass(frozen=True)
class RevisionExample:
    """One revision conversation.

    Attributes:
        subject: the corpus item's subject. damage: the ``DAMAGES`` name applied.
        damaged_reply: the first assistant turn (a fenced damaged sketch).
        critique: the CPU critic's text about it. repaired_reply: the answer (the original sketch, fenced).
    """

    subject: str
    damage: str
    damaged_reply: str
    critique: str
    repaired_reply: str


class RevisionExamples:
    """Builds the warm start's revision examples of a run (module docstring).

    Args:
        cfg: the run config (``policy.sft.revision_examples``, ``run.seed``, ``prompts.template``,
            ``gate``, ``render``, ``reward``).
        items: the corpus items the examples are drawn from (the SFT corpus).
    """

    def __init__(self, cfg: BrushRLConfig, items: list[CorpusItem]):
        self.cfg, self.items = cfg, list(items)

    def key(self) -> dict:
        """What determines the examples besides the corpus (the warm start's cache key part)."""
        from brushrl.pool import ReferencePool

        c = self.cfg
        return {"format": REVISION_FORMAT, "n": c.policy.sft.revision_examples, "seed": c.run.seed,
                "critic": c.reward.critic.model_dump(mode="json"), "gate": c.gate.model_dump(mode="json"),
                "render": [c.render.canvas_size, c.render.gl_backend], "weights": c.reward.weights,
                "pool": ReferencePool(c.reward.pool.path).version_id, "pool_cfg": c.reward.pool.model_dump(mode="json")}

    def plan(self) -> list[tuple[CorpusItem, str, str]]:
        """``(item, damage name, damaged code)`` of every example to build, in order: the damages
        take turns over the items (spread evenly over the corpus), skipping those that cannot apply."""
        n = self.cfg.policy.sft.revision_examples
        names = list(DAMAGES)
        out: list[tuple[CorpusItem, str, str]] = []
        stride = max(1, len(self.items) // max(1, n))
        i = 0
        while len(out) < n and i < 4 * n + len(self.items):
            # every stride-th item; after a wrap-around one further on, so items repeat only when n > items
            item = self.items[(i * stride + i * stride // len(self.items)) % len(self.items)]
            name = names[i % len(names)]
            code = DAMAGES[name](item.code, random.Random(f"{self.cfg.run.seed}:{item.name}:{name}:{i}"))
            if code is not None and code != item.code:
                out.append((item, name, code))
            i += 1
        return out

    def build(self, render_cache_dir: str | None = None) -> list[RevisionExample]:
        """Gate, render, score and critique every planned example (one local Chromium).

        Args:
            render_cache_dir: a disk render cache folder (``brushrl.render.cache``), or None.

        Raises:
            ValueError: the reference pool has no entry in the scored tiers (the critic needs them).
            playwright.sync_api.Error: Chromium cannot be launched.
        """
        from brushrl.gate import InfraRender, check_runtime, check_static
        from brushrl.pool import ReferencePool
        from brushrl.render.browser import Renderer
        from brushrl.render.cache import RenderCache, render_key
        from brushrl.reward import combine, length_score
        from brushrl.reward.actor import PoolScorerActor
        from brushrl.reward.critic import CpuCritic

        c = self.cfg
        pool = ReferencePool(c.reward.pool.path)
        critic = CpuCritic([e for e in pool.entries if e.tier in c.reward.pool.tiers], c.reward.critic,
                           c.prompts.template, c.render.canvas_size)
        scorer = PoolScorerActor(c.reward.pool) if c.reward.weights.get("pool_similarity") else None
        cache = RenderCache(0, render_cache_dir) if render_cache_dir else None
        out: list[RevisionExample] = []
        with Renderer.from_config(c.render) as renderer:
            for item, name, code in self.plan():
                prompt, reply = user_prompt(item.subject, c.prompts.template), as_reply(code)
                seed = zlib.crc32(f"{item.name}:{name}".encode())
                extracted, verdict = check_static(reply, c.gate, c.render.canvas_size,
                                                  replay=c.render.mode == "replay")
                sample = Sample(Completion(prompt, reply, [], [], [], 0), extracted or "", seed, 0, 0, verdict)
                if verdict.passed:
                    key = render_key(extracted, seed, c.render.canvas_size, renderer.env)
                    render = cache.get(key) if cache else None
                    if render is None:
                        render = renderer.render(extracted, seed, c.render.canvas_size, c.render.deadline_s,
                                                 c.render.attempts)
                        if cache:
                            cache.put(key, render)
                    sample.render = render
                    try:
                        sample.gate = check_runtime(render, c.gate, c.render.canvas_size)
                    except InfraRender:
                        log.warning("revision example %s/%s: render infra failure, skipped", item.name, name)
                        continue
                components: dict[str, float | None] = {}
                if sample.gate.passed:
                    components["length"] = length_score(extracted, c.reward.length)
                    if scorer is not None:
                        components["pool_similarity"] = scorer.score_group([sample.render.png], prompt, seed)[0].value
                weights = {k: w for k, w in c.reward.weights.items() if k in ("gate", "length", "pool_similarity")}
                scored = combine(sample.gate, components, weights)
                sample.components, sample.reward = scored.components, scored.total
                critique = critic.critique_one(sample, prompt)
                out.append(RevisionExample(item.subject, name, reply, critique.text, as_reply(item.code)))
        return out
