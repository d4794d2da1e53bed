"""Write tests/file_seconds.json (seconds per test file, longest first) from a pytest JUnit XML.

The suite's conftest starts the longest files first on the xdist workers (longest-processing-time
first: the long end-to-end files no longer meet at the end). Refresh it after a full run:

    .venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --junitxml=/tmp/junit.xml
    .venv/bin/python scripts/test_file_seconds.py /tmp/junit.xml
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "file_seconds.json"


def main(junit: str) -> None:
    seconds: collections.Counter = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):  # classname: "tests.test_x" or "tests.test_x.Class"
        module = next(p for p in case.get("classname", "").split(".") if p.startswith("test_"))
        seconds[f"tests/{module}.py"] += float(case.get("time") or 0)
    OUT.write_text(json.dumps({f: round(s) for f, s in seconds.most_common()}, indent=1) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()):,.0f} s in all")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
