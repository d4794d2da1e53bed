"""Regenerate the gate's committed name tables (see :mod:`brushrl.gate.names`).

python -m brushrl.gate.make_names            # print both tables
python -m brushrl.gate.make_names --write    # overwrite both data/*.json files
"""

from __future__ import annotations

import argparse
import json
import sys

from brushrl.gate.names import (
    BROWSER_FILE,
    DEFAULT_CHROMIUM,
    DEFAULT_JS_ROOT,
    NAMES_FILE,
    dump_browser_globals,
    dump_js_names,
)


def main(argv: list[str] | None = None) -> int:
    """Print (or with ``--write`` store) the name tables of the installed libraries and browser."""
    parser = argparse.ArgumentParser(prog="python -m brushrl.gate.make_names", description=__doc__)
    parser.add_argument("--js-root", default=str(DEFAULT_JS_ROOT), help="node_modules folder")
    parser.add_argument("--chromium", default=DEFAULT_CHROMIUM, help="Chromium executable")
    parser.add_argument("--only", choices=("js", "browser"), help="regenerate one table")
    parser.add_argument("--write", action="store_true", help="overwrite the committed data files")
    args = parser.parse_args(argv)
    jobs = []
    if args.only in (None, "js"):
        jobs.append((NAMES_FILE, lambda: dump_js_names(args.js_root)))
    if args.only in (None, "browser"):
        jobs.append((BROWSER_FILE, lambda: dump_browser_globals(args.chromium)))
    for path, dump in jobs:
        text = json.dumps(dump(), indent=1) + "\n"
        if args.write:
            path.write_text(text)
            print(f"wrote {path}")
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
