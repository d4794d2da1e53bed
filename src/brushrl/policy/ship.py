"""Build the warm start brushrl ships for the CPU demo (``make warm-start``).

``python -m brushrl.policy.ship [--config configs/local.yaml]`` trains (or takes from the cache) the
config's warm start exactly as ``brushrl train`` would (:func:`brushrl.policy.sft.warm_start_policy`),
then puts its folder in ``brushrl/policy/warm_starts/<key>/`` (``sft.SHIPPED_DIR``) and removes the
other shipped entries: one shipped warm start, the demo's. Commit the folder. :func:`ship` does the
same into another folder (the tests' memoriser: ``tests/ship_memoriser.py``).

``--check`` only says whether the shipped entry is the config's (exit 1 if not), without training.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from brushrl.config import BrushRLConfig, load_config
from brushrl.corpus.build import build_corpus
from brushrl.policy.revision import RevisionExamples
from brushrl.policy.sft import DONE_MARKER, SHIPPED_DIR, cache_key, warm_start_policy
from brushrl.prompts import resolve_system_prompt


def config_key(cfg: BrushRLConfig) -> str:
    """The warm-start cache key of ``cfg``'s tiny policy (the folder name ``warm_start_policy``
    trains or finds), computed without training.

    Raises:
        ValueError: ``policy.model`` is not ``tiny`` (nothing is warm-started).
    """
    if cfg.policy.model != "tiny":
        raise ValueError(f"policy.model is {cfg.policy.model!r}: only the tiny policy is warm-started")
    sft = cfg.policy.sft
    items = build_corpus(sft.variations, seed=cfg.run.seed if sft.seed is None else sft.seed)[: sft.max_examples]
    revisions = RevisionExamples(cfg, items) if sft.revision_examples else None
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    return cache_key(cfg.policy, [(i.subject, i.code) for i in items], system_prompt, cfg.prompts.template,
                     revisions.key() if revisions else None)


def ship(cfg: BrushRLConfig, into: Path = SHIPPED_DIR) -> tuple[str, int, list[str]]:
    """Train (or take from the cache) ``cfg``'s warm start exactly as ``brushrl train`` would and
    make it the one entry of ``into`` (``into/<key>/``; the other entries there are removed).

    Returns:
        ``(key, bytes of the entry, names of the removed entries)``.
    """
    key = config_key(cfg)
    into.mkdir(parents=True, exist_ok=True)
    shipped = sorted(d.name for d in into.glob("*") if d.is_dir() and not d.name.startswith("."))
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    built = warm_start_policy(cfg, system_prompt)
    folder = shutil.copytree(built.policy.model, into / f".tmp-{key}", dirs_exist_ok=True)
    for old in shipped:
        shutil.rmtree(into / old)
    folder.rename(into / key)
    size = sum(f.stat().st_size for f in (into / key).rglob("*") if f.is_file())
    return key, size, [s for s in shipped if s != key]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/local.yaml", help="the demo's config (default: %(default)s)")
    p.add_argument("--check", action="store_true", help="only check that the shipped entry is the config's")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    if args.check:
        key = config_key(cfg)
        shipped = sorted(d.name for d in SHIPPED_DIR.glob("*") if d.is_dir())
        ok = (SHIPPED_DIR / key / DONE_MARKER).exists()
        print(f"{args.config}: warm-start key {key}; shipped: {', '.join(shipped) or 'none'} -> "
              + ("ok" if ok else "stale: run `make warm-start` and commit src/brushrl/policy/warm_starts"))
        return 0 if ok else 1
    t0 = time.perf_counter()
    key, size, removed = ship(cfg)
    print(f"shipped warm start {key} ({size / 2**20:.1f} MiB) in {SHIPPED_DIR}, {time.perf_counter() - t0:.0f} s"
          + (f"; removed {', '.join(removed)}" if removed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
