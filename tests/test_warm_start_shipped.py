"""The demo's warm start ships with brushrl (``brushrl.policy.ship``, ``sft.SHIPPED_DIR``): it is the
key of ``configs/local.yaml`` as it stands, and a cache miss on that key installs it instead of
training; any other key still trains."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from brushrl.config import load_config
from brushrl.policy.ship import config_key, main as ship_main
from brushrl.policy.sft import DONE_MARKER, SHIPPED_DIR, warm_start_policy
from brushrl.prompts import resolve_system_prompt

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_warm_start_is_the_demo_configs(capsys):
    key = config_key(load_config(ROOT / "configs/local.yaml"))
    entry = SHIPPED_DIR / key
    assert (entry / DONE_MARKER).exists(), (
        f"no shipped warm start for configs/local.yaml's key {key}: run `make warm-start` and commit "
        f"src/brushrl/policy/warm_starts (shipped: {sorted(p.name for p in SHIPPED_DIR.glob('*'))})")
    done = json.loads((entry / DONE_MARKER).read_text())
    # trained, not an untrained model (whose loss is ~ln(vocab_size) = ln 2048 = 7.6 nats/token)
    assert done["steps"] > 0 and done["final_loss"] < 3.0
    assert ship_main(["--config", str(ROOT / "configs/local.yaml"), "--check"]) == 0
    assert f"warm-start key {key}" in capsys.readouterr().out
    # a config whose warm start differs (one field the key hashes) is not the shipped one
    other = load_config(ROOT / "configs/local.yaml", {"policy.sft.epochs": 1})
    assert config_key(other) != key


def test_a_cache_miss_on_the_shipped_key_installs_it_without_training(tmp_path, caplog, monkeypatch):
    import brushrl.policy.sft as sft

    cfg = load_config(ROOT / "configs/local.yaml", {"policy.sft.cache_dir": str(tmp_path / "cache")})
    monkeypatch.setattr(sft, "train_sft", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained")))
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    with caplog.at_level(logging.INFO, logger="brushrl.policy.sft"):
        out = warm_start_policy(cfg, system_prompt)
    folder = Path(out.policy.model)
    assert folder == tmp_path / "cache" / config_key(cfg) and (folder / DONE_MARKER).exists()
    assert "shipped with brushrl" in caplog.text
    shipped = SHIPPED_DIR / folder.name
    for f in shipped.iterdir():
        assert (folder / f.name).read_bytes() == f.read_bytes(), f.name
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(folder) and AutoTokenizer.from_pretrained(folder)  # loads
