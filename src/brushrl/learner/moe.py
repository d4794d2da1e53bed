"""Mixture-of-experts models in the learner: ZeRO-3 leaf modules and which weights get LoRA (on a
mixture of experts or a vision-language model, :func:`lora_targets`).

transformers 5 fuses each MoE layer's routed experts into one ``*Experts`` module holding 3-D
weights (e.g. ``Qwen3MoeExperts.gate_up_proj`` of shape (experts, 2 x intermediate, hidden)); they
are not ``nn.Linear`` layers. PEFT 0.21 still maps ``"all-linear"`` on such a model to what it meant
under transformers 4, routed experts and router included (``peft.utils.transformers_weight_conversion``
adds them as ``target_parameters``), so :func:`lora_targets` resolves the targets itself and
``learner.lora.experts`` decides about the experts.
"""

from __future__ import annotations

import re

from torch import nn


def _experts_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Modules holding a model's routed experts: class name ending in ``Experts`` (transformers 5
    fuses each layer's experts into one such module with 3-D weights, e.g. ``Qwen3MoeExperts``)."""
    return [(name, m) for name, m in model.named_modules() if type(m).__name__.endswith("Experts")]


def _moe_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The mixture-of-experts blocks: modules with an ``*Experts`` child (the router and the experts
    it dispatches to, e.g. ``Qwen3MoeSparseMoeBlock``), with their full names."""
    return [(name, m) for name, m in model.named_modules()
            if any(type(c).__name__.endswith("Experts") for c in m.children())]


def moe_block_classes(model: nn.Module) -> list[type]:
    """Classes of the mixture-of-experts blocks (:func:`_moe_blocks`), in order of first occurrence."""
    return list(dict.fromkeys(type(m) for _, m in _moe_blocks(model)))


def set_leaf_modules(model: nn.Module, names: list[str] | None) -> list[str]:
    """Mark ZeRO-3 leaf modules (``deepspeed.utils.set_z3_leaf_modules``): ZeRO-3 then gathers each
    such block's weights at once when it starts, instead of hooking every child. A MoE block runs
    only the experts its tokens were routed to, so per-child hooks fetch different modules on
    different ranks, in a different order each pass (hangs: DeepSpeed #4094, #4808; the API: DeepSpeed
    PR #4966; newer DeepSpeed also marks known Mixtral/Qwen MoE classes by default, PR #7604).

    Args:
        model: the model before ``deepspeed.initialize``.
        names: class names (``learner.deepspeed.leaf_modules``); None: :func:`moe_block_classes`.

    Returns:
        The class names marked (empty for a dense model).

    Raises:
        ValueError: a configured name is not the class of any module of the model.
    """
    if names is None:
        classes = moe_block_classes(model)
    else:
        by_name = {type(m).__name__: type(m) for m in model.modules()}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ValueError(f"learner.deepspeed.leaf_modules: no module of class {missing} in the model")
        classes = [by_name[n] for n in names]
    if classes:
        from deepspeed.utils import set_z3_leaf_modules

        set_z3_leaf_modules(model, classes)
    return [c.__name__ for c in classes]


def expert_lora_targets(model: nn.Module) -> list[str]:
    """PEFT ``target_parameters`` for LoRA on the routed experts: the full name of each 3-D weight
    of each ``*Experts`` module (e.g. ``model.layers.0.mlp.experts.gate_up_proj``).

    Raises:
        ValueError: the model has no ``*Experts`` module with 3-D weights (not a mixture of experts).
    """
    targets = [f"{name}.{pname}" for name, module in _experts_modules(model)
               for pname, p in module.named_parameters(recurse=False) if p.dim() == 3]
    if not targets:
        raise ValueError("learner.lora.experts: the model has no routed experts (no *Experts module with 3-D weights)")
    return targets


def language_model_linears(model: nn.Module) -> list[str]:
    """Full names of the ``nn.Linear`` layers LoRA trains under ``"all-linear"``: those of the language
    model (``model.get_decoder()``: the text model of a causal LM, ``model.language_model`` of a
    vision-language model) outside its mixture-of-experts blocks; so not the vision tower or its
    merger / connector, the output head, the router, routed or shared experts."""
    names = {id(m): n for n, m in model.named_modules()}
    decoder = names[id(model.get_decoder())]
    blocks = [name for name, _ in _moe_blocks(model)]
    prefix = f"{decoder}." if decoder else ""
    return [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.startswith(prefix) and not any(name.startswith(f"{b}.") for b in blocks)]


def lora_targets(model: nn.Module, target_modules: str | list[str], experts: bool) -> tuple[str | list[str], list[str] | None]:
    """PEFT ``(target_modules, target_parameters)`` for ``learner.lora`` (the learner and the
    transformers rollout engine both build their LoRA from this).

    ``"all-linear"`` means :func:`language_model_linears`. Where PEFT's own ``"all-linear"`` (every
    ``nn.Linear`` but the output head; on a mixture of experts PEFT 0.21 adds the routed experts and
    router as ``target_parameters``) is that same set (a dense causal LM), it is kept as configured;
    otherwise (a mixture of experts, a vision-language model) it becomes a regex of those full names,
    so the router, routed and shared experts stay frozen (as in the reproduction without
    ``--lora-experts``) and so does the vision tower (vLLM serves LoRA on the language model only,
    ``LoRAConfig.enable_tower_connector_lora`` off). ``experts`` adds the routed experts' 3-D weights
    (:func:`expert_lora_targets`). An explicit ``target_modules`` list is passed through as given.

    Raises:
        ValueError: ``experts`` on a model without routed experts.
    """
    params = expert_lora_targets(model) if experts else None
    if target_modules != "all-linear":
        return target_modules, params
    head = model.get_output_embeddings()
    peft_all = [name for name, m in model.named_modules() if isinstance(m, nn.Linear) and m is not head]
    linear = language_model_linears(model)
    if linear == peft_all and not _moe_blocks(model):  # on a MoE, PEFT's "all-linear" adds the experts too
        return target_modules, params
    return "^(" + "|".join(re.escape(n) for n in linear) + ")$", params


def trained_module_names(model: nn.Module, target_modules: str | list[str], experts: bool) -> list[str]:
    """Full names of the modules a PEFT LoRA built as ``GRPOLearner`` builds it adapts
    (:func:`lora_targets`, resolved on ``model``; works on a meta-device model).

    ``"all-linear"`` that ``lora_targets`` keeps means PEFT's own rule: every ``nn.Linear`` but the
    output head; a regex is matched in full against module names (PEFT's rule for a string); a list
    names module-name suffixes. Routed experts (``experts``) add the ``*Experts`` modules.
    """
    targets, params = lora_targets(model, target_modules, experts)
    head = model.get_output_embeddings()
    if targets == "all-linear":
        names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and m is not head]
    elif isinstance(targets, str):
        names = [n for n, _ in model.named_modules() if re.fullmatch(targets, n)]
    else:
        names = [n for n, _ in model.named_modules() if n.rsplit(".", 1)[-1] in targets]
    names += sorted({p.rsplit(".", 1)[0] for p in params or []})
    return names


#: What PEFT puts before a module's name in the keys of a saved adapter (``PeftModel.base_model``, a
#: ``LoraModel``, whose ``model`` is the adapted model): ``base_model.model.<module>.lora_A.weight``.
ADAPTER_KEY_PREFIX = "base_model.model."
_ADAPTER_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?:A|B|embedding_A|embedding_B)(?:\.weight)?$")


def adapter_key_problems(keys, module_names) -> list[str]:
    """Why the keys of a saved LoRA adapter (``adapter_model.safetensors``, written by PEFT's
    ``save_pretrained`` / ``get_peft_model_state_dict``) are not exactly the adapter of the modules
    ``module_names``; empty when they are.

    ``module_names`` is what the serving side expects: :func:`trained_module_names` of the class
    ``brushrl.policy.model.policy_class`` picks, built on the meta device
    (``brushrl.policy.model.meta_model``); for Qwen3.5-MoE ``model.language_model.layers.N...``, the
    names vLLM's weight mapper knows (a text-only ``Qwen3_5MoeForCausalLM`` adapter's
    ``model.layers.N...`` reach no vLLM module: vllm-project/vllm#48019).

    Args:
        keys: tensor names of the saved adapter.
        module_names: full module names the adapter must cover, each with a ``lora_A`` and a ``lora_B``.

    Returns:
        One line per problem (at most 3 names quoted each): keys that are not PEFT LoRA keys,
        modules whose A or B is missing, adapter modules not expected, expected modules absent.
    """
    expected = set(module_names)
    parts: dict[str, set[str]] = {}
    bad = []
    for key in keys:
        m = _ADAPTER_KEY.match(key)
        if m is None:
            bad.append(key)
            continue
        parts.setdefault(m["module"], set()).add("B" if ".lora_B" in key or ".lora_embedding_B" in key else "A")
    problems = []
    if bad:
        problems.append(f"{len(bad)} keys are not PEFT LoRA keys ({ADAPTER_KEY_PREFIX}<module>.lora_A/B...), "
                        f"e.g. {bad[:3]}")
    half = sorted(m for m, p in parts.items() if p != {"A", "B"})
    if half:
        problems.append(f"{len(half)} adapter modules lack lora_A or lora_B, e.g. {half[:3]}")
    extra = sorted(set(parts) - expected)
    if extra:
        problems.append(f"{len(extra)} adapter modules are not modules the serving class adapts, e.g. {extra[:3]}")
    missing = sorted(expected - set(parts))
    if missing:
        problems.append(f"{len(missing)} modules the serving class adapts have no adapter weights, e.g. {missing[:3]}")
    return problems
