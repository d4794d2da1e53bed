"""The weight-sync canary: after every adapter sync the rollout engine must serve the learner's policy.

A sync can "succeed" and change nothing: an adapter whose keys match none of the engine's module
names is registered by vLLM, which then applies 0 LoRA weights and says so at debug level (the
Qwen3.5-MoE key layout did exactly that; the same silent stale-policy failure is verl #7495 and
ms-swift #9855). Training on such samples is quietly wrong: the truncated-IS correction
down-weights the mismatch and the reward stays flat. So after every sync (version 0 and a resume
included) the driver scores one fixed probe sequence (:class:`Probe`) on both sides and compares:

* ``gap``: mean over the probe's tokens of |engine log-prob - learner log-prob| (nats/token);
  above ``orchestrator.sync_check.tolerance`` the engine serves other weights than the learner;
* ``shift`` (the learner's) and ``engine_shift``: mean |log-prob - base log-prob| of each side,
  the base being the engine's own log-probs with no adapter. Once the learner has moved
  (``shift > min_shift``), an engine with ``engine_shift < shift / 2`` is still serving the base.

Either failure raises :class:`SyncCheckError` from the sync, before the loop trains again, so no
step trains on samples of a version that failed (the run stops and ``status.json`` names the
error). The numbers of every passed check go into ``metrics.jsonl`` and Prometheus as
``sync/logprob_gap``, ``sync/logprob_gap_max``, ``sync/adapter_shift`` and ``sync/engine_shift``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from brushrl.config import SyncCheckConfig


class SyncCheckError(RuntimeError):
    """The rollout engine does not serve the learner's policy after a weight sync; the message
    names the policy version, the measured gap or shifts, and the limit they broke."""


@dataclass(frozen=True)
class Probe:
    """One fixed sequence both sides score after every sync.

    Attributes:
        prompt_ids: the chat-formatted training prompt (system + user turn + assistant header).
        completion_ids: the first ``probe_tokens`` tokens of a corpus sketch's lines in a fixed
            shuffled order.
    """

    prompt_ids: list[int]
    completion_ids: list[int]

    @classmethod
    def build(cls, tokenizer, system_prompt: str, template: str, tokens: int) -> Probe:
        """The probe of a run: the lines of the corpus's first canonical sketch (``brushrl.corpus``,
        variant 0: the same on every machine) in a fixed shuffled order (``random.Random(0)``) as the
        reply to its subject's prompt, cut to ``tokens`` tokens, tokenised by the policy's
        ``tokenizer`` as the engines format prompts.

        Why shuffled: the warm start memorises corpus sketches, so on the sketch itself every token
        has probability ~1 and its log-prob barely moves with the adapter (saturated softmax:
        measured on the tests' tiny policy, one learner step moved the sketch's log-probs 2e-6
        nats/token and the shuffled lines' 0.17). Shuffled lines are in-domain tokens whose next
        token the policy is unsure of, so a changed adapter shows.

        Raises:
            ValueError: the reply has fewer than ``tokens`` tokens.
        """
        import random

        from brushrl.corpus import BASES, make_variant
        from brushrl.prompts import chat_messages, user_prompt

        item = make_variant(next(iter(BASES)), 0)
        text = tokenizer.apply_chat_template(chat_messages(system_prompt, user_prompt(item.subject, template)),
                                             add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        lines = item.code.splitlines()
        random.Random(0).shuffle(lines)
        reply = tokenizer("\n".join(lines), add_special_tokens=False)["input_ids"]
        if len(reply) < tokens:
            raise ValueError(f"probe reply {item.name} has {len(reply)} tokens, fewer than probe_tokens={tokens}")
        return cls(list(prompt_ids), list(reply[:tokens]))


@dataclass(frozen=True)
class SyncGap:
    """What one check measured (nats/token, means over the probe's tokens).

    Attributes:
        version: the policy version synced.
        gap: mean |engine - learner|; gap_max: the largest per-token |engine - learner|.
        shift: mean |learner - base|; engine_shift: mean |engine - base| (base: the engine with no
            adapter).
    """

    version: int
    gap: float
    gap_max: float
    shift: float
    engine_shift: float

    def metrics(self) -> dict[str, float]:
        """The ``metrics.jsonl`` keys (docs/metrics.md)."""
        return {"sync/logprob_gap": self.gap, "sync/logprob_gap_max": self.gap_max,
                "sync/adapter_shift": self.shift, "sync/engine_shift": self.engine_shift}


def measure(version: int, engine: list[float], learner: list[float], base: list[float]) -> SyncGap:
    """The :class:`SyncGap` of per-token log-prob vectors of the same tokens.

    Raises:
        ValueError: the vectors differ in length or are empty.
    """
    n = len(engine)
    if not n or len(learner) != n or len(base) != n:
        raise ValueError(f"log-prob vectors of lengths engine {n}, learner {len(learner)}, base {len(base)}")
    diff = [abs(e - ll) for e, ll in zip(engine, learner)]
    return SyncGap(version, sum(diff) / n, max(diff), sum(abs(ll - b) for ll, b in zip(learner, base)) / n,
                   sum(abs(e - b) for e, b in zip(engine, base)) / n)


def verdict(gap: SyncGap, cfg: SyncCheckConfig) -> str | None:
    """Why ``gap`` fails the check (the :class:`SyncCheckError` message), or None when it passes."""
    if gap.gap > cfg.tolerance:
        return (f"weight sync of policy version {gap.version}: the rollout engine's log-probs differ from the "
                f"learner's by {gap.gap:.3g} nats/token on the probe (max {gap.gap_max:.3g}), over "
                f"orchestrator.sync_check.tolerance={cfg.tolerance:g}; the engine does not serve the learner's "
                f"adapter (engine shift from the base {gap.engine_shift:.3g}, learner's {gap.shift:.3g})")
    if gap.shift > cfg.min_shift and gap.engine_shift < gap.shift / 2:
        return (f"weight sync of policy version {gap.version}: the learner moved {gap.shift:.3g} nats/token from "
                f"the base policy on the probe (over orchestrator.sync_check.min_shift={cfg.min_shift:g}) but the "
                f"rollout engine only {gap.engine_shift:.3g}: it still serves the base policy (gap "
                f"{gap.gap:.3g} nats/token, tolerance {cfg.tolerance:g})")
    return None


class SyncCheck:
    """Runs the canary against the Ray learner and rollout actors (module docstring).

    With ``rollout.replicas`` N > 1 (``brushrl.rollout.router``) the probe is scored on EVERY
    replica and each is judged against the learner: one replica that silently serves the base
    policy would poison about 1/N of the rollouts. The error names the replica; the metrics are
    the worst replica's (largest gap); :attr:`gaps` holds all of them.

    Args:
        cfg: ``orchestrator.sync_check``.
        probe: the run's probe.
        replicas: the rollout engine replicas behind the actor (``rollout.replicas``).

    Attributes:
        base: the engine's base-policy log-probs of the probe (replica 0's: every replica loads the
            same base weights), taken at the first check (None before).
        gaps: the last check's measurement per replica, replica 0 first.
    """

    def __init__(self, cfg: SyncCheckConfig, probe: Probe, replicas: int = 1) -> None:
        self.cfg, self.probe, self.replicas = cfg, probe, replicas
        self.base: list[float] | None = None
        self.gaps: list[SyncGap] = []

    async def run(self, learner, rollout, version: int) -> SyncGap:
        """Score the probe on the learner and on every rollout replica (concurrently) and judge
        each; returns the measurement (the worst replica's).

        Args:
            learner: the learner actor (``completion_logprobs``; a DeepSpeed group runs it on every rank).
            rollout: the rollout engine actor or router (``score``), already serving ``version``.
            version: the policy version just synced.

        Raises:
            SyncCheckError: an engine does not serve the learner's policy (:func:`verdict`).
        """
        p = self.probe
        if self.replicas == 1:  # the engine actor itself (either backend): no replica argument
            scores = [rollout.score.remote(p.prompt_ids, p.completion_ids, True)]
        else:
            scores = [rollout.score.remote(p.prompt_ids, p.completion_ids, True, i) for i in range(self.replicas)]
        calls = [learner.completion_logprobs.remote(p.prompt_ids, p.completion_ids), *scores]
        if self.base is None:
            calls.append(rollout.score.remote(p.prompt_ids, p.completion_ids, False))
        learner_lp, *rest = await asyncio.gather(*calls)
        engines = rest[:self.replicas]
        if self.base is None:
            self.base = rest[self.replicas]
        return self.judge_replicas(version, engines, learner_lp)

    def judge_replicas(self, version: int, engines: list[list[float]], learner: list[float]) -> SyncGap:
        """:meth:`judge` of each replica's log-probs (replica 0 first); returns the largest gap.

        Raises:
            SyncCheckError: a replica failed; with several replicas the message starts with
                ``rollout replica <i> of <N>``.
        """
        gaps = []
        for i, engine in enumerate(engines):
            try:
                gaps.append(self.judge(version, engine, learner))
            except SyncCheckError as exc:
                if len(engines) == 1:
                    raise
                raise SyncCheckError(f"rollout replica {i} of {len(engines)}: {exc}") from None
        self.gaps = gaps
        return max(gaps, key=lambda g: g.gap)

    def judge(self, version: int, engine: list[float], learner: list[float]) -> SyncGap:
        """:func:`measure` against :attr:`base`, then raise on a failing :func:`verdict`.

        Raises:
            SyncCheckError: the check failed. ValueError: no base yet, or vectors of other lengths.
        """
        if self.base is None:
            raise ValueError("SyncCheck.judge before the base log-probs were taken")
        gap = measure(version, engine, learner, self.base)
        why = verdict(gap, self.cfg)
        if why is not None:
            raise SyncCheckError(why)
        return gap
