"""The GPU smoke (``brushrl.rehearse.gpu_smoke``, ``make gpu-smoke``) in its ``--dry`` mode, on the CPU:
CI's run of it (``make test``).

The dry run happens in a subprocess where Ray, vLLM, DeepSpeed and Playwright are hidden (the GPU
machine has none of them): every ``sys.meta_path`` finder is wrapped so that it finds neither their
modules nor their distributions, so ``import ray`` raises ``ModuleNotFoundError`` and
``importlib.util.find_spec`` / ``importlib.metadata`` report them absent, as on a machine without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from brushrl.hub.twins import SPECIALS, build_tokenizer, shipped_config, twin_config
from brushrl.learner.moe import adapter_key_problems
from brushrl.rehearse.gpu_smoke import PHASES, MissingSupport, adapter_check, check_environment

ROOT = Path(__file__).resolve().parents[1]
POLICY = "Qwen/Qwen3.5-35B-A3B"
HIDDEN = ("ray", "vllm", "deepspeed", "playwright")

#: Prepended to the subprocess's code: hide the packages ``HIDDEN`` names from every finder.
HIDE = """
import importlib.abc, sys
HIDDEN = {hidden!r}

class Hide(importlib.abc.MetaPathFinder):
    def __init__(self, inner):
        self.inner = inner
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self.inner.find_spec(name, path, target)
    def find_distributions(self, *args, **kwargs):
        find = getattr(self.inner, "find_distributions", None)
        dists = [] if find is None else find(*args, **kwargs)
        return [d for d in dists if (d.metadata["Name"] or "").lower().replace("-", "_") not in HIDDEN]
    def invalidate_caches(self):
        getattr(self.inner, "invalidate_caches", lambda: None)()

sys.meta_path[:] = [Hide(f) for f in sys.meta_path]
"""


def _python(code: str, *args: str, hidden: tuple[str, ...] = HIDDEN, timeout: int = 300) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=hidden) + code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


#: ``python -m brushrl.rehearse.gpu_smoke`` after :data:`HIDE`.
MAIN = ("import runpy, sys; sys.argv[0] = 'gpu_smoke'; "
        "runpy.run_module('brushrl.rehearse.gpu_smoke', run_name='__main__')")


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    """The dry run's report, adapter folder and output, Ray / vLLM / DeepSpeed / Playwright hidden."""
    tmp = tmp_path_factory.mktemp("smoke")
    proc = _python(MAIN, "--dry", "--config", "configs/h200.yaml", "--out", str(tmp / "report.json"),
                   "--adapter-dir", str(tmp / "adapter"))
    report = json.loads((tmp / "report.json").read_text()) if (tmp / "report.json").exists() else {}
    return proc, report, tmp / "adapter"


def test_make_gpu_smoke_runs_this_module():
    """``make gpu-smoke DRY=1`` is the command this file runs: one smoke for make, CI and the docs."""
    cmd = subprocess.run(["make", "-n", "gpu-smoke", "DRY=1"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.replace("\\\n", " ").split()
    assert cmd[cmd.index("-m") + 1] == "brushrl.rehearse.gpu_smoke", cmd
    assert {"--dry", "--config", "configs/h200.yaml"} <= set(cmd), cmd


def test_the_hiding_works():
    """Else the dry run below would prove nothing: brushrl's learner launcher (it imports Ray) cannot be imported."""
    proc = _python("import brushrl.learner.launch")
    assert proc.returncode != 0 and "No module named 'ray'" in proc.stderr, proc.stderr[-2000:]
    proc = _python("import importlib.util, importlib.metadata as m; assert importlib.util.find_spec('vllm') is None; "
                   "assert all((d.metadata['Name'] or '').lower() not in ('ray', 'deepspeed') "
                   "for d in m.distributions())")
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_dry_run_reports_every_phase_without_ray_vllm_deepspeed_or_playwright(dry):
    proc, report, adapter = dry
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert report["ok"] and report["mode"] == "dry" and report["device"] == "cpu"
    assert [p["phase"] for p in report["phases"]] == list(PHASES)
    for p in report["phases"]:  # not measured on the CPU: None, never 0
        assert all(p[k] is None for k in ("peak_allocated_gib", "peak_reserved_gib", "context_gib", "peak_gib", "ratio")
                   if k in p)
        assert p["phase"] == "gpu0_total" or p["seconds"] > 0
    by = {p["phase"]: p for p in report["phases"]}
    assert by["build_policy"]["class"] == "Qwen3_5MoeForConditionalGeneration"
    assert by["hpsv3_build"]["class"] == "Qwen2VLForConditionalGeneration"
    # the plan figures are the real config's (configs/h200.yaml: the 35B policy's 67 GiB of weights, the
    # learner's row, GPU 0's learner + HPSv3), whatever the dry run's models
    plan = report["plan"]
    assert by["build_policy"]["plan_gib"] == plan["learner"]["parts"]["weights"] > 60
    assert by["learner_step_1"]["plan_gib"] == plan["learner"]["gib"] > by["build_policy"]["plan_gib"]
    assert by["gpu0_total"]["plan_gib"] == plan["gpu"]["used_gib"] == plan["learner"]["gib"] + plan["hpsv3"]["gib"]
    assert by["learner_step_1"]["plan_s"] == pytest.approx(plan["learn_s"] * 4 / plan["step_sequences"])
    for name in ("learner_warmup", "learner_step_1", "learner_step_2"):
        m = by[name]["metrics"]
        assert m["skipped"] == 0 and m["n_samples"] == 4 and m["n_tokens"] == 4 * 24
        assert m["is_ratio_mean"] > 0  # learner.truncated_is_clip of the config is on
    assert by["learner_step_2"]["metrics"]["policy_version"] == 3
    check = report["adapter_check"]
    assert check["passed"] and check["problems"] == []
    assert check["serving_class"] == "Qwen3_5MoeForConditionalGeneration"
    assert check["keys"] == 2 * check["modules"] == 2 * (3 * 5 + 4)  # 3 DeltaNet x 5 linears + 1 attention x 4
    assert check["key_example"].startswith("base_model.model.model.language_model.layers.")
    assert (adapter / "adapter_model.safetensors").is_file()
    assert "learner_step_2" in proc.stdout and "peak GiB" in proc.stdout  # the table


def _twin_policy_config():
    from transformers import AutoConfig

    tok = build_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    return AutoConfig.for_model(**twin_config(shipped_config(POLICY), len(tok), ids))


def test_the_adapter_check_fails_for_another_target_list_or_the_text_only_class(dry):
    _, _, adapter = dry
    config = _twin_policy_config()
    assert adapter_check(adapter, config, "all-linear", False)["passed"]
    wrong = adapter_check(adapter, config, ["q_proj", "k_proj", "v_proj", "o_proj"], False)
    assert not wrong["passed"]
    assert any("not modules the serving class adapts" in p for p in wrong["problems"]), wrong["problems"]
    # the adapter of the vision-language class against the text-only class AutoModelForCausalLM would load
    text = config.get_text_config()
    text.architectures = ["Qwen3_5MoeForCausalLM"]
    other = adapter_check(adapter, text, "all-linear", False)
    assert other["serving_class"] == "Qwen3_5MoeForCausalLM" and not other["passed"]
    assert any("have no adapter weights, e.g. ['model.layers.0." in p for p in other["problems"]), other["problems"]


def test_adapter_key_problems():
    mods = ["model.language_model.layers.0.self_attn.q_proj", "model.language_model.layers.0.self_attn.o_proj"]
    keys = [f"base_model.model.{m}.lora_{ab}.weight" for m in mods for ab in "AB"]
    assert adapter_key_problems(keys, mods) == []
    assert adapter_key_problems(keys[:-1], mods) == [f"1 adapter modules lack lora_A or lora_B, e.g. {mods[1:]}"]
    problems = adapter_key_problems(keys + ["model.layers.0.mlp.up_proj.lora_A.weight"], mods[:1])
    assert len(problems) == 2 and "not PEFT LoRA keys" in problems[0] and "not modules the serving class" in problems[1]


def test_check_environment_names_a_missing_model_class():
    with pytest.raises(MissingSupport, match="NoSuchModelForConditionalGeneration"):
        check_environment(["Qwen2VLForConditionalGeneration", "NoSuchModelForConditionalGeneration"])


def test_missing_wheels_fail_first_with_what_to_carry(tmp_path):
    """The GPU machine has no TRL or pydantic: named at once (exit 2), before brushrl.config or a model."""
    proc = _python(MAIN, "--dry", "--out", str(tmp_path / "r.json"), hidden=(*HIDDEN, "trl", "pydantic"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert not report["ok"] and report["phases"] == []
    assert report["error"].startswith("MissingSupport: missing Python modules: trl (carry trl==1.16.0), pydantic")
