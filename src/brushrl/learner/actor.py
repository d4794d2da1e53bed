"""The learner as a Ray actor.

The actor loads the policy itself (``brushrl.policy.load_policy``, imported inside the actor so that
this module, and the driver importing it, need neither TRL nor the policy code) and wraps it in a
:class:`~brushrl.learner.grpo.GRPOLearner`. Torch runs with ``policy.torch_threads`` intra-op
threads (1 by default: a tiny-model step took ~1 s with 1 thread and 12-15 s with 2 on the 2-core
machine, see /work/shared/notes/probes.md); ``OMP_NUM_THREADS`` is set to match before the worker
imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from brushrl.config import BrushRLConfig, PolicyConfig
from brushrl.learner.samples import TrainSample
from brushrl.types import Sample

#: ``(policy_cfg) -> (model, tokenizer)``; the default is ``brushrl.policy.load_policy``.
PolicyLoader = Callable[[PolicyConfig], tuple]


class LearnerActor:
    """Holds one :class:`~brushrl.learner.grpo.GRPOLearner`; every method runs in the actor process.

    Args:
        cfg: the run config; ``learner`` gives the hyper-parameters, ``policy`` the model,
            ``rollout.group_size`` / ``rollout.max_new_tokens`` TRL's ``num_generations`` /
            ``max_completion_length``, ``run.seed`` the LoRA init seed.
        total_steps: optimizer steps of the run (for the LR schedule).
        policy_loader: builds ``(model, tokenizer)`` from ``cfg.policy``; None uses
            ``brushrl.policy.load_policy``.
        learner_kwargs: extra keyword arguments of ``GRPOLearner`` (e.g. ``micro_batch_size``,
            ``truncated_is_clip``).
    """

    def __init__(
        self,
        cfg: BrushRLConfig,
        total_steps: int,
        policy_loader: PolicyLoader | None = None,
        learner_kwargs: dict | None = None,
    ) -> None:
        import torch

        torch.set_num_threads(cfg.policy.torch_threads)
        from brushrl.learner.grpo import GRPOLearner

        if policy_loader is None:
            from brushrl.policy import load_policy

            policy_loader = load_policy
        model, tokenizer = policy_loader(cfg.policy)
        kwargs = {
            "group_size": cfg.rollout.group_size,
            "max_completion_length": cfg.rollout.max_new_tokens,
            "seed": cfg.run.seed,
            "micro_batch_size": cfg.learner.micro_batch_size,
            "truncated_is_clip": cfg.learner.truncated_is_clip,
            **(learner_kwargs or {}),
        }
        self.learner = GRPOLearner(model, tokenizer, cfg.learner, total_steps, **kwargs)

    def step(self, groups: Sequence[Sequence[TrainSample | Sample]]) -> dict[str, float]:
        """One optimizer step; see :meth:`GRPOLearner.step`. Sending ``TrainSample.from_sample``
        copies instead of pipeline ``Sample`` objects avoids shipping their PNG bytes."""
        return self.learner.step(groups)

    def adapter_state(self) -> dict:
        """LoRA weights as CPU tensors (``peft.get_peft_model_state_dict`` keys)."""
        return self.learner.adapter_state()

    def save_adapter(self, path: str) -> str:
        """Save the adapter (safetensors) into folder ``path``; returns the path."""
        return str(self.learner.save_adapter(path))

    def save_state(self, path: str) -> str:
        """Full learner checkpoint into folder ``path`` (see :meth:`GRPOLearner.save_state`)."""
        return str(self.learner.save_state(path))

    def load_state(self, path: str) -> int:
        """Restore a :meth:`save_state` folder; returns the policy version."""
        return self.learner.load_state(path)

    def policy_version(self) -> int:
        """Optimizer steps taken so far."""
        return self.learner.policy_version

    def completion_logprobs(self, prompt_ids: list[int], completion_ids: list[int],
                            vision: dict | None = None) -> list[float]:
        """Per-token log-probs of a completion under the current policy (diagnostics, tests);
        ``vision``: the pixel inputs of the images in the sequence (``brushrl.vision``), or None."""
        return self.learner.completion_logprobs(prompt_ids, completion_ids, vision)

    def describe(self) -> dict:
        """``strategy`` (in words), ``trainable_params`` and ``total_params`` of the learner."""
        learner = self.learner
        return {"strategy": learner.describe(), "trainable_params": learner.trainable_params,
                "total_params": learner.total_params}
