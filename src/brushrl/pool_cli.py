"""``brushrl pool ACTION``: the reference pool workflow (see docs/pool.md).

    brushrl pool check POOL                 validate a version; list every problem with its file
    brushrl pool new-version POOL OUT       start a draft from a version (records the parent)
    brushrl pool build OUT                  add unrated candidates from a model endpoint or the policy
    brushrl pool rate POOL                  rate a draft in the browser (http://127.0.0.1:8765/)
    brushrl pool stats POOL                 counts, palette spread, near-duplicates, contact sheets
    brushrl pool publish POOL               freeze a draft (immutable from then on)
    brushrl pool export POOL OUT            write a Hugging Face datasets folder (Parquet + images)
    brushrl pool import SOURCE OUT          datasets folder or id -> new draft pool

Exit codes: 0 ok, 1 the pool has problems (each printed as ``FILE: [kind] message``), 2 bad usage.
"""
# Beside the package, not in brushrl/pool/: `pool build --policy` samples the local policy (the
# policy and rollout stages, above the pool; docs/architecture.md). :func:`policy_source` builds it
# and goes to brushrl.pool.build as a PolicySourceFactory. The docstring above is the --help.

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path

from brushrl.config import BrushRLConfig
from brushrl.pool import build, stats
from brushrl.pool.build import PolicySource, slug
from brushrl.pool.store import PoolError, PoolWriter, ReferencePool, new_version


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``pool`` sub-command and its actions."""
    p = subparsers.add_parser(
        "pool", help="build, rate, check, version and export reference pools",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="pool_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    a = sub.add_parser("check", help="validate a pool version (images, hashes, tiers, ids)")
    a.add_argument("pool", metavar="POOL", help="pool folder")
    a.add_argument("--json", action="store_true", help="print the version record as JSON")
    a.set_defaults(func=_check)

    a = sub.add_parser("new-version", help="start a draft version from POOL at OUT (parent recorded)")
    a.add_argument("pool", metavar="POOL")
    a.add_argument("out", metavar="OUT", help="new pool folder")
    a.add_argument("--drop-tier", action="append", default=[], metavar="TIER",
                   help="leave paintings of this tier out (repeatable), e.g. --drop-tier reject")
    a.add_argument("--note", default="", help="free text stored in pool.json")
    a.set_defaults(func=_new_version)

    a = sub.add_parser("publish", help="freeze a draft: validates it, then records its content hash")
    a.add_argument("pool", metavar="POOL")
    a.add_argument("--note", help="replace pool.json's note")
    a.set_defaults(func=_publish)

    a = sub.add_parser("rate", help="rate a draft pool in a local web page",
                       description="Serve the rating page for POOL (a draft version). Keys: 1/l love, "
                                   "2/g good, 3/x reject, s skip, u undo, c code, v compare, arrows move.")
    a.add_argument("pool", metavar="POOL")
    a.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    a.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    a.add_argument("--rater", default=None, help="name recorded with each rating (default: the login name)")
    a.set_defaults(func=_rate)

    a = sub.add_parser("export", help="write POOL as a Hugging Face datasets folder (Parquet + images)")
    a.add_argument("pool", metavar="POOL")
    a.add_argument("out", metavar="OUT")
    a.set_defaults(func=_export)

    a = sub.add_parser("import", help="datasets folder or dataset id -> new draft pool at OUT")
    a.add_argument("source", metavar="SOURCE", help="local folder or dataset id")
    a.add_argument("out", metavar="OUT")
    a.add_argument("--name", help="pool name (default: the exported pool's)")
    a.set_defaults(func=_import)

    stats.register(sub)
    build.register(sub, policy_source)


def policy_source(cfg: BrushRLConfig, system: str, adapter: str | None) -> PolicySource:
    """``pool build --policy``'s source: the config's warm-started policy in the transformers
    engine, with ``adapter`` (a run checkpoint's LoRA) loaded when given."""
    from brushrl.policy import warm_start_policy
    from brushrl.rollout.transformers_engine import TransformersEngine

    cfg = warm_start_policy(cfg, system)
    engine = TransformersEngine(cfg.policy, cfg.rollout, system, cfg.learner.lora)
    name = "policy"
    if adapter:
        engine.load_adapter(adapter, 1)
        name = f"policy-{slug(Path(adapter).name)}"
    return PolicySource(engine, name)


def _fail(exc: Exception) -> int:
    print(exc, file=sys.stderr)
    return 1


def _check(args) -> int:
    try:
        pool = ReferencePool(args.pool)
    except PoolError as exc:
        print(f"{len(exc.problems)} problem(s) in {args.pool}:", file=sys.stderr)
        return _fail(exc)
    record = pool.version_record()
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        state = "published" if pool.meta.published else "draft"
        counts = ", ".join(f"{t} {n}" for t, n in record["counts"].items())
        print(f"{pool.version_id} ({state}, parent {pool.meta.parent}): {len(pool.entries)} paintings: {counts}")
    return 0


def _new_version(args) -> int:
    drop = set(args.drop_tier)
    try:
        w = new_version(args.pool, args.out, note=args.note, keep=lambda e: e.tier not in drop)
    except (PoolError, FileExistsError) as exc:
        return _fail(exc)
    print(f"draft {w.meta.name}@v{w.meta.version} at {args.out} (parent {w.meta.parent}, {len(w.rows())} paintings)")
    return 0


def _publish(args) -> int:
    try:
        meta = PoolWriter(args.pool).publish(note=args.note)
    except PoolError as exc:
        return _fail(exc)
    print(f"published {ReferencePool(args.pool).version_id} (content hash {meta.content_hash})")
    return 0


def _rate(args) -> int:
    from brushrl.pool.rate_app import serve

    try:
        ReferencePool(args.pool)
        PoolWriter(args.pool)
    except PoolError as exc:
        return _fail(exc)
    print(f"rating {args.pool} at http://{args.host}:{args.port}/  (Ctrl-C to stop; every shown "
          f"'saved' is on disk)", flush=True)
    serve(args.pool, host=args.host, port=args.port, rater=args.rater or getpass.getuser())
    return 0


def _export(args) -> int:
    from brushrl.pool.hf import export_pool

    try:
        out = export_pool(args.pool, args.out)
    except (PoolError, FileExistsError) as exc:
        return _fail(exc)
    print(f"exported {args.pool} to {out} (load with datasets.load_dataset({str(out)!r}))")
    return 0


def _import(args) -> int:
    from brushrl.pool.hf import import_pool

    try:
        pool = import_pool(args.source, args.out, name=args.name)
    except (PoolError, FileExistsError) as exc:
        return _fail(exc)
    print(f"imported {len(pool.entries)} paintings into draft {pool.version_id} at {args.out}")
    return 0
