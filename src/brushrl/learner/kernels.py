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

One combination is refused by fla itself, at the first backward: its gated ``chunk_bwd_dqkwg`` on a
Hopper GPU (compute capability 9.x) under Triton >= 3.4.0 and < 3.7.1 gives wrong gradients (fla issue
#640; fla 0.6.0 raises unless tilelang is installed). The H200 image's torch 2.11 ships Triton 3.6.0.
:func:`bypass_refused_kernels` (called by :func:`kernel_report`, and by ``GRPOLearner`` on every rank)
then binds transformers' own PyTorch code for both gated-delta-rule functions, by setting the
bound function's closure back to the function it wraps (so transformers' own fallback behaviour,
its warning and its refusal of packed sequences, applies), and the report says so.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect

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


#: the functions bound to fla's gated delta rule, whose backward fla refuses on Hopper (fla #640)
FLA_GATED = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")
#: (module, function) -> why this process runs transformers' torch code instead of fla's kernel
BYPASSED: dict[tuple[str, str], str] = {}


def _cuda_capability() -> tuple[int, int] | None:
    import torch

    return torch.cuda.get_device_capability() if torch.cuda.is_available() else None


def _triton_version() -> str | None:
    try:
        return importlib.import_module("triton").__version__  # what fla itself reads
    except ImportError:
        return None


def _cells(fn) -> dict:
    return dict(zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ()))


def fla_refusal() -> str | None:
    """Why fla's gated delta rule cannot train here (fla #640), or None: a CUDA device of compute
    capability 9.x, Triton >= 3.4.0 and < 3.7.1, and no tilelang (fla's way round it)."""
    from packaging.version import Version

    cap, triton = _cuda_capability(), _triton_version()
    if cap is None or cap[0] != 9 or triton is None or not Version("3.4.0") <= Version(triton) < Version("3.7.1"):
        return None
    if importlib.util.find_spec("tilelang") is not None:
        return None
    try:
        fla = importlib.metadata.version("fla-core")
    except importlib.metadata.PackageNotFoundError:
        fla = "?"
    return (f"fla {fla} refuses its gated chunk_bwd_dqkwg on Hopper (sm_{cap[0]}{cap[1]}) with Triton {triton} "
            f"(>= 3.4.0, < 3.7.1: wrong gradients, fla issue #640); way out: Triton >= 3.7.1 or tilelang")


def bypass_refused_kernels(model_type: str) -> list[str]:
    """Where fla is bound for ``model_type``'s gated delta rule but :func:`fla_refusal` says it cannot
    train here, bind transformers' PyTorch code for both functions in this process (slower; its own
    activation memory). Idempotent; returns the functions bypassed (empty: nothing to do)."""
    if model_type not in LINEAR_ATTENTION:
        return []
    module_name = LINEAR_ATTENTION[model_type][0]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []
    done = []
    for name in FLA_GATED:
        cells = _cells(getattr(module, name, None))
        if not {"implementation", "is_new_implementation", "torch_function"} <= cells.keys():
            continue  # kernel_report refuses such a binding
        impl = cells["implementation"].cell_contents
        if not cells["is_new_implementation"].cell_contents or not getattr(impl, "__module__", "").startswith("fla"):
            continue
        why = fla_refusal()
        if why is None:
            return done
        torch_fn = cells["torch_function"].cell_contents
        cells["implementation"].cell_contents = torch_fn
        cells["is_new_implementation"].cell_contents = False
        if "applicable_params" in cells:
            cells["applicable_params"].cell_contents = tuple(inspect.signature(torch_fn).parameters)
        BYPASSED[(module_name, name)] = why
        done.append(name)
    return done


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
    bypass_refused_kernels(model_type)
    out = {}
    for name, (_, distribution) in functions.items():
        cells = _cells(getattr(module, name, None))
        if "implementation" not in cells or "is_new_implementation" not in cells:
            raise RuntimeError(f"{module_name}.{name} is not bound by use_kernel_func_from_hub_with_fallback; "
                               "brushrl.learner.kernels cannot tell which kernel it runs")
        impl = cells["implementation"].cell_contents
        label = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', type(impl).__name__)}"
        bypassed = BYPASSED.get((module_name, name))
        out[name] = (label if cells["is_new_implementation"].cell_contents
                     else f"torch (BYPASSED: {bypassed})" if bypassed else f"torch (install {distribution})")
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
    lines = [head] + [f"  {name}: {impl}" for name, impl in report.items()]
    if any("BYPASSED" in impl for impl in report.values()):
        lines.append("  WARNING: the gated delta rule runs transformers' PyTorch code, not fla's kernel (fla #640): "
                     "slower, and more activation memory; install Triton >= 3.7.1 or tilelang for the kernel")
    return lines
