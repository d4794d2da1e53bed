"""The GRPO learner: TRL's GRPO loss on groups produced outside TRL, training a PEFT LoRA adapter.

The Ray pipeline samples, renders and scores completions itself, so TRL's generation loop
(``GRPOTrainer.train``) is never run. :class:`GRPOLearner` builds a ``trl.GRPOTrainer`` only to own
the LoRA-wrapped model, the optimizer, the LR scheduler, the accelerator and the loss; each
:meth:`GRPOLearner.step` pads the pipeline's groups into the batch dict that TRL's own
``_generate_and_score_completions`` would have produced and calls ``trainer.compute_loss`` on it.

Off-policy correction. The behaviour policy (the rollout engine's weights, possibly a few policy
versions old) logged each token's log-prob. Two ways to use them, both through TRL's loss:

* ``truncated_is_clip=None`` (default): the behaviour log-probs are passed as
  ``old_per_token_logps``, so TRL's clipped ratio ``pi_theta / pi_behaviour`` (PPO, Schulman et al.
  2017; GRPO eq. 3) is taken against the policy that actually sampled; tokens whose ratio left
  ``[1 - epsilon, 1 + epsilon]`` in the direction of their advantage get no gradient.
* ``truncated_is_clip=C``: decoupled PPO (Hilton et al. 2021, arXiv:2110.00641) with truncated
  importance sampling (IMPALA, Espeholt et al. 2018; TRL's ``vllm_importance_sampling_correction``
  in ``token_truncate`` mode). The proximal policy is the learner's weights at the start of the
  step (TRL's ``old_per_token_logps = per_token_logps.detach()`` when none is passed), and each
  token's loss is weighted by ``w = min(pi_proximal / pi_behaviour, C)``. TRL only reads its
  ``importance_sampling_ratio`` input when it drives vLLM itself, so ``w`` is folded into a (B, T)
  advantage tensor, which ``_compute_loss`` accepts; every loss type but ``vespo`` is linear in a
  positive per-token factor of the advantage, so this equals TRL's multiplication. It costs one
  extra no-grad forward per micro-batch.

Data parallelism. With ``learner.strategy: deepspeed`` one ``GRPOLearner`` runs in each of W worker
processes (``brushrl.learner.group``), under DeepSpeed ZeRO (``brushrl.learner.zero``). Every rank
gets the whole step batch, filters it and computes advantages identically, takes its shard
(``brushrl.learner.shard.shard_by_tokens``) and runs micro-batches with the same row counts as the
other ranks, padded with masked-out rows (``brushrl.learner.shard.micro_batch_sizes``); each
micro-batch loss is scaled so that the ranks' losses sum to the full-batch loss, times W because
ZeRO averages gradients over the ranks. The last backward performs the single optimizer step.

Multi-turn trajectories (``rollout.turns`` > 1) are one training sequence each, laid out as TRL
lays out its own multi-turn tool calls: the first turn's prompt, then every reply with the critique
turns between them, and ``tool_mask`` 0 on the critique tokens (``TrainSample.from_trajectory``).
TRL attends to those tokens (they stay in ``completion_mask``) but its loss, entropy and clip
metrics use ``completion_mask * tool_mask``, so only the policy's own tokens carry loss and
gradient, each against the behaviour log-prob of the policy version that sampled its turn. The
token count that normalises the ``dapo`` loss counts policy tokens only, as TRL's does. Advantages
are per group of trajectories (one reward per trajectory). Batches of single-turn samples carry
no ``tool_mask`` and are exactly what they were before trajectories existed.

A vision-language policy shown its paintings (``rollout.revision.show_image``) trains the same
way: a trajectory's image tokens are critique-turn tokens (``tool_mask`` 0), and its pixel inputs
(``TrainSample.vision``, stacked by ``collate``) go into every forward that computes its
log-probs, TRL's loss (``pixel_values``, ``pixel_attention_mask``, ``num_images`` in its inputs)
and :meth:`GRPOLearner._token_logps`. Text-only batches carry none of these keys.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from datasets import Dataset
from peft import LoraConfig as PeftLoraConfig
from peft import get_peft_model_state_dict, set_peft_model_state_dict
from peft.utils import load_peft_weights
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import GRPOConfig, GRPOTrainer

from brushrl.config import LearnerConfig
from brushrl.learner import moe, zero
from brushrl.learner.advantages import ACCEPTED, GroupFilter, batch_advantages, gate_quality_advantages
from brushrl.learner.batch import collate
from brushrl.learner.rng import rng_state, set_rng_state
from brushrl.learner.samples import TrainSample, as_train_sample
from brushrl.learner.shard import micro_batch_sizes, shard_by_tokens
from brushrl.learner.zero_checkpoint import LEARNER_STATE, ZeroCheckpoint
from brushrl.types import Sample

#: How TRL 1.16 ``GRPOTrainer._compute_loss`` normalises each loss type, hence the weight that makes
#: the gradient summed over micro-batches equal to that of one call on the whole step batch
#: (B samples and N tokens in the step, b and n in the micro-batch):
#: ``"one"``: token sum / ``num_items_in_batch`` (we pass N) -> weight 1;
#: ``"seq"``: mean over sequences (``dr_grpo``: sum / (b * max_completion_length)) -> weight b / B;
#: ``"tok"``: token sum / n -> weight n / N.
_MICRO_WEIGHT = {
    "dapo": "one",
    "cispo": "one",
    "vespo": "one",
    "grpo": "seq",
    "sapo": "seq",
    "luspo": "seq",
    "dr_grpo": "seq",
    "bnpo": "tok",
}

#: TRL's per-micro-batch metrics surfaced in :meth:`GRPOLearner.step` (name in TRL -> our name).
_TRL_METRICS = {
    "clip_ratio/region_mean": "clip_ratio",
    "clip_ratio/low_mean": "clip_ratio_low",
    "clip_ratio/high_mean": "clip_ratio_high",
    "entropy": "entropy",
    "kl": "kl",
}


def _loss_mask(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, T) long: 1 on the tokens that carry loss (TRL: ``completion_mask * tool_mask``)."""
    mask = batch["completion_mask"]
    return mask * batch["tool_mask"] if "tool_mask" in batch else mask


#: Vision inputs of a batch (``brushrl.learner.batch.collate``) that the forward pass takes (TRL's
#: ``_compute_loss`` reads these keys of its inputs; Idefics3's model takes the first two).
_VISION_KEYS = ("pixel_values", "pixel_attention_mask")


def _vision_inputs(batch: dict) -> dict:
    """The batch's pixel inputs for a model forward (empty for a text-only batch)."""
    return {k: batch[k] for k in _VISION_KEYS if k in batch}


def _never_called(completions, **kwargs):
    """Reward source required by ``GRPOTrainer.__init__``; rewards come from the pipeline instead."""
    raise RuntimeError("brushrl feeds scored groups to GRPOLearner.step; GRPOTrainer.train() is not used")


class GRPOLearner:
    """Trains a LoRA adapter on a causal LM with TRL's GRPO loss, one optimizer step per call to :meth:`step`.

    The model is wrapped in place with PEFT LoRA (``r``, ``alpha``, ``dropout``, ``target_modules``
    of ``cfg.lora``; ``all-linear`` leaves the output head out; on a mixture of experts the experts
    get LoRA only with ``cfg.lora.experts``, see ``brushrl.learner.moe.lora_targets``). On a GPU it trains with bf16
    autocast and activation checkpointing; on CPU in the model's dtype, without checkpointing.
    With ``cfg.strategy == "deepspeed"`` it is one rank of a DeepSpeed ZeRO group (module docstring):
    the process environment must name its rank and the group's rendezvous (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), and every rank must call :meth:`step`,
    :meth:`adapter_state`, :meth:`save_adapter`, :meth:`save_state`, :meth:`load_state` and
    :meth:`completion_logprobs` together, with the same arguments (they contain collectives).
    Under bf16 the learner's log-probs differ more from an fp32 rollout engine's, which shows up as
    PPO ratios away from 1 even on-policy (the truncated-IS metrics measure it).

    Args:
        model: a ``transformers`` causal LM (not already a PEFT model); LoRA layers are injected
            into it in place. Loading it is the caller's job (``brushrl.policy.load_policy`` in the actor).
        tokenizer: its tokenizer; only ``pad_token_id``/``eos_token_id`` are used (TRL sets the pad
            token to EOS when missing).
        cfg: learner hyper-parameters (lr, scheduler, warmup, scale_rewards, loss_type, beta,
            epsilon, max_grad_norm, group filter, LoRA).
        total_steps: optimizer steps of the run (sizes decaying schedules).
        group_size: G, completions per prompt; TRL's ``num_generations`` (informational here:
            :meth:`step` takes groups of any size).
        micro_batch_size: samples per forward/backward; gradients are accumulated so that the
            update equals the full-batch one (see ``_MICRO_WEIGHT``).
        max_completion_length: the rollout's ``max_new_tokens``; only ``dr_grpo`` normalises by it.
        truncated_is_clip: None, or the cap ``C`` of truncated importance sampling (module docstring).
        seed: TRL seeds the global RNGs with it before creating the adapter (reproducible LoRA init).
        output_dir: the Trainer's output folder (nothing is written to it); a temporary one if None.

    Raises:
        ValueError: unknown ``cfg.loss_type``, ``truncated_is_clip`` with ``vespo`` or not > 0;
            ``cfg.lora.experts`` on a model without routed experts.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        cfg: LearnerConfig,
        total_steps: int,
        *,
        group_size: int = 4,
        micro_batch_size: int = 8,
        max_completion_length: int = 1024,
        truncated_is_clip: float | None = None,
        seed: int = 0,
        output_dir: str | None = None,
    ) -> None:
        if cfg.loss_type not in _MICRO_WEIGHT:
            raise ValueError(f"loss_type {cfg.loss_type!r} not supported; one of {sorted(_MICRO_WEIGHT)}")
        if truncated_is_clip is not None and (truncated_is_clip <= 0 or cfg.loss_type == "vespo"):
            raise ValueError("truncated_is_clip must be > 0 and cannot be used with loss_type 'vespo'")
        self.cfg = cfg
        self.micro_batch_size = max(1, micro_batch_size)
        self.truncated_is_clip = truncated_is_clip
        self.group_filter = GroupFilter.from_config(cfg)
        self._policy_version = 0
        self._tmpdir = None
        if output_dir is None:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="brushrl-learner-")
            output_dir = self._tmpdir.name
        on_gpu = torch.cuda.is_available()
        ds_config = None
        if cfg.strategy == "deepspeed":
            ds_config = zero.deepspeed_config(cfg.deepspeed)
            zero.init_distributed("nccl" if on_gpu else "gloo")
            if cfg.deepspeed.zero_stage == 3:
                self.leaf_modules = moe.set_leaf_modules(model, cfg.deepspeed.leaf_modules)
        args = GRPOConfig(
            output_dir=output_dir,
            learning_rate=cfg.lr,
            lr_scheduler_type=cfg.lr_scheduler,
            warmup_steps=cfg.warmup_steps,
            max_grad_norm=cfg.max_grad_norm,
            scale_rewards=cfg.scale_rewards,
            loss_type=cfg.loss_type,
            beta=cfg.beta,
            epsilon=cfg.epsilon,
            num_generations=group_size,
            per_device_train_batch_size=group_size,
            gradient_accumulation_steps=1,
            max_completion_length=max_completion_length,
            temperature=1.0,  # behaviour log-probs are logged at temperature 1 (brushrl.types.Completion)
            use_cpu=not on_gpu and ds_config is None,  # accelerate leaves DeepSpeed out under use_cpu
            bf16=on_gpu,
            activation_checkpointing=on_gpu if cfg.activation_checkpointing is None else cfg.activation_checkpointing,
            report_to="none",
            logging_strategy="no",
            save_strategy="no",
            seed=seed,
            **({} if ds_config is None else {"deepspeed": ds_config, "accelerator_config": {"use_configured_state": True}}),
        )
        target_modules, target_parameters = moe.lora_targets(model, cfg.lora.target_modules, cfg.lora.experts)
        peft_config = PeftLoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=target_modules,
            target_parameters=target_parameters,
            task_type="CAUSAL_LM",
        )
        # GRPOTrainer insists on a reward source and a train dataset even though train() is never
        # called: a reward function that raises and a one-row dataset are constructor plumbing only.
        self.trainer = GRPOTrainer(
            model=model,
            reward_funcs=_never_called,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["unused"]}),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        if args.activation_checkpointing:
            # transformers acts on GRPOConfig(activation_checkpointing) only inside Trainer.train(),
            # which brushrl never calls: switched on here, and checked, since a learner without it
            # runs out of memory on the real model rather than failing here (docs/perf/gpu_smoke.md).
            self.trainer.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            if not self.trainer.model.is_activation_checkpointing:
                raise RuntimeError(f"activation checkpointing did not take on {type(model).__name__}")
        # Set by Trainer's training loop per accumulation window; our own accumulation weights the
        # micro-batch losses instead, so TRL must not divide them again.
        self.trainer.current_gradient_accumulation_steps = 1
        #: the DeepSpeed engine (None for the single learner)
        self.engine = None
        if ds_config is None:
            self.trainer.create_optimizer_and_scheduler(num_training_steps=total_steps)
        else:
            self.engine = zero.prepare_engine(self.trainer, total_steps)
        self.model = self.trainer.model
        self.device = self.trainer.accelerator.device
        self.pad_token_id = tokenizer.pad_token_id  # GRPOTrainer set it to EOS if it was missing
        #: this process's rank and the number of ranks (0 and 1 for the single learner)
        self.rank, self.world_size = self.trainer.accelerator.process_index, self.trainer.accelerator.num_processes
        self._lora_params = [p for p in self.model.parameters() if p.requires_grad]
        self.trainable_params, self.total_params = zero.parameter_counts(self.model)
        from brushrl.learner.kernels import bypass_refused_kernels, kernel_lines

        # every rank: fla's gated delta rule can't train on Hopper under Triton 3.4-3.7.0 (fla #640)
        bypass_refused_kernels(getattr(self.model.config, "model_type", ""))
        if self.rank == 0:
            print(f"[brushrl] learner: {self.trainable_params:,} trainable of {self.total_params:,} parameters "
                  f"({100 * self.trainable_params / max(self.total_params, 1):.3f}%), {self.describe()}", flush=True)
            for line in kernel_lines(getattr(self.model.config, "model_type", "")):  # what this env runs
                print(f"[brushrl] learner: {line}", flush=True)

    # ------------------------------------------------------------------ state
    @property
    def policy_version(self) -> int:
        """Number of optimizer steps taken (0 = the weights the learner was built with)."""
        return self._policy_version

    def describe(self) -> str:
        """The strategy in words, e.g. ``deepspeed ZeRO-3 x 2 workers (gloo), leaf modules [...]``."""
        if self.engine is None:
            return f"single learner on {self.device}"
        ds = self.cfg.deepspeed
        offload = [name for name, on in (("optimizer", ds.offload_optimizer), ("params", ds.offload_params)) if on]
        text = f"deepspeed ZeRO-{ds.zero_stage} x {self.world_size} workers ({torch.distributed.get_backend()})"
        text += f", offload {'+'.join(offload)}" if offload else ""
        return text + (f", ZeRO-3 leaf modules {self.leaf_modules}" if getattr(self, "leaf_modules", None) else "")

    @property
    def lr(self) -> float:
        """Learning rate the next :meth:`step` will use."""
        return float(self.trainer.lr_scheduler.get_last_lr()[0])

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """The LoRA weights as CPU tensors, keyed as ``peft.get_peft_model_state_dict`` names them.

        Apply with ``peft.set_peft_model_state_dict(peft_model, state)`` on a model wrapped with
        the same LoRA config.
        """
        with zero.gathered(self._lora_params):  # ZeRO-3: full LoRA weights on every rank meanwhile
            state = get_peft_model_state_dict(self.model)
            return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}

    def save_adapter(self, path: str | Path) -> Path:
        """Write the adapter (``adapter_config.json`` + ``adapter_model.safetensors``) to folder ``path``
        (rank 0 writes; under ZeRO-3 every rank takes part in gathering the weights)."""
        path = Path(path)
        with zero.gathered(self._lora_params):
            if self.rank == 0:
                self.model.save_pretrained(str(path), safe_serialization=True)
        return path

    def save_state(self, path: str | Path) -> Path:
        """Write everything a resumed run needs into folder ``path``: the adapter (as
        :meth:`save_adapter`) and ``learner_state.pt`` (optimizer and LR scheduler state dicts,
        ``policy_version``, the torch / Python / NumPy RNG states, CUDA's when on a GPU).

        The caller makes the folder visible atomically (``brushrl.artifacts.run_dir``).
        """
        path = Path(path)
        if self.engine is not None:
            return ZeroCheckpoint(self).save(path)
        path.mkdir(parents=True, exist_ok=True)
        self.save_adapter(path)
        state = {
            "optimizer": self.trainer.optimizer.state_dict(),
            "scheduler": self.trainer.lr_scheduler.state_dict(),
            "policy_version": self._policy_version,
            "rng": rng_state(),
        }
        torch.save(state, path / LEARNER_STATE)
        return path

    def load_state(self, path: str | Path) -> int:
        """Restore a folder written by :meth:`save_state`; returns the restored ``policy_version``.

        With DeepSpeed, see :meth:`brushrl.learner.zero_checkpoint.ZeroCheckpoint.load`.

        Raises:
            FileNotFoundError: ``learner_state.pt`` or the adapter is missing.
            ValueError: the adapter's keys are not this model's LoRA weights, or the checkpoint was
                written by a DeepSpeed learner.
        """
        path = Path(path)
        if self.engine is not None:
            self._policy_version = ZeroCheckpoint(self).load(path)
            return self._policy_version
        blob = torch.load(path / LEARNER_STATE, map_location="cpu", weights_only=False)
        if blob.get("strategy") == "deepspeed":
            raise ValueError(f"checkpoint {path} was written by {blob['workers']} DeepSpeed learner workers "
                             f"(ZeRO-{blob['zero_stage']}); resume it with learner.strategy 'deepspeed'")
        weights = load_peft_weights(str(path), device=str(self.device))
        expected = set(get_peft_model_state_dict(self.model))
        if set(weights) != expected:
            raise ValueError(f"checkpoint {path}: adapter keys differ from the learner's LoRA weights")
        with torch.no_grad():
            set_peft_model_state_dict(self.model, weights)
        self.trainer.optimizer.load_state_dict(blob["optimizer"])
        self.trainer.lr_scheduler.load_state_dict(blob["scheduler"])
        self._policy_version = int(blob["policy_version"])
        set_rng_state(blob["rng"])
        return self._policy_version

    # ------------------------------------------------------------- log-probs
    def _token_logps(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-token log-probs (B, T) float32 of the completions under the current weights, no grad.

        Uses the fused LM head TRL installs (``trl.trainer.utils.add_fused_lm_head``), as its loss does.
        """
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        t = batch["completion_ids"].size(1)
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        labels[:, :-t] = -100
        with torch.no_grad(), self.trainer.accelerator.autocast():
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True,
                             **_vision_inputs(batch))
        return out.log_probs[:, -t:].float() * batch["completion_mask"]

    def completion_logprobs(self, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                            vision: dict | None = None) -> list[float]:
        """Log-probs (natural log, temperature 1) of each completion token under the current policy.

        Args:
            prompt_ids, completion_ids: the sequence.
            vision: pixel inputs of the images in it (``brushrl.vision``), or None.

        Returns:
            ``len(completion_ids)`` floats.
        """
        sample = TrainSample(list(prompt_ids), list(completion_ids), [0.0] * len(completion_ids), None,
                             vision=vision)
        batch = collate([sample], [0.0], self.pad_token_id, self.device)
        was_training = self.model.training
        self.model.eval()
        try:
            return self._token_logps(batch)[0].tolist()
        finally:
            self.model.train(was_training)

    # ------------------------------------------------------------------ step
    def _select(self, groups: Sequence[Sequence[TrainSample]]) -> tuple[list[TrainSample], list[float], dict]:
        """Filter groups, compute advantages, drop None-reward and empty samples."""
        counts = {"groups_accepted": 0.0, "groups_too_few_valid": 0.0, "groups_zero_variance": 0.0}
        kept = []
        for group in groups:
            verdict = self.group_filter.verdict([s.reward for s in group])
            counts[f"groups_{verdict}"] += 1
            if verdict == ACCEPTED:
                kept.append(group)
        rewards = [[s.reward for s in g] for g in kept]
        if self.cfg.advantage == "gate_quality":
            advs = gate_quality_advantages(rewards, [[s.passed for s in g] for g in kept], self.cfg.zero_variance_tol,
                                            self.cfg.scale_rewards)
        else:
            advs = batch_advantages(rewards, self.cfg.scale_rewards, self.cfg.zero_variance_tol)
        samples, advantages = [], []
        for group, group_advs in zip(kept, advs):
            for sample, adv in zip(group, group_advs):
                if adv is not None and sample.n_policy_tokens:
                    samples.append(sample)
                    advantages.append(adv)
        counts["samples_excluded"] = float(sum(len(g) for g in kept) - len(samples))
        return samples, advantages, counts

    def _micro_weight(self, batch: dict[str, torch.Tensor], n_samples: int, n_tokens: int) -> float:
        """Factor on TRL's micro-batch loss so that the factored losses of all micro-batches of all
        ranks sum to W x the full-batch loss (``_MICRO_WEIGHT``; ZeRO divides gradients by W; TRL's
        ``"one"`` losses already divide ``num_items_in_batch`` by the number of processes)."""
        kind = _MICRO_WEIGHT[self.cfg.loss_type]
        if kind == "seq":
            return self.world_size * batch["completion_ids"].size(0) / n_samples
        if kind == "tok":
            return self.world_size * float(_loss_mask(batch).sum()) / n_tokens
        return 1.0

    def _my_micro_batches(self, samples: list[TrainSample]) -> list[tuple[list[int], int]]:
        """This rank's micro-batches: (indices into ``samples``, rows). Rows beyond the indices are
        padding, the same on every rank (``brushrl.learner.shard.micro_batch_sizes``); one rank
        gives exactly the single learner's micro-batches."""
        shards = shard_by_tokens([len(s.prompt_ids) + len(s.completion_ids) for s in samples], self.world_size)
        mine, size = shards[self.rank], self.micro_batch_size
        return [(mine[k * size:(k + 1) * size], rows) for k, rows in enumerate(micro_batch_sizes(shards, size))]

    def _reduce(self, values: list[float], op=None) -> list[float]:
        """``values`` combined element-wise over the ranks (``torch.distributed.ReduceOp``, default
        SUM); unchanged for one rank. A collective: every rank calls it with the same length."""
        if self.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t, op=op or torch.distributed.ReduceOp.SUM)
        return t.tolist()

    def _loss_inputs(self, batch: dict[str, torch.Tensor], n_tokens: int, stats: dict) -> dict[str, torch.Tensor]:
        """The batch dict ``GRPOTrainer._compute_loss`` reads (see the module docstring)."""
        mask = _loss_mask(batch)
        keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask", *_VISION_KEYS,
                "num_images")
        inputs = {k: batch[k] for k in keys if k in batch}
        inputs["num_items_in_batch"] = torch.tensor(float(n_tokens), device=self.device)
        if self.truncated_is_clip is None:
            inputs["advantages"] = batch["advantages"]
            inputs["old_per_token_logps"] = batch["behaviour_logps"]
        else:
            log_ratio = (self._token_logps(batch) - batch["behaviour_logps"]) * mask
            ratio = torch.exp(log_ratio)
            weight = torch.clamp(ratio, max=self.truncated_is_clip)
            inputs["advantages"] = batch["advantages"].unsqueeze(1) * weight
            real = mask.bool()
            if real.any():  # a padding-only micro-batch (DeepSpeed, short shard) has no real token
                stats["is_ratio_sum"] += float(ratio[real].sum())
                stats["is_ratio_max"] = max(stats["is_ratio_max"], float(ratio[real].max()))
                stats["is_truncated"] += float((ratio[real] > self.truncated_is_clip).sum())
        if self.cfg.beta != 0.0:
            with self.model.disable_adapter():
                inputs["ref_per_token_logps"] = self._token_logps(batch)
        return inputs

    def _trl_metrics(self) -> dict[str, float]:
        """Average and clear the per-micro-batch metrics TRL's loss logged (clip ratios, entropy, kl)."""
        logged = getattr(self.trainer, "_metrics", {}).get("train", {})  # TRL internals: optional
        out = {ours: sum(logged[k]) / len(logged[k]) for k, ours in _TRL_METRICS.items() if logged.get(k)}
        logged.clear()
        return out

    def step(self, groups: Sequence[Sequence[TrainSample | Sample]]) -> dict[str, float]:
        """One GRPO optimizer step on ``groups`` (each the G samples of one prompt).

        Groups the :class:`~brushrl.learner.advantages.GroupFilter` rejects are dropped (and
        counted); in the rest, samples with a None reward are left out. Advantages follow
        ``cfg.scale_rewards`` (:func:`~brushrl.learner.advantages.batch_advantages`). The loss
        is TRL's; then gradient clipping at ``cfg.max_grad_norm``, one optimizer and one
        scheduler step, and ``policy_version`` goes up by one. When nothing is left to train on,
        no optimizer step is taken and ``skipped`` is 1.

        Args:
            groups: lists of :class:`~brushrl.learner.samples.TrainSample`, pipeline
                :class:`~brushrl.types.Sample` or multi-turn :class:`~brushrl.types.Trajectory`
                (one sequence per trajectory, critique tokens masked out of the loss:
                ``TrainSample.from_trajectory``).

        Returns:
            ``loss`` (the full-batch TRL loss), ``grad_norm`` (before clipping), ``lr`` (used for
            this update), ``n_samples``, ``n_tokens`` (completion tokens trained on: the policy's own,
            critique tokens of trajectories not counted),
            ``adv_mean``, ``adv_abs_mean``, ``groups_accepted``, ``groups_too_few_valid``,
            ``groups_zero_variance``, ``samples_excluded`` (None rewards in accepted groups),
            ``clip_ratio`` (+ ``_low``/``_high``), ``entropy`` (mean per-token, nats), ``kl`` when
            beta > 0, ``is_ratio_mean``/``is_ratio_max``/``is_truncated_frac`` with truncated IS,
            ``staleness_mean``/``staleness_max`` (policy versions behind) when samples carry a
            version, ``policy_version`` (after the step), ``skipped`` and ``step_s`` (wall seconds).
        """
        t0 = time.perf_counter()
        version_before = self._policy_version
        train_groups = [[as_train_sample(s) for s in g] for g in groups]
        samples, advantages, metrics = self._select(train_groups)
        n_samples = len(samples)
        n_tokens = sum(s.n_policy_tokens for s in samples)
        metrics.update(n_samples=float(n_samples), n_tokens=float(n_tokens), lr=self.lr, skipped=0.0)
        if n_samples == 0:
            metrics.update(skipped=1.0, policy_version=float(version_before), step_s=time.perf_counter() - t0)
            return metrics

        self.model.train()
        optimizer = self.trainer.optimizer
        accelerator = self.trainer.accelerator
        optimizer.zero_grad(set_to_none=True)
        stats = {"is_ratio_sum": 0.0, "is_ratio_max": 0.0, "is_truncated": 0.0}
        loss_total = 0.0
        micro_batches = self._my_micro_batches(samples)
        for k, (idx, rows) in enumerate(micro_batches):
            # Padding rows repeat sample 0 with advantage 0 and an all-zero completion mask: every
            # TRL loss and metric masks by it, so they add nothing (their NaN per-sequence metrics
            # are skipped by TRL's nanmin/nanmax).
            pad = rows - len(idx)
            batch = collate([samples[i] for i in idx + [0] * pad], [advantages[i] for i in idx] + [0.0] * pad,
                            self.pad_token_id, self.device)
            batch["completion_mask"][len(idx):] = 0
            inputs = self._loss_inputs(batch, n_tokens, stats)
            with self.trainer.compute_loss_context_manager():
                # Through the engine, as the HF Trainer passes ``model_wrapped``: DeepSpeed's forward
                # advances ZeRO's micro-step counter, without which ZeRO-3 overwrites the gradient
                # partitions of earlier micro-batches instead of accumulating them (measured).
                loss = self.trainer.compute_loss(self.trainer.model_wrapped, inputs)
            loss = loss * self._micro_weight(batch, n_samples, n_tokens)
            # DeepSpeed steps inside the backward that has sync_gradients set (as the HF Trainer's loop
            # sets it per micro-step); without DeepSpeed the flag changes nothing here.
            accelerator.gradient_state._set_sync_gradients(k == len(micro_batches) - 1)
            accelerator.backward(loss)
            loss_total += float(loss.detach()) / self.world_size
        grad_norm = accelerator.clip_grad_norm_(self._lora_params, self.cfg.max_grad_norm)
        optimizer.step()
        loss_total, stats["is_ratio_sum"], stats["is_truncated"] = self._reduce(
            [loss_total, stats["is_ratio_sum"], stats["is_truncated"]])
        stats["is_ratio_max"] = self._reduce([stats["is_ratio_max"]], torch.distributed.ReduceOp.MAX)[0]
        self.trainer.lr_scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        self._policy_version += 1

        metrics.update(self._trl_metrics())
        metrics.update(
            loss=loss_total,
            grad_norm=float(grad_norm),
            adv_mean=sum(advantages) / n_samples,
            adv_abs_mean=sum(abs(a) for a in advantages) / n_samples,
            policy_version=float(self._policy_version),
        )
        if self.truncated_is_clip is not None:
            metrics.update(
                is_ratio_mean=stats["is_ratio_sum"] / n_tokens,
                is_ratio_max=stats["is_ratio_max"],
                is_truncated_frac=stats["is_truncated"] / n_tokens,
            )
        versions = [s.policy_version for s in samples if s.policy_version is not None]
        if versions:
            lags = [version_before - v for v in versions]
            metrics.update(staleness_mean=sum(lags) / len(lags), staleness_max=float(max(lags)))
        metrics["step_s"] = time.perf_counter() - t0
        return metrics
