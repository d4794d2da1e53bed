"""The learner's view of one scored completion: token ids, behaviour log-probs and a reward."""

from __future__ import annotations

from dataclasses import dataclass

from brushrl.types import Sample, Trajectory


@dataclass
class TrainSample:
    """What the learner needs of one sample (a :class:`brushrl.types.Sample` minus code, render, PNG).

    Attributes:
        prompt_ids: chat-formatted prompt token ids, length P.
        completion_ids: sampled token ids, length T (EOS included when emitted).
        logprobs: behaviour-policy log-probs of ``completion_ids`` (natural log, temperature 1,
            before top-k/top-p), length T.
        reward: scalar reward, or None when the sample could not be scored.
        policy_version: learner step whose weights sampled it (for staleness metrics), if known;
            for a multi-turn trajectory its oldest turn's.
        loss_mask: None (every completion token is the policy's), or length T of 1 (a token the
            policy sampled: it carries loss) and 0 (a critique turn's token: context only, no
            loss, no gradient); TRL's ``tool_mask``. Log-probs at 0 positions are 0.0 and unused.
        vision: None (a text-only sequence), or the pixel inputs of every image in the sequence,
            in placeholder order (``brushrl.vision``; Idefics3: ``pixel_values`` (N, C, H, W)
            float32, ``pixel_attention_mask`` (N, H, W) long), passed to the forward pass that
            recomputes its log-probs (``rollout.revision.show_image``).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float | None
    policy_version: int | None = None
    loss_mask: list[int] | None = None
    vision: dict | None = None
    passed: bool | None = None
    """Whether its painting passed the gate (None: not known), read by ``learner.advantage:
    gate_quality`` (``brushrl.learner.advantages.gate_quality_advantages``)."""

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"logprobs has {len(self.logprobs)} entries for {len(self.completion_ids)} completion tokens"
            )
        if self.loss_mask is not None and len(self.loss_mask) != len(self.completion_ids):
            raise ValueError(f"loss_mask has {len(self.loss_mask)} entries for {len(self.completion_ids)} tokens")

    @property
    def n_policy_tokens(self) -> int:
        """Completion tokens that carry loss."""
        return len(self.completion_ids) if self.loss_mask is None else sum(self.loss_mask)

    @classmethod
    def from_sample(cls, sample: Sample) -> "TrainSample":
        """Strip a pipeline :class:`~brushrl.types.Sample` to what the learner reads.

        Do this before sending samples to a learner actor: it leaves the PNG bytes behind.
        """
        c = sample.completion
        return cls(list(c.prompt_ids), list(c.completion_ids), list(c.logprobs), sample.reward, c.policy_version,
                   vision=c.vision, passed=sample.gate.passed)


    @classmethod
    def from_trajectory(cls, trajectory: Trajectory) -> "TrainSample":
        """One training sequence for a whole trajectory, trained through TRL's loss as one sample
        (TRL's multi-turn tool-calling layout: the tool's tokens stay in the sequence, masked by
        ``tool_mask``).

        The prompt is the first turn's; the completion is every turn's reply with, between two
        replies, the critique turn's tokens (``loss_mask`` 0 there, 1 on the replies'). Each reply
        keeps its behaviour log-probs, so the PPO ratio of a token is against the policy version
        that sampled it; ``policy_version`` is the oldest turn's. A one-turn trajectory gives
        exactly :meth:`from_sample` of its sample (with the trajectory's reward) and no mask.
        The sequence's vision inputs are the last turn's (``Completion.vision``: its context holds
        every image of the trajectory; None for text turns); image tokens are critique-turn
        tokens, ``loss_mask`` 0.

        Raises:
            ValueError: a turn's context does not extend the previous turn's tokens (the
                ``brushrl.rollout.base.RolloutEngine.revise`` invariant was broken).
        """
        first = trajectory.turns[0].completion
        if len(trajectory.turns) == 1:
            return cls(list(first.prompt_ids), list(first.completion_ids), list(first.logprobs), trajectory.reward,
                       first.policy_version, vision=first.vision, passed=trajectory.turns[0].gate.passed)
        ids, logprobs, mask = list(first.completion_ids), list(first.logprobs), [1] * len(first.completion_ids)
        seen = list(first.prompt_ids) + ids
        for s in trajectory.turns[1:]:
            c = s.completion
            if c.prompt_ids[: len(seen)] != seen:
                raise ValueError(f"turn {s.turn} of trajectory {s.group_id}:{trajectory.member} does not extend "
                                 "the previous turn's tokens")
            critique = c.prompt_ids[len(seen):]
            ids += critique + list(c.completion_ids)
            logprobs += [0.0] * len(critique) + list(c.logprobs)
            mask += [0] * len(critique) + [1] * len(c.completion_ids)
            seen = list(c.prompt_ids) + list(c.completion_ids)
        return cls(list(first.prompt_ids), ids, logprobs, trajectory.reward, trajectory.policy_version, mask,
                   trajectory.turns[-1].completion.vision, passed=trajectory.turns[-1].gate.passed)


def as_train_sample(sample: TrainSample | Sample | Trajectory) -> TrainSample:
    """Return ``sample`` as a :class:`TrainSample` (converting a pipeline ``Sample`` or ``Trajectory``).

    Raises:
        TypeError: none of ``TrainSample``, ``Sample``, ``Trajectory``.
        ValueError: log-prob and completion lengths differ.
    """
    if isinstance(sample, TrainSample):
        return sample
    if isinstance(sample, Sample):
        return TrainSample.from_sample(sample)
    if isinstance(sample, Trajectory):
        return TrainSample.from_trajectory(sample)
    raise TypeError(f"expected TrainSample, brushrl.types.Sample or Trajectory, got {type(sample).__name__}")
