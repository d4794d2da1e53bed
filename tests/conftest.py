"""Helpers shared by several test files (pytest puts ``tests/`` on ``sys.path``, so a test file
imports them with ``from conftest import ...``)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picked it; a server started
    right after will almost always get it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
