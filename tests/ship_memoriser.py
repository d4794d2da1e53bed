"""Build the tests' shipped memoriser: the warm start of ``test_train.small_overrides`` into
``tests/warm_starts/<key>/`` (``conftest.TEST_WARM_STARTS``), the other entries there removed.

    .venv/bin/python tests/ship_memoriser.py     # then commit tests/warm_starts

Run it when ``test_train.test_the_shipped_memoriser_is_the_tests_recipe`` says the recipe moved.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import TEST_WARM_STARTS  # noqa: E402
from test_train import ROOT, small_overrides  # noqa: E402

from brushrl.config import load_config  # noqa: E402
from brushrl.policy.ship import ship  # noqa: E402

if __name__ == "__main__":
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        key, size, removed = ship(load_config(ROOT / "configs/local.yaml", small_overrides(Path(tmp))), TEST_WARM_STARTS)
    print(f"tests' memoriser {key} ({size / 2**20:.1f} MiB) in {TEST_WARM_STARTS}, {time.perf_counter() - t0:.0f} s"
          + (f"; removed {', '.join(removed)}" if removed else ""))
