"""Entry point for ``ray job submit``: the render-farm benchmark on the job's Ray cluster.

    ray job submit --working-dir . -- python rayjobs/render_bench.py --actors 1,2,8 --out bench_render.json

Same options as ``brushrl bench render`` (run ``python rayjobs/render_bench.py --help``); joins the
job's cluster instead of starting a local one, so renderer actors land where the cluster puts them
(``resources.renderer.resources`` in ``--config``, e.g. ``{renderer: 1}``, to pin them to renderer nodes).
"""

from __future__ import annotations

import argparse
import sys

from brushrl.perf.render_benchmark import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv), address=None)


if __name__ == "__main__":
    sys.exit(main())
