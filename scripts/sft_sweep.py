"""Which warm-start recipe follows its prompt? Train SFT variants and probe each one's replies.

    python scripts/sft_sweep.py --out DIR [--variant EPOCHS:STEER_WEIGHT ...] [--samples N]
        [--keep K] [--dry]

For each variant, ``brushrl.policy.sft.warm_start`` trains the demo config's warm start
(``configs/local.yaml``: corpus, tokenizer, model; ``policy.sft.epochs`` and ``steer_weight`` set by
the variant; on a GPU when there is one, ``policy.sft.device: auto``), then samples ``--samples``
replies per prompt at the rollout's temperature and cut-offs (T 1, top-k 20, top-p 0.95) for the
three eval splits (training prompts, the held-out pool subjects, the unseen colour x species
pairs) and reports per split, from the code alone (no render):

* ``static_pass``: the static gate's pass rate;
* ``header_copy``: how often the reply's subject comment is the prompt's subject (the corpus always
  opens a painting with it, ``corpus.build.with_header``), and ``colour_copy``: how often its
  colour word is the prompt's;
* ``code_colour_acc``: how often the reply's ``body`` petal constant is nearest (CIELAB) to the
  prompt's colour word among the split's words (``corpus.colours.COLOUR_REFERENCES``); chance 1/K.

The rendered measures (subject fidelity, colour accuracy of the painting) come from ``brushrl eval``.
Writes ``DIR/sft_sweep.json`` after every variant and, for the first ``--keep`` variants,
``DIR/<key>.tar`` (the cache folder: untar it into ``policy.sft.cache_dir`` and it is a cache hit). ``--dry``: 1 % of the corpus, 0.05 epochs, 2 prompts a
split, 48 new tokens, to check the script on a CPU.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import torch
from skimage.color import rgb2lab

from brushrl.config import UNSEEN_SUBJECTS, load_config
from brushrl.corpus.build import build_corpus
from brushrl.corpus.colours import COLOUR_REFERENCES, colour_word
from brushrl.corpus.palettes import PALETTES
from brushrl.gate import check_static
from brushrl.policy.model import load_policy
from brushrl.policy.sft import warm_start
from brushrl.prompts import chat_messages, resolve_system_prompt, user_prompt

HELD_OUT = ["a red poppy", "a purple anemone", "a red rose", "a pink lotus", "a red tulip", "an orange marigold",
            "a red camellia", "a red zinnia", "a pink cosmos", "a wild rose"]


def _lab(hex_colour: str) -> np.ndarray:
    return rgb2lab(np.array([[[int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]]]))[0, 0]


def probe(model, tok, system_prompt: str, template: str, splits: dict[str, list[str]], n: int, seed: int,
          max_new_tokens: int = 1024) -> dict:
    """Sample ``n`` replies per subject of each split and measure them from the code (module docstring)."""
    device = next(model.parameters()).device
    greens = [_lab(h) for fam in PALETTES.values() for p in fam for h in (p.leaf, p.leaf_dark, p.wood)]
    out = {}
    tok.padding_side = "left"
    for split, subjects in splits.items():
        words = sorted({colour_word(s) for s in subjects if colour_word(s)})
        refs = {w: [_lab(h) for h in COLOUR_REFERENCES[w]] for w in words}
        texts = [tok.apply_chat_template(chat_messages(system_prompt, user_prompt(s, template)),
                                         add_generation_prompt=True, tokenize=False) for s in subjects]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        torch.manual_seed(seed)
        with torch.no_grad():
            gen = model.generate(**enc, do_sample=True, temperature=1.0, top_k=20, top_p=0.95, max_new_tokens=max_new_tokens,
                                 num_return_sequences=n, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        replies = tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        rows = []
        for i, reply in enumerate(replies):
            subject = subjects[i // n]
            _, verdict = check_static(reply, _CFG.gate, _CFG.render.canvas_size,
                                      replay=_CFG.render.mode == "replay")
            head = re.search(r"background\([^)]*\);\n  // ([^\n]*)\n", reply)
            body = re.search(r'body = "(#[0-9a-f]{6})"', reply)
            word = None
            if body and words:
                lab = _lab(body[1])
                near = min(words, key=lambda w: min(np.linalg.norm(lab - r) for r in refs[w]))
                word = None if min(np.linalg.norm(lab - g) for g in greens) < min(
                    np.linalg.norm(lab - r) for r in refs[near]) else near
            rows.append({"subject": subject, "pass": verdict.passed, "verdict": verdict.verdict,
                         "header": head[1] if head else None, "body": body[1] if body else None, "word": word})
        named = [r for r in rows if colour_word(r["subject"])]
        out[split] = {
            "n": len(rows),
            "static_pass": sum(r["pass"] for r in rows) / len(rows),
            "header_copy": sum(r["header"] == r["subject"] for r in rows) / len(rows),
            "colour_copy": sum(bool(r["header"]) and colour_word(r["header"]) == colour_word(r["subject"])
                               for r in named) / max(1, len(named)),
            "code_colour_acc": sum(r["word"] == colour_word(r["subject"]) for r in named) / max(1, len(named)),
            "chance": 1 / max(1, len(words)),
            "words": words,
            "rows": rows,
        }
    return out


_CFG = None


def main(argv: list[str] | None = None) -> int:
    global _CFG
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="configs/local.yaml")
    ap.add_argument("--variant", nargs="+", default=["24:10", "8:10", "48:10", "8:1"], help="EPOCHS:STEER_WEIGHT")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--keep", type=int, default=4, help="variants whose trained folder is kept as a tar")
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _CFG = load_config(args.config)
    system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
    sft = cfg.policy.sft
    items = build_corpus(sft.variations, seed=cfg.run.seed if sft.seed is None else sft.seed)
    if args.dry:
        items = items[:: max(1, len(items) // 6)]
    corpus = [(i.subject, i.code) for i in items]
    splits = {"training": cfg.prompts.subjects, "held_out": HELD_OUT, "unseen": list(UNSEEN_SUBJECTS)}
    if args.dry:
        splits = {k: v[:2] for k, v in splits.items()}
    report = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
              "versions": {"torch": torch.__version__}, "variants": []}
    for spec in args.variant:
        epochs, steer = (float(x) for x in spec.split(":"))
        policy = cfg.policy.model_copy(update={"sft": sft.model_copy(update={
            "epochs": 0.05 if args.dry else epochs, "steer_weight": steer, "cache_dir": str(out / "cache")})})
        t0 = time.perf_counter()
        path = warm_start(policy, corpus, system_prompt, cfg.prompts.template)
        train_s = time.perf_counter() - t0
        model, tok = load_policy(policy.model_copy(update={"model": str(path)}))
        if torch.cuda.is_available():
            model.to("cuda")
        t1 = time.perf_counter()
        result = probe(model, tok, system_prompt, cfg.prompts.template, splits, args.samples, seed=1,
                       max_new_tokens=48 if args.dry else 1024)
        done = json.loads((path / "done").read_text())
        report["variants"].append({"epochs": epochs, "steer_weight": steer, "key": path.name, "train_s": train_s,
                                   "probe_s": time.perf_counter() - t1, "final_loss": done["final_loss"],
                                   "splits": result})
        print(f"epochs {epochs:g} steer {steer:g} key {path.name}: train {train_s:.0f} s, loss {done['final_loss']:.3f}; "
              + "; ".join(f"{k} pass {v['static_pass']:.2f} head {v['header_copy']:.2f} colour-copy "
                          f"{v['colour_copy']:.2f} code-colour {v['code_colour_acc']:.2f} (chance {v['chance']:.2f})"
                          for k, v in result.items()), flush=True)
        (out / "sft_sweep.json").write_text(json.dumps(report, indent=1))
        if len(report["variants"]) <= args.keep:  # written at once: a run cut by its time limit keeps them
            with tarfile.open(out / f"{path.name}.tar", "w") as tar:
                tar.add(path, arcname=path.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
