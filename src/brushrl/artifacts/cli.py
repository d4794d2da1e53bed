"""``brushrl serve`` and ``brushrl summary``."""

from __future__ import annotations

import argparse


def run_serve(args: argparse.Namespace) -> int:
    """Serve a run directory until Ctrl-C; 2 when it does not exist or the port is taken."""
    from brushrl.artifacts.serve import RunServer

    try:
        server = RunServer(args.run_dir, args.port)
    except (FileNotFoundError, OSError) as exc:
        print(f"cannot serve {args.run_dir}: {exc}")
        return 2
    if not (server.root / "gallery.html").exists():
        print(f"note: {server.root} has no gallery.html yet; it appears after the run's first step")
    print(f"serving {server.root} at {server.url}  (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def run_summary(args: argparse.Namespace) -> int:
    """Print a run directory's summary; 2 when it is not a run directory."""
    from brushrl.artifacts.summary import summarize

    try:
        summary = summarize(args.run_dir)
    except FileNotFoundError as exc:
        print(exc)
        return 2
    print("\n".join(summary.lines(wall_s=args.wall_s, shown_root=args.run_dir)))
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a run directory's live gallery on 127.0.0.1",
        description="Serve RUN_DIR (e.g. runs/local) over HTTP on 127.0.0.1 so gallery.html can be opened "
        "from a browser, also through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT host). While the run goes "
        "on the page reloads itself after every few seconds and shows the latest step.",
    )
    p.add_argument("run_dir", help="the run directory (<run.output_dir>/<run.name>)")
    p.add_argument("--port", type=int, default=8765, help="TCP port on 127.0.0.1; 0 picks a free one (default: %(default)s)")
    p.set_defaults(func=run_serve)

    s = sub.add_parser(
        "summary",
        help="print a short summary of a run directory (state, steps, reward trend, gate, gallery)",
        description="Summarise RUN_DIR from its status.json, metrics.jsonl and rollouts.parquet: state and steps, "
        "step seconds, mean reward of the first vs last 5 steps, gate pass rate and failure reasons, None "
        "rewards by cause, groups by outcome, where the gallery is and how to open it. `make demo` ends with it.",
    )
    s.add_argument("run_dir", help="the run directory (<run.output_dir>/<run.name>)")
    s.add_argument("--wall-s", type=float, help="wall seconds of the command that ran it, to print beside the steps'")
    s.set_defaults(func=run_summary)
