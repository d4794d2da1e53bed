"""Entry point for ``ray job submit``: score a run's base policy and checkpoints on the job's cluster.

    make submit-eval EVAL_ARGS="--checkpoint latest"          # a local head (the Makefile's RUNTIME_ENV)
    ray job submit --address ... --runtime-env cluster/runtime_env.yaml -- python rayjobs/eval.py
        /shared/runs/cluster --checkpoint latest               # a cluster (docs/cluster.md)

The run directory must be readable where the job's driver runs (an absolute path). Same options as
``brushrl eval`` (run ``python rayjobs/eval.py --help``).
"""

from __future__ import annotations

import argparse
import sys

from brushrl.orchestrator.cli import add_eval_arguments, run_eval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_eval_arguments(parser)
    return run_eval(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
