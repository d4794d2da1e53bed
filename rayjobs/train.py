"""Entry point for ``ray job submit``: train brushrl on the job's Ray cluster.

    make ray-start && make submit CONFIG=configs/local.yaml   # a local head (Makefile's RUNTIME_ENV)
    ray job submit --address ... --runtime-env cluster/runtime_env.yaml -- python rayjobs/train.py
        --config configs/cluster.yaml                       # a cluster (docs/cluster.md)

The job needs its runtime env (this checkout's package as ``py_modules``, ``BRUSHRL_JS_DIR``, the
upload excludes); a bare ``--working-dir .`` lacks it.

Same options as ``brushrl train`` (run ``python rayjobs/train.py --help``).
"""

from __future__ import annotations

import argparse
import sys

from brushrl.orchestrator.cli import add_train_arguments, run_train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_arguments(parser)
    return run_train(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
