"""Which implementation transformers will run for the policy's linear-attention layers, in this env.

Qwen3.5's Gated DeltaNet layers (3 of every 4 layers of Qwen3.5-35B-A3B) call four functions that
transformers binds once, when its modeling module is imported
(``transformers.integrations.hub_kernels.use_kernel_func_from_hub_with_fallback``, transformers 5.x):
the kernel of the original package when it imports, else its own PyTorch reference code, "correct
but much slower" (its own warning, printed once at the first call). The packages:

* ``flash-linear-attention`` (import name ``fla``; Triton, pure Python): ``chunk_gated_delta_rule``
  (the training and prefill path) and ``fused_recurrent_gated_delta_rule`` (decoding);
* ``causal-conv1d`` (CUDA extension): ``causal_conv1d_fn`` and ``causal_conv1d_update``, the short
  convolution before the delta rule.

What was bound is read from the bound function itself (its closure's ``implementation``), so the
report is what the learner will run, not a guess from what imports. Checked on CPU with a stand-in
``fla`` package (``tests/test_kernels.py``); the GPU image installs both (cluster/docker/Dockerfile).
"""

from __future__ import annotations

import importlib

#: model_type -> (modeling module, {bound function name: (package, distribution)}).
LINEAR_ATTENTION = {
    model_type: (f"transformers.models.{model_type}.modeling_{model_type}", {
        "torch_chunk_gated_delta_rule": ("fla", "flash-linear-attention"),
        "torch_recurrent_gated_delta_rule": ("fla", "flash-linear-attention"),
        "causal_conv1d_fn": ("causal_conv1d", "causal-conv1d"),
        "causal_conv1d_update": ("causal_conv1d", "causal-conv1d"),
    })
    for model_type in ("qwen3_5_moe", "qwen3_5", "qwen3_next")
}


def kernel_report(model_type: str) -> dict[str, str] | None:
    """The implementation transformers bound for each linear-attention function of ``model_type``
    in this interpreter: ``{function: "<module>.<name>" of the kernel, or "torch (install
    <distribution>)"}``; None for a model without such layers (nothing to choose).

    Raises:
        RuntimeError: a function is not bound the way this module reads it (a transformers release
            that binds kernels otherwise: the report would be a guess, so it is refused).
    """
    if model_type not in LINEAR_ATTENTION:
        return None
    module_name, functions = LINEAR_ATTENTION[model_type]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None  # this transformers has no such model: nothing will run
    out = {}
    for name, (_, distribution) in functions.items():
        fn = getattr(module, name, None)
        cells = dict(zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ()))
        if "implementation" not in cells or "is_new_implementation" not in cells:
            raise RuntimeError(f"{module_name}.{name} is not bound by use_kernel_func_from_hub_with_fallback; "
                               "brushrl.learner.kernels cannot tell which kernel it runs")
        impl = cells["implementation"].cell_contents
        label = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', type(impl).__name__)}"
        out[name] = (label if cells["is_new_implementation"].cell_contents
                     else f"torch (install {distribution})")
    return out


def kernel_lines(model_type: str) -> list[str]:
    """:func:`kernel_report` as lines for ``brushrl config check`` and the learner's log (empty
    when the model has no linear-attention layers)."""
    report = kernel_report(model_type)
    if not report:
        return []
    slow = sum(v.startswith("torch") for v in report.values())
    head = (f"linear-attention kernels ({model_type}, this env): "
            + ("all optimised" if not slow else f"{slow} of {len(report)} on transformers' PyTorch fallback"))
    return [head] + [f"  {name}: {impl}" for name, impl in report.items()]
