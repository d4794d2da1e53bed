"""Build (once, cached) the rehearsal's tiny stand-ins: the judge VLM and the HPSv3 checkpoint.

Both are random-weight models made offline by the repository's scripts (``scripts/make_tiny_judge_vlm.py``
in this environment, ``scripts/make_tiny_hpsv3.py`` in the hpsv3 env, through hpsv3's own code), so
the judge server and the HPSv3 actor run their production code paths on them. The cache key is a
hash of the script, so editing a script rebuilds its stand-in.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from brushrl.rehearse.overrides import StandIns

ROOT = Path(__file__).resolve().parents[3]


class MissingEnv(FileNotFoundError):
    """A separate Python env the rehearsal needs is not built; the message names the make target."""


def _key(script: Path) -> str:
    return hashlib.sha256(script.read_bytes()).hexdigest()[:12]


def _run(cmd: list[str], what: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"building {what} failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")


def prepare(work_dir: Path, cache: Path, vllm_python: Path | None = None, hpsv3_python: Path | None = None,
            need_vllm: bool = True, need_hpsv3: bool = True, need_judge: bool = True,
            sft_cache: Path | None = None) -> StandIns:
    """Check the envs and build what is missing; returns the :class:`StandIns` (``sft_cache``: the
    tiny policy's warm-start cache, default ``cache/sft``).

    Raises:
        MissingEnv: ``.venv-vllm`` or ``.venv-hpsv3`` (or the given interpreters) missing while needed.
        RuntimeError: a build script failed (its output in the message).
    """
    vllm_python = Path(vllm_python or ROOT / ".venv-vllm/bin/python")
    hpsv3_python = Path(hpsv3_python or ROOT / ".venv-hpsv3/bin/python")
    if (need_vllm or need_judge) and not vllm_python.exists():
        raise MissingEnv(f"no vllm env at {vllm_python}: build it with `make vllm-env` (scripts/build_vllm_env.sh)")
    if need_hpsv3 and not hpsv3_python.exists():
        raise MissingEnv(f"no hpsv3 env at {hpsv3_python}: build it with `make hpsv3-env` (scripts/build_hpsv3_env.sh)")
    judge_script, hps_script = ROOT / "scripts/make_tiny_judge_vlm.py", ROOT / "scripts/make_tiny_hpsv3.py"
    judge = cache / f"tiny_judge-{_key(judge_script)}"
    hps = cache / f"tiny_hpsv3-{_key(hps_script)}"
    if need_judge and not (judge / "config.json").is_file():
        _run([sys.executable, str(judge_script), str(judge)], "the tiny judge VLM")
    if need_hpsv3 and not (hps / "hpsv3_tiny.safetensors").is_file():
        _run([str(hpsv3_python), str(hps_script), str(hps)], "the tiny HPSv3 checkpoint")
    return StandIns(vllm_python=vllm_python, hpsv3_python=hpsv3_python, judge_model=judge, hpsv3_dir=hps,
                    work_dir=work_dir, sft_cache=sft_cache or cache / "sft")
