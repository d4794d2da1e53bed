"""Helpers shared by several test files (pytest puts ``tests/`` on ``sys.path``, so a test file
imports them with ``from conftest import ...``)."""

from __future__ import annotations

import socket

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


class Listener:
    """A TCP and a UDP socket on 127.0.0.1 that record every connection and datagram they get.

    ``addr`` is ``"127.0.0.1:PORT"`` (the UDP socket has the same port number), ``hits`` what
    arrived; ``settle()`` returns once the listening thread has made two more full passes, so
    anything already queued on either socket is in ``hits``.
    """

    def __init__(self) -> None:
        import threading

        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.udp.bind(("127.0.0.1", port))
        except OSError:  # taken for UDP: any port will do
            self.udp.bind(("127.0.0.1", 0))
        for s in (self.tcp, self.udp):
            s.settimeout(0.1)
        self.addr = f"127.0.0.1:{port}"
        self.hits: list = []
        self._stop = threading.Event()
        self._pass = threading.Condition()
        self._passes = 0
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            for take in (self.tcp.accept, lambda: self.udp.recvfrom(2048)):
                try:
                    self.hits.append(take())
                except OSError:
                    pass
            with self._pass:
                self._passes += 1
                self._pass.notify_all()

    def settle(self) -> list:
        """Wait for two more passes of the listening thread; returns ``hits``."""
        with self._pass:
            target = self._passes + 2
            self._pass.wait_for(lambda: self._passes >= target or self._stop.is_set())
        return self.hits

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.tcp.close()
        self.udp.close()
