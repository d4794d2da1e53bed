"""``brushrl weights fetch``: every model a config names, downloaded once to shared storage."""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console
from rich.table import Table

from brushrl.config import BrushRLConfig, ConfigError, load_config, parse_sets
from brushrl.hub.shipped import DTYPE_BYTES, SHIPPED
from brushrl.hub.weights import (Listing, LocalStatus, ModelRef, fetch_model, hub_listing, human_size, models_of,
                                 ref_status, shipped_listing)


def _listing(ref: ModelRef, endpoint: str | None, offline: bool) -> tuple[Listing, str]:
    """The hub's file list of ``ref``, or (hub unreachable or ``offline``) the shipped one, and why
    the hub's was not used ('' when it was)."""
    if not offline:
        try:
            return hub_listing(ref, endpoint), ""
        except Exception as exc:  # noqa: BLE001 - an unreachable hub falls back to the shipped list, said so
            why = f"hub: {type(exc).__name__}"
    else:
        why = "hub not asked (--offline)"
    return shipped_listing(ref), why


def estimated_size(repo_id: str) -> str:
    """``~67.0 GiB est. (35.95 B params x 2 B)`` from the parameter count and dtype that
    ``brushrl.hub.shipped.SHIPPED`` holds for ``repo_id`` (the weights alone, no tokenizer files);
    '' where none is shipped or the checkpoint is FP8 (bytes per parameter not one number)."""
    spec = SHIPPED.get(repo_id)
    if not spec or spec.get("fp8_linear") or spec.get("torch_dtype") not in DTYPE_BYTES:
        return ""
    params, per = spec["num_parameters"], DTYPE_BYTES[spec["torch_dtype"]]
    return f"~{human_size(params * per)} est. ({params / 1e9:.2f} B params x {per} B)"


def _size_text(ref: ModelRef, listing: Listing) -> str:
    """The size column: the listing's total, else the estimate, with where it came from."""
    if listing.source == "hub":
        return human_size(listing.size)
    if listing.size is not None:
        return f"{human_size(listing.size)} (shipped list)"
    return estimated_size(ref.name) or ("unknown (shipped list)" if listing.source == "shipped" else "unknown")


def weights_table(rows: list[tuple[ModelRef, LocalStatus, str, str]], sizes: bool = True,
                  title: str = "model weights") -> Table:
    """One row a model: hub id or path, config field, files and size (``sizes``), local state with
    what is missing, local path."""
    t = Table(title=title, title_justify="left")
    cols = ("model", "config field", *(("files", "size") if sizes else ()), "local", "path")
    for col in cols:  # paths and ids fold rather than end in an ellipsis: they are what one copies
        t.add_column(col, justify="right" if col in ("files", "size") else "left",
                     overflow="fold" if col in ("model", "path") else "ellipsis")
    for ref, st, files, size in rows:
        detail = f" ({st.detail})" if st.state != "complete" and st.detail else ""
        t.add_row(ref.name, ref.field, *((files, size) if sizes else ()), st.state + detail, str(st.path or "-"))
    return t


def run_fetch(args: argparse.Namespace) -> int:
    """``brushrl weights fetch``: 0 every model complete (or listed, ``--dry-run``), 1 a download
    failed, 2 bad config or arguments."""
    console = Console(file=sys.stdout, width=args.width)
    try:
        cfg: BrushRLConfig = load_config(args.config, parse_sets(args.set))
    except ConfigError as exc:
        print(exc)
        return 2
    target = args.to or cfg.weights.dir
    if not target and not args.dry_run:
        print(f"--to DIR: where to put the weights (or set weights.dir in {args.config})")
        return 2
    refs = [r for r in models_of(cfg) if r.hub and (not args.only or r.name in args.only)]
    unknown = sorted(set(args.only or []) - {r.name for r in models_of(cfg)})
    if unknown:
        print(f"--only {', '.join(unknown)}: not a hub model of {args.config} "
              f"(its models: {', '.join(r.name for r in models_of(cfg)) or 'none'})")
        return 2
    if not refs:
        print(f"{args.config} names no hub model (nothing to fetch)")
        return 0
    endpoint = args.endpoint or os.environ.get("HF_ENDPOINT") or None  # read now, not at huggingface_hub's import
    rows, failed = [], 0
    for i, ref in enumerate(refs, 1):
        listing, why = _listing(ref, endpoint, args.offline)
        files = str(len(listing.files)) if listing.files else "?"
        size = _size_text(ref, listing)
        console.print(f"[{i}/{len(refs)}] {ref.name} ({ref.field}): {files} files, {size}"
                      + (f"; {why}" if why else ""), markup=False, highlight=False)
        if args.dry_run:
            rows.append((ref, ref_status(ref, target), files, size))
            continue
        try:
            st = fetch_model(ref, target, endpoint, listing if listing.source == "hub" else None,
                             say=lambda line: console.print(line, markup=False, highlight=False))
        except Exception as exc:  # noqa: BLE001 - reported per model, the others still fetched
            failed += 1
            console.print(f"  failed: {type(exc).__name__}: {exc}", markup=False, highlight=False)
            st = ref_status(ref, target)
        rows.append((ref, st, files, size))
    console.print(weights_table(rows))
    if args.dry_run:
        console.print(f"dry run: nothing downloaded; {len(refs)} model(s) would go to {target or '--to DIR'}")
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("weights", help="fetch the models a config names to shared storage (once, then offline)",
                       description="Model weights tools (brushrl.hub.weights).")
    wsub = p.add_subparsers(dest="weights_command", metavar="ACTION", required=True)
    f = wsub.add_parser(
        "fetch",
        help="download every hub model of CONFIG into DIR/<org>/<name>/ (huggingface_hub)",
        description="Download every hub model CONFIG names (policy.model, the judge's weights, HPSv3's checkpoint "
        "and base model) into DIR/<org>/<name>/ with huggingface_hub's snapshot_download: only what serving "
        "and training read (config, tokenizer and processor files, chat templates, safetensors and their "
        "index; no .bin/.pth duplicates). Prints each model's file count and size, the download progress and a "
        "table at the end; a model already complete downloads nothing. Then set weights.dir: DIR in the "
        "config and jobs load the weights from there with the hub offline. HF_ENDPOINT / --endpoint choose "
        "the hub (a mirror), HF_TOKEN a token for gated models. Exit codes: 0 ok, 1 a download failed, "
        "2 bad config or arguments.",
    )
    f.add_argument("config", help="YAML run config, e.g. configs/h200.yaml")
    f.add_argument("--to", metavar="DIR", help="shared folder for the weights (default: weights.dir of CONFIG)")
    f.add_argument("--dry-run", action="store_true",
                   help="list the models, their files and sizes and local state; download nothing")
    f.add_argument("--only", action="append", metavar="REPO_ID", help="fetch only this hub id (repeatable)")
    f.add_argument("--endpoint", help="hub endpoint (default: HF_ENDPOINT or https://huggingface.co)")
    f.add_argument("--offline", action="store_true",
                   help="with --dry-run: do not ask the hub; sizes from the shipped file lists only")
    f.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field by dotted path (repeatable)")
    f.add_argument("--width", type=int, default=160, help="output width in characters (default: %(default)s)")
    f.set_defaults(func=run_fetch)
