"""The learner's view of one scored completion: token ids, behaviour log-probs and a reward."""

from __future__ import annotations

from dataclasses import dataclass

from brushrl.types import Sample


@dataclass
class TrainSample:
    """What the learner needs of one sample (a :class:`brushrl.types.Sample` minus code, render, PNG).

    Attributes:
        prompt_ids: chat-formatted prompt token ids, length P.
        completion_ids: sampled token ids, length T (EOS included when emitted).
        logprobs: behaviour-policy log-probs of ``completion_ids`` (natural log, temperature 1,
            before top-k/top-p), length T.
        reward: scalar reward, or None when the sample could not be scored.
        policy_version: learner step whose weights sampled it (for staleness metrics), if known.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float | None
    policy_version: int | None = None

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.completion_ids):
            raise ValueError(
                f"logprobs has {len(self.logprobs)} entries for {len(self.completion_ids)} completion tokens"
            )

    @classmethod
    def from_sample(cls, sample: Sample) -> "TrainSample":
        """Strip a pipeline :class:`~brushrl.types.Sample` to what the learner reads.

        Do this before sending samples to a learner actor: it leaves the PNG bytes behind.
        """
        c = sample.completion
        return cls(list(c.prompt_ids), list(c.completion_ids), list(c.logprobs), sample.reward, c.policy_version)


def as_train_sample(sample: TrainSample | Sample) -> TrainSample:
    """Return ``sample`` as a :class:`TrainSample` (converting a pipeline ``Sample``).

    Raises:
        TypeError: neither a ``TrainSample`` nor a ``Sample``.
        ValueError: log-prob and completion lengths differ.
    """
    if isinstance(sample, TrainSample):
        return sample
    if isinstance(sample, Sample):
        return TrainSample.from_sample(sample)
    raise TypeError(f"expected TrainSample or brushrl.types.Sample, got {type(sample).__name__}")
