"""HPSv3 scorer: the mu -> [0, 1] transform, and the Ray actor running in its own Python env
(transformers 4.45.2) on a tiny random Qwen2-VL checkpoint loaded through hpsv3's real
``HPSv3RewardInferencer`` path (fp32 on CPU)."""

from __future__ import annotations

import io
import math
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from brushrl.config import HPSv3Config
from brushrl.reward.hpsv3 import HPSv3Scorer, hpsv3_runtime_env, mu_to_score

ROOT = Path(__file__).resolve().parents[1]
#: The hpsv3 env's Python (``make hpsv3-env``: scripts/build_hpsv3_env.sh).
HPSV3_PYTHON = os.environ.get("BRUSHRL_HPSV3_PYTHON", str(ROOT / ".venv-hpsv3" / "bin" / "python"))


def _png(colour, mode="RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, (600, 600), colour).save(buf, "PNG")
    return buf.getvalue()


def test_mu_to_score_is_the_reproduction_logistic():
    assert mu_to_score(0.0) == 0.5
    assert mu_to_score(4.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert mu_to_score(-9.2) == pytest.approx(0.0911, abs=1e-4)  # reproduction pool's worst
    assert mu_to_score(5.2) == pytest.approx(0.7858, abs=1e-4)  # and best
    assert mu_to_score(-1e6) == 0.0 and mu_to_score(1e6) == 1.0
    assert mu_to_score(2.0, scale=2.0) == mu_to_score(4.0)


def test_runtime_env_names_the_separate_python():
    env = hpsv3_runtime_env("/opt/hps/bin/python")
    assert env["py_executable"] == "/opt/hps/bin/python"
    assert (Path(env["env_vars"]["PYTHONPATH"]) / "brushrl/reward/hpsv3.py").is_file()
    assert "py_executable" not in hpsv3_runtime_env(None)


def test_missing_hpsv3_names_the_config_field():
    with pytest.raises(ImportError, match="reward.hpsv3.python"):
        HPSv3Scorer(HPSv3Config(device="cpu").model_dump())  # the main env has no hpsv3


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    if not Path(HPSV3_PYTHON).exists():
        pytest.skip(f"no hpsv3 env at {HPSV3_PYTHON}: build it with `make hpsv3-env` (scripts/build_hpsv3_env.sh)")
    out = tmp_path_factory.mktemp("tiny_hpsv3")
    subprocess.run([HPSV3_PYTHON, str(ROOT / "scripts/make_tiny_hpsv3.py"), str(out)], check=True, timeout=600,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"})
    return out


SCORE_IN_ENV = """
import io, json, sys
from PIL import Image
from brushrl.reward.hpsv3 import HPSv3Scorer
d = sys.argv[1]
s = HPSv3Scorer({"config_path": d + "/hpsv3_tiny.yaml", "checkpoint_path": d + "/hpsv3_tiny.safetensors",
                 "device": "cpu", "batch_size": 2})
def png(c, mode="RGB"):
    b = io.BytesIO(); Image.new(mode, (600, 600), c).save(b, "PNG"); return b.getvalue()
pngs = [png("#d08070"), png("#ffffff"), b"junk", png((0, 0, 0, 0), "RGBA"), png("#2050a0")]
out = s.score_group(pngs, "a peach hibiscus", 0)
alone = s.score_group([pngs[4]], "a peach hibiscus", 0)
dtype = str(next(s.inferencer.model.parameters()).dtype)
print("RESULT" + json.dumps({"out": [[o.value, o.raw, o.cause] for o in out], "alone": alone[0].raw, "dtype": dtype}))
"""


def _check_scores(out, alone_mu):
    assert len(out) == 5
    assert out[2][0] is None and out[2][2] == "bad_image"
    for i in (0, 1, 3, 4):
        value, raw, cause = out[i]
        assert cause is None and 0.0 < value < 1.0 and value == pytest.approx(mu_to_score(raw["mu"]))
        assert set(raw) == {"mu", "sigma"}
    assert len({round(out[i][1]["mu"], 4) for i in (0, 1, 4)}) == 3  # mu depends on the image
    assert out[3][1]["mu"] == pytest.approx(out[1][1]["mu"], abs=1e-4)  # transparent = on white
    assert alone_mu == pytest.approx(out[4][1]["mu"], abs=1e-3)  # batching does not change a score


def test_scorer_in_the_hpsv3_env_through_the_real_inferencer(tiny_checkpoint):
    """The wrapper in the hpsv3 env's interpreter (no Ray): fp32 on CPU, batched, bad images None."""
    import json

    proc = subprocess.run([HPSV3_PYTHON, "-c", SCORE_IN_ENV, str(tiny_checkpoint)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"})
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    res = json.loads(line[0][len("RESULT"):])
    assert res["dtype"] == "torch.float32"
    _check_scores(res["out"], res["alone"]["mu"])


BASE_OVERRIDE_IN_ENV = """
import io, sys
from PIL import Image
from brushrl.reward.hpsv3 import HPSv3Scorer
d, base = sys.argv[1], sys.argv[2]
s = HPSv3Scorer({"config_path": d + "/hpsv3_tiny.yaml", "checkpoint_path": d + "/hpsv3_tiny.safetensors",
                 "base_model": base, "device": "cpu", "batch_size": 2})
b = io.BytesIO(); Image.new("RGB", (64, 64), "#d08070").save(b, "PNG")
print("RESULT", s.score_group([b.getvalue()], "p", 0)[0].raw)
"""


def test_base_model_replaces_the_yaml_base_in_the_hpsv3_env(tiny_checkpoint, tmp_path):
    """``reward.hpsv3.base_model`` (what the driver resolves to a folder under ``weights.dir``) is the base
    hpsv3 loads: the tiny YAML names ``base/``, which is moved away, and the score still comes, offline."""
    import shutil

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, ckpt)
    shutil.move(ckpt / "base", tmp_path / "elsewhere")
    proc = subprocess.run([HPSV3_PYTHON, "-c", BASE_OVERRIDE_IN_ENV, str(ckpt), str(tmp_path / "elsewhere")],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0 and "RESULT {'mu':" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.slow
def test_actor_scores_in_its_own_env_through_the_real_inferencer(tiny_checkpoint):
    import ray

    from brushrl.reward.hpsv3 import make_hpsv3_actor

    cfg = HPSv3Config(python=HPSV3_PYTHON, config_path=str(tiny_checkpoint / "hpsv3_tiny.yaml"),
                      checkpoint_path=str(tiny_checkpoint / "hpsv3_tiny.safetensors"), device="cpu",
                      num_cpus=1, batch_size=2)
    from brushrl.config import RayConfig
    from brushrl.ray_setup import init_ray

    init_ray(RayConfig(num_cpus=2))
    try:
        actor = make_hpsv3_actor(cfg)
        where = ray.get(actor.__ray_call__.remote(
            lambda self: (__import__("sys").executable, __import__("transformers").__version__,
                          str(next(self.inferencer.model.parameters()).dtype))), timeout=600)
        assert where == (HPSV3_PYTHON, "4.45.2", "torch.float32")
        pngs = [_png("#d08070"), _png("#ffffff"), b"not a png", _png((0, 0, 0, 0), "RGBA"), _png("#2050a0")]
        out = ray.get(actor.score_group.remote(pngs, "a peach hibiscus", 0), timeout=600)
        alone = ray.get(actor.score_group.remote([pngs[4]], "a peach hibiscus", 0), timeout=600)
        _check_scores([[o.value, o.raw, o.cause] for o in out], alone[0].raw["mu"])
    finally:
        ray.shutdown()
