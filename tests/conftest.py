"""Helpers shared by several test files (pytest puts ``tests/`` on ``sys.path``, so a test file
imports them with ``from conftest import ...``)."""

from __future__ import annotations

from brushrl.ray_setup import free_port  # noqa: F401 - re-exported for the test files


def slow_e2e(why: str):
    """Mark an end-to-end test past CI's budget: slow, and run only with ``BRUSHRL_SLOW_E2E=1``
    (``make test SLOW_E2E=1``); ``why`` goes into the skip reason (its cost, what covers it in CI)."""
    import os

    import pytest

    def mark(test):
        skip = pytest.mark.skipif(os.environ.get("BRUSHRL_SLOW_E2E") != "1",
                                  reason=f"BRUSHRL_SLOW_E2E=1 (make test SLOW_E2E=1) runs it: {why}")
        return pytest.mark.slow(skip(test))

    return mark
