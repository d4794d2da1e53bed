"""The reward of a multi-turn trajectory (``rollout.revision.trajectory_reward``), from its turns'.

``final``: the last turn's reward, as RRVF (arXiv 2507.20766) rewards the final render.
``improvement``: ``last + bonus * max(0, last - first)``: a revision that improves on the first
painting earns more than one that only repeats it (ReLook, arXiv 2510.11498, keeps only improving
revisions; here an improvement is rewarded rather than required). A trajectory of one turn (the
critic said done at once) has ``last == first``: no bonus.

None semantics: a turn whose reward is None (its render or a scorer failed: infrastructure) makes
the trajectory's reward None with cause ``turn<k>:<cause>``, and a critic failure makes it None with
cause ``critic:<cause>``; such a trajectory is left out of its group's statistics, never trained on
as 0. A gate failure is a sketch fault: its turn's reward is 0 and counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from brushrl.config import RevisionConfig


def trajectory_reward(turns: Sequence[tuple[float | None, str | None]], cfg: RevisionConfig,
                      critic_cause: str | None = None) -> tuple[float | None, str | None]:
    """The trajectory's ``(reward, none_cause)``.

    Args:
        turns: per turn in order, ``(reward, none_cause)`` of its sample (at least one).
        cfg: ``rollout.revision`` (``trajectory_reward``, ``improvement_bonus``).
        critic_cause: why the critic failed on the last turn's painting (the trajectory could not
            go on), or None.

    Returns:
        ``(reward, None)`` or ``(None, cause)`` (module docstring).

    Raises:
        ValueError: no turns.
    """
    if not turns:
        raise ValueError("a trajectory has at least one turn")
    for k, (reward, cause) in enumerate(turns, start=1):
        if reward is None:
            return None, f"turn{k}:{cause or 'unknown'}"
    if critic_cause is not None:
        return None, f"critic:{critic_cause}"
    first, last = float(turns[0][0]), float(turns[-1][0])
    if cfg.trajectory_reward == "final":
        return last, None
    return last + cfg.improvement_bonus * max(0.0, last - first), None
