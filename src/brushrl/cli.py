"""``brushrl`` command line.

Each stage package that has commands exposes ``register(subparsers)`` in its ``cli`` module, or, where
a command reaches above its stage's floor (``gate --render`` renders, ``pool build`` samples the
policy), in a top-level ``<stage>_cli`` module (docs/architecture.md); it adds its sub-command(s) with ``set_defaults(func=...)``, where ``func(args) -> int`` is the exit code.
A module of ``_COMMAND_MODULES`` that cannot be imported is an error (``ImportError`` naming it),
never a silently missing command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules whose ``register(subparsers)`` adds sub-commands, in ``--help`` order.
_COMMAND_MODULES = (
    "brushrl.orchestrator.cli",  # train
    "brushrl.render.cli",  # render
    "brushrl.gate_cli",  # gate
    "brushrl.pool_cli",  # pool
    "brushrl.bench_cli",  # bench render
    "brushrl.plan.cli",  # config check, plan
    "brushrl.hub.cli",  # weights fetch
    "brushrl.rehearse.cli",  # rehearse
    "brushrl.artifacts.cli",  # serve
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="brushrl",
        description=(
            "Teach a code LLM to paint watercolours with p5.brush: GRPO on Ray, with a pool of "
            "headless-Chromium renderers, a sketch gate and reward scorers."
        ),
        epilog="Run 'brushrl COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # a broken install must not look like a missing command
            raise ImportError(f"brushrl: the commands of {name} cannot be imported ({type(exc).__name__}: {exc}); "
                              "is the installation complete?") from exc
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``brushrl`` console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
