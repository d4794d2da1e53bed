"""``brushrl bench NAME``: benchmarks that print a table and write JSON (never timed tests).

Each benchmark module in ``_BENCH_MODULES`` exposes ``add_arguments(parser)`` and ``run(args)``
(exit code) and a module docstring that becomes its ``--help``.
"""

from __future__ import annotations

import argparse
import importlib

#: name -> module of a benchmark.
_BENCH_MODULES = {
    "render": "brushrl.perf.render_benchmark",  # render farm: latency, CPU, throughput, determinism
    "pipeline": "brushrl.orchestrator.bench",  # training steps/hour, sync vs async
    "replay": "brushrl.render.replay_bench",  # record + validate + replay vs the direct and bare paths
    "text": "brushrl.render.text_bench",  # the text scan: stroke lettering flagged, honest paintings not
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``bench`` sub-command and one sub-command per benchmark."""
    p = subparsers.add_parser("bench", help="run a benchmark (prints a table, writes JSON)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name, modname in _BENCH_MODULES.items():
        module = importlib.import_module(modname)
        b = sub.add_parser(name, help=module.__doc__.splitlines()[0], description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(b)
        b.set_defaults(func=module.run)
