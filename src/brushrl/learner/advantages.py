"""GRPO group-relative advantages and the group filter.

GRPO (Shao et al. 2024, *DeepSeekMath*, arXiv:2402.03300, sec. 4.1.2) replaces PPO's value baseline
by the mean reward of the G completions sampled for the same prompt (one *group*). With ``r_1..r_G``
the group's rewards and ``V`` the indices of its valid (non-None) rewards::

    mean = sum(r_j for j in V) / |V|
    std  = sqrt(sum((r_j - mean)**2 for j in V) / (|V| - 1))     # Bessel, as TRL's ``nanstd``
    A_i  = (r_i - mean) / d

where ``scale_rewards`` picks the divisor ``d``:

* ``"none"``: ``d = 1`` (Dr. GRPO, Liu et al. 2025, arXiv:2503.20783: the std divisor adds a
  question-difficulty bias; the HF reproduction also found that one gate rejection shrank the
  survivors' advantages under ``group``);
* ``"group"``: ``d = std + 1e-4`` (DeepSeekMath's normalisation);
* ``"batch"``: ``d = std_batch + 1e-4``, ``std_batch`` being the Bessel std of every valid reward in
  the batch (the baseline stays per group).

This mirrors TRL 1.16 ``GRPOTrainer._generate_and_score_completions`` (``sum_then_normalize``): a
None reward becomes NaN there and is left out of ``nanmean``/``nanstd``. TRL then trains that
completion with advantage 0; here its advantage is None and the learner leaves it out of the batch
entirely, so it neither moves the policy nor counts in the token normaliser of the loss.

Two departures from TRL, both about groups without signal: when the valid rewards' std is at most
``tol`` every valid advantage is exactly 0.0 (TRL would divide a 1e-8 spread by ``1e-4``), and
:class:`GroupFilter` lets the orchestrator drop and count such groups before they reach the learner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ScaleRewards = Literal["none", "group", "batch"]

#: Added to the std divisor, as in TRL (``advantages / (std_rewards + 1e-4)``).
STD_EPS = 1e-4

#: Group filter verdicts; the names match the ``status`` tag of ``brushrl_groups_total``.
ACCEPTED = "accepted"
TOO_FEW_VALID = "too_few_valid"
ZERO_VARIANCE = "zero_variance"


def _valid(rewards: Sequence[float | None]) -> list[float]:
    return [float(r) for r in rewards if r is not None]


def reward_std(values: Sequence[float]) -> float:
    """Bessel-corrected standard deviation of ``values`` (TRL's ``nanstd``); 0.0 for fewer than 2."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = math.fsum(values) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def _check_scale(scale_rewards: str) -> None:
    if scale_rewards not in ("none", "group", "batch"):
        raise ValueError(f"scale_rewards must be 'none', 'group' or 'batch', got {scale_rewards!r}")


def group_advantages(
    rewards: Sequence[float | None],
    scale_rewards: ScaleRewards = "none",
    tol: float = 0.0,
    batch_std: float | None = None,
) -> list[float | None]:
    """Advantages of ONE group (see the module docstring for the formulas).

    Args:
        rewards: the group's rewards in sample order; None marks an unscorable sample.
        scale_rewards: ``"none"``, ``"group"`` or ``"batch"`` (TRL's meaning).
        tol: if the valid rewards' std is ``<= tol`` the group has no signal and every valid
            advantage is 0.0.
        batch_std: the batch-wide reward std; required when ``scale_rewards == "batch"``
            (:func:`batch_advantages` supplies it).

    Returns:
        One entry per reward: a float advantage, or None where the reward is None. A group with no
        valid reward gives all None; a group with one valid reward gives it 0.0.

    Raises:
        ValueError: unknown ``scale_rewards``, or ``"batch"`` without ``batch_std``.
    """
    _check_scale(scale_rewards)
    if scale_rewards == "batch" and batch_std is None:
        raise ValueError("scale_rewards='batch' needs batch_std (use batch_advantages)")
    valid = _valid(rewards)
    if not valid:
        return [None] * len(rewards)
    mean = math.fsum(valid) / len(valid)
    std = reward_std(valid)
    if std <= tol:
        return [None if r is None else 0.0 for r in rewards]
    if scale_rewards == "group":
        divisor = std + STD_EPS
    elif scale_rewards == "batch":
        divisor = batch_std + STD_EPS
    else:
        divisor = 1.0
    return [None if r is None else (float(r) - mean) / divisor for r in rewards]


def batch_advantages(
    groups: Sequence[Sequence[float | None]],
    scale_rewards: ScaleRewards = "none",
    tol: float = 0.0,
) -> list[list[float | None]]:
    """Advantages of several groups trained together in one learner step.

    The baseline is always per group; only ``"batch"`` scaling looks across groups, dividing by the
    Bessel std of all valid rewards of ``groups`` (TRL: ``nanstd(rewards)`` over the batch).

    Args:
        groups: per group, its rewards (None = unscorable).
        scale_rewards, tol: as in :func:`group_advantages`.

    Returns:
        Advantages shaped like ``groups``.

    Raises:
        ValueError: unknown ``scale_rewards``.
    """
    _check_scale(scale_rewards)
    batch_std = reward_std([r for g in groups for r in _valid(g)]) if scale_rewards == "batch" else None
    return [group_advantages(g, scale_rewards, tol, batch_std) for g in groups]


def gate_quality_advantages(
    groups: Sequence[Sequence[float | None]],
    passed: Sequence[Sequence[bool | None]],
    tol: float = 0.0,
    scale_rewards: ScaleRewards = "none",
) -> list[list[float | None]]:
    """Advantages with the gate and the quality of passing paintings normalised apart
    (``learner.advantage: gate_quality``).

    A failed painting scores 0 and a passing one its quality q (~0.3-0.6 on the CPU demo), so within
    a group the total's spread is mostly the gate's: measured on the demo, the subject term's
    spread was 1/20 of the total's, and three seeds of RL made the policy fail less without
    painting better (docs/reward.md). Normalising each reward channel within the group before
    summing (GDPO: Liu et al., "Group reward-Decoupled Normalization Policy Optimization for
    Multi-reward RL Optimization", arXiv:2601.05242) keeps a small channel's differences from being
    drowned. Here the two channels are the gate (g = 1 pass, 0 fail) and the quality among passes,
    which is defined for passing paintings only (a failure has no painting to judge), so its
    baseline is the mean over the group's passes::

        A_gate_i = (g_i - mean g) / (std g + eps)             (0 when std g <= tol)
        A_q_i    = (r_i - mean_pass r) / (std_pass r + eps)   for a pass (0 for a failure, and when
                                                              fewer than 2 passes or std_pass <= tol)
        A_i      = (A_gate_i + A_q_i) * s

    GDPO then normalises the sum by its batch std. ``scale_rewards`` picks ``s``:

    * ``"none"``: ``s = std_batch(r) / std_batch(A_gate + A_q)``, which does that and then gives the
      batch the total reward's own spread back, so the advantages' overall size (and so what a
      learning rate means under ``scale_rewards: none``) stays that of the plain advantages while
      their split between failing less and painting better moves. Its cost: a batch whose groups
      all pass has the small spread of quality alone (arm E of issue 35, one group a step: 35 of 60
      steps all passed, mean |A| 0.054 there vs 0.28 in the steps with a failure), so painting
      better is learnt at a fifth of failing less's rate in most steps;
    * ``"batch"``: ``s = 1 / std_batch(A_gate + A_q)`` (GDPO's batch normalisation as written):
      every batch has unit spread, whichever channel it comes from (issue 35's arm H: the policy
      moved further than under ``none`` and painted no better, docs/reward.md);
    * ``"group"``: ``s_k = 1 / std(A_gate + A_q over group k)``, each group to unit spread.

    Args:
        groups: per group, its rewards (None = unscorable: advantage None, left out of the means).
        passed: per group, each sample's gate verdict (same shape); a valid reward with an unknown
            verdict is an error.
        tol: a channel whose std is at most ``tol`` contributes 0 (no signal in it); a batch or group
            whose summed advantages spread at most ``tol`` gets 0.0 everywhere.
        scale_rewards: ``"none"``, ``"batch"`` or ``"group"`` (above).

    Returns:
        Advantages shaped like ``groups``.

    Raises:
        ValueError: shapes differ, a valid reward has ``passed`` None, or ``scale_rewards`` is unknown.
    """
    _check_scale(scale_rewards)
    if len(groups) != len(passed) or any(len(g) != len(p) for g, p in zip(groups, passed)):
        raise ValueError("gate_quality_advantages: rewards and gate verdicts differ in shape")
    raw: list[list[float | None]] = []
    for rewards, verdicts in zip(groups, passed):
        valid = [(float(r), v) for r, v in zip(rewards, verdicts) if r is not None]
        if any(v is None for _, v in valid):
            raise ValueError("gate_quality_advantages needs every scored sample's gate verdict (TrainSample.passed)")
        gates = [1.0 if v else 0.0 for _, v in valid]
        quality = [r for r, v in valid if v]
        g_mean, g_std = (math.fsum(gates) / len(gates), reward_std(gates)) if gates else (0.0, 0.0)
        q_mean, q_std = (math.fsum(quality) / len(quality), reward_std(quality)) if quality else (0.0, 0.0)
        out: list[float | None] = []
        for r, v in zip(rewards, verdicts):
            if r is None:
                out.append(None)
                continue
            a = ((1.0 if v else 0.0) - g_mean) / (g_std + STD_EPS) if g_std > tol else 0.0
            if v and len(quality) >= 2 and q_std > tol:
                a += (float(r) - q_mean) / (q_std + STD_EPS)
            out.append(a)
        raw.append(out)
    if scale_rewards == "group":
        return [_scaled(g, 1.0, reward_std(_valid(g)), tol) for g in raw]
    spread = reward_std([a for g in raw for a in _valid(g)])
    target = 1.0 if scale_rewards == "batch" else reward_std([r for g in groups for r in _valid(g)])
    return [_scaled(g, target, spread, tol) for g in raw]


def _scaled(advs: list[float | None], target: float, spread: float, tol: float) -> list[float | None]:
    """``advs`` times ``target / spread``; 0.0 for each valid entry when ``spread <= tol`` (no
    signal to scale)."""
    scale = target / spread if spread > tol else 0.0
    return [None if a is None else a * scale for a in advs]


@dataclass(frozen=True)
class GroupFilter:
    """Decides whether a group carries a learning signal.

    Attributes:
        min_valid: fewer valid (non-None) rewards than this -> ``too_few_valid`` (a baseline from
            one sample is the sample itself: its advantage would be 0).
        tol: a valid-reward std ``<= tol`` -> ``zero_variance`` (all advantages 0: no gradient, only cost).
    """

    min_valid: int = 2
    tol: float = 1e-6

    @classmethod
    def from_config(cls, cfg) -> "GroupFilter":
        """Build from a :class:`brushrl.config.LearnerConfig` (``min_valid_per_group``, ``zero_variance_tol``)."""
        return cls(min_valid=cfg.min_valid_per_group, tol=cfg.zero_variance_tol)

    def verdict(self, rewards: Sequence[float | None]) -> str:
        """Return :data:`ACCEPTED`, :data:`TOO_FEW_VALID` or :data:`ZERO_VARIANCE` (checked in that
        order of precedence: too few valid first)."""
        valid = _valid(rewards)
        if len(valid) < self.min_valid:
            return TOO_FEW_VALID
        if reward_std(valid) <= self.tol:
            return ZERO_VARIANCE
        return ACCEPTED


def filter_group(rewards: Sequence[float | None], min_valid: int = 2, tol: float = 1e-6) -> str | None:
    """Why a group should be dropped: :data:`TOO_FEW_VALID`, :data:`ZERO_VARIANCE`, or None to keep it.

    Shorthand for ``GroupFilter(min_valid, tol).verdict(rewards)`` with None for :data:`ACCEPTED`.
    """
    verdict = GroupFilter(min_valid, tol).verdict(rewards)
    return None if verdict == ACCEPTED else verdict
