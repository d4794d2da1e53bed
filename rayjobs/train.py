"""Entry point for ``ray job submit``: train brushrl on the job's Ray cluster.

    ray job submit --working-dir . -- python rayjobs/train.py --config configs/local.yaml

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
