"""Which linear-attention kernels transformers binds for Qwen3.5 (``brushrl.learner.kernels``): the
report read from the bound functions, in this env (no kernel packages: the PyTorch fallback) and in
a fresh interpreter with a stand-in ``fla`` package on the path, whose kernel the Qwen3.5-MoE twin's
forward then really calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from brushrl.learner.kernels import kernel_lines, kernel_report

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for flash-linear-attention's two delta-rule kernels: importable as transformers looks
# for them (fla.ops.gated_delta_rule), and loud when called.
STAND_IN = '''
def chunk_gated_delta_rule(q, k, v, g, beta, **kwargs):
    raise RuntimeError("stand-in fla chunk kernel called")

def fused_recurrent_gated_delta_rule(q, k, v, g, beta, **kwargs):
    raise RuntimeError("stand-in fla recurrent kernel called")
'''

PROBE = '''
import json, sys, torch
from brushrl.learner.kernels import kernel_report
from brushrl.hub.twins import build_twin
from brushrl.policy.model import policy_class
from transformers import AutoConfig
report = kernel_report("qwen3_5_moe")
folder = build_twin("Qwen/Qwen3.5-35B-A3B", sys.argv[1])
cfg = AutoConfig.from_pretrained(folder)
model = policy_class(cfg)(cfg).eval()
try:
    model(input_ids=torch.tensor([[1, 2, 3, 4]]))
    called = None
except RuntimeError as e:
    called = str(e)
print(json.dumps({"report": report, "called": called}))
'''


def test_this_env_runs_the_pytorch_fallback_and_says_what_to_install():
    report = kernel_report("qwen3_5_moe")
    assert report == {
        "torch_chunk_gated_delta_rule": "torch (install flash-linear-attention)",
        "torch_recurrent_gated_delta_rule": "torch (install flash-linear-attention)",
        "causal_conv1d_fn": "torch (install causal-conv1d)",
        "causal_conv1d_update": "torch (install causal-conv1d)",
    }
    assert kernel_lines("qwen3_5_moe")[0].endswith("4 of 4 on transformers' PyTorch fallback")
    assert kernel_report("qwen3") is None and kernel_lines("llama") == []  # no linear attention: no choice


def _run_with_stand_in_fla(tmp_path, probe: str) -> dict:
    """Run ``probe`` in a fresh interpreter with the stand-in ``fla`` package first on the path;
    returns the JSON of its last output line."""
    pkg = tmp_path / "pkgs" / "fla" / "ops"
    pkg.mkdir(parents=True)
    (tmp_path / "pkgs" / "fla" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "gated_delta_rule.py").write_text(STAND_IN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkgs"), str(ROOT / "src")])}
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "twin")], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_installed_kernel_is_reported_and_is_what_the_model_calls(tmp_path):
    got = _run_with_stand_in_fla(tmp_path, PROBE)
    assert got["report"]["torch_chunk_gated_delta_rule"] == "fla.ops.gated_delta_rule.chunk_gated_delta_rule"
    assert got["report"]["torch_recurrent_gated_delta_rule"] == "fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule"
    assert got["report"]["causal_conv1d_fn"] == "torch (install causal-conv1d)"
    # the twin's Gated DeltaNet layers run the kernel the report names (a prefill: the chunked rule)
    assert got["called"] == "stand-in fla chunk kernel called"


# fla #640: with fla bound, a stand-in Hopper (compute capability 9.0) and Triton version decide the binding
HOPPER_PROBE = '''
import json, sys, torch
from brushrl.learner import kernels
from brushrl.hub.twins import build_twin
from brushrl.policy.model import policy_class
from transformers import AutoConfig
refused = {}
for cap, triton in [((9, 0), "3.6.0"), ((9, 0), "3.4.0"), ((9, 0), "3.7.1"), ((9, 0), "3.3.1"), ((8, 0), "3.6.0"),
                    (None, "3.6.0"), ((9, 0), None)]:
    kernels._cuda_capability, kernels._triton_version = (lambda c=cap: c), (lambda t=triton: t)
    refused[f"{cap}/{triton}"] = kernels.fla_refusal()
    if cap == (9, 0) and triton == "3.7.1":
        before = kernels.kernel_report("qwen3_5_moe")  # Triton 3.7.1: fla stays bound
kernels._cuda_capability, kernels._triton_version = (lambda: (9, 0)), (lambda: "3.6.0")
lines = kernels.kernel_lines("qwen3_5_moe")
again = kernels.bypass_refused_kernels("qwen3_5_moe")
folder = build_twin("Qwen/Qwen3.5-35B-A3B", sys.argv[1])
cfg = AutoConfig.from_pretrained(folder)
model = policy_class(cfg)(cfg).eval()
out = model(input_ids=torch.tensor([[1, 2, 3, 4]]))
print(json.dumps({"refused": refused, "before": before, "lines": lines, "again": again,
                  "finite": bool(torch.isfinite(out.logits).all())}))
'''


def test_fla_on_hopper_with_a_refused_triton_is_bypassed_loudly(tmp_path):
    got = _run_with_stand_in_fla(tmp_path, HOPPER_PROBE)
    refused = {k for k, why in got["refused"].items() if why}
    assert refused == {"(9, 0)/3.6.0", "(9, 0)/3.4.0"}  # Hopper and Triton in [3.4.0, 3.7.1) only
    why = got["refused"]["(9, 0)/3.6.0"]
    assert "Triton 3.6.0" in why and "#640" in why and "sm_90" in why and "3.7.1 or tilelang" in why
    assert got["before"]["torch_chunk_gated_delta_rule"] == "fla.ops.gated_delta_rule.chunk_gated_delta_rule"
    head, *rest = got["lines"]
    assert head.endswith("4 of 4 on transformers' PyTorch fallback")
    assert "  torch_chunk_gated_delta_rule: torch (BYPASSED: fla ? refuses" in rest[0]
    assert rest[1].startswith("  torch_recurrent_gated_delta_rule: torch (BYPASSED:")
    assert rest[-1].startswith("  WARNING: the gated delta rule runs transformers' PyTorch code")
    assert got["again"] == []  # idempotent
    # the twin's forward now runs transformers' torch code, not the stand-in kernel (which would raise)
    assert got["finite"]
