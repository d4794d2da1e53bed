"""The learner's LoRA parameters, counted on the policy's real module tree (for the memory plan).

The policy's architecture is built on the meta device (no weights, no memory) from its
``config.json`` (a local folder's own, or the shipped one of a hub id: ``brushrl.hub.shipped``)
through the class the learner loads (``brushrl.policy.model.policy_class``); the adapted modules are
resolved by the learner's own rule (``brushrl.learner.moe.trained_module_names``, which calls
``lora_targets``), and each adds what PEFT gives it:

* an ``nn.Linear`` of ``in -> out``: ``r x (in + out)`` (PEFT ``lora.Linear``: ``lora_A`` in -> r,
  ``lora_B`` r -> out);
* a routed-experts 3-D weight of shape ``(E, a, b)`` (``learner.lora.experts``): ``r x E x (a + b)``
  (PEFT ``lora.ParamWrapper.update_layer``: ``lora_A`` in -> r E, ``lora_B`` r E -> out).

So the count is the one the learner's PEFT model reports (``tests/test_memory_plan.py`` checks it
on the tiny twins), unlike the formula of ``brushrl.plan.models`` (``ModelFigures.lora_parameters``),
which adapts the router, shared expert and vision tower too; that formula stays the fallback where
no config can be built (the memory plan says which it used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class LoraTargetError(ValueError):
    """``learner.lora`` selects what the model cannot give (``experts`` on a model without routed
    experts): the learner would fail at start, so the plan reports it instead of falling back."""


@dataclass(frozen=True)
class LoraCount:
    """Trainable LoRA parameters of the learner's adapter.

    Attributes:
        params: parameters (elements).
        modules: adapted modules (``nn.Linear`` layers, plus ``*Experts`` modules with experts).
        source: ``module tree`` (counted on the meta-device model), ``formula`` (the fallback) or
            ``none`` (the plan could not count it and reported why).
    """

    params: int
    modules: int
    source: str


def policy_config(model: str, tiny_cfg: dict | None = None):
    """The transformers configuration of policy ``model``: ``tiny_cfg`` for ``tiny`` (a Qwen3 causal LM,
    ``brushrl.plan.models.tiny_config``), a local folder's ``config.json``, else the shipped one.

    Raises:
        LookupError: no config for ``model`` (``brushrl.hub.shipped.NotShipped`` is one).
        ValueError: the config names a ``model_type`` this transformers does not know.
    """
    from transformers import AutoConfig

    if model == "tiny":
        if tiny_cfg is None:
            raise LookupError("policy.model tiny: no tiny config given")
        return AutoConfig.for_model("qwen3", **tiny_cfg)
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return AutoConfig.from_pretrained(path)
    from brushrl.hub.shipped import shipped_config

    cfg = shipped_config(model)
    return AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})


def count_lora(model, r: int, target_modules: str | list[str], experts: bool) -> tuple[int, int]:
    """(parameters, modules) of a rank-``r`` LoRA built as ``GRPOLearner`` builds it on ``model``
    (module docstring); works on a meta-device model.

    Raises:
        LoraTargetError: ``experts`` on a model without routed experts (``brushrl.learner.moe``).
    """
    from torch import nn

    from brushrl.learner.moe import trained_module_names

    modules = dict(model.named_modules())
    total, n = 0, 0
    try:
        names = trained_module_names(model, target_modules, experts)
    except ValueError as exc:
        raise LoraTargetError(str(exc)) from exc
    for name in names:
        m = modules[name]
        if isinstance(m, nn.Linear):
            total += r * (m.in_features + m.out_features)
            n += 1
        elif experts and type(m).__name__.endswith("Experts"):
            for p in m.parameters(recurse=False):
                if p.dim() == 3:
                    total += r * p.shape[0] * (p.shape[1] + p.shape[2])
            n += 1
    return total, n


def policy_lora(model: str, r: int, target_modules: str | list[str], experts: bool,
                tiny_cfg: dict | None = None) -> LoraCount:
    """The learner's LoRA parameters for policy ``model`` counted on its meta-device module tree.

    Raises:
        LookupError: no config for ``model`` (the caller falls back to the formula).
        ValueError: transformers cannot build the config (the caller falls back to the formula).
        LoraTargetError: ``experts`` on a dense model.
    """
    from brushrl.policy.model import meta_model

    params, modules = count_lora(meta_model(policy_config(model, tiny_cfg)), r, target_modules, experts)
    return LoraCount(params, modules, "module tree")

