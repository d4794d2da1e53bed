"""Helpers shared by several test files (pytest puts ``tests/`` on ``sys.path``, so a test file
imports them with ``from conftest import ...``)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from brushrl.ray_setup import free_port  # noqa: F401 - re-exported for the test files

#: The tests' SFT cache (``policy.sft.cache_dir`` of ``test_train.small_overrides``), shared by the
#: test files so a tiny warm start is trained at most once per machine.
SFT_CACHE = Path.home() / ".cache" / "brushrl-tests"
#: Warm starts shipped with the tests, one folder per cache key: the memoriser of
#: ``test_train.small_overrides`` (``tests/ship_memoriser.py`` builds it; its recipe is checked by
#: ``test_train.test_the_shipped_memoriser_is_the_tests_recipe``). Training it took ~70 s of every
#: fresh CI (issue 38); a recipe change misses it and trains, as before. The training is
#: deterministic: trained with 1 or 2 torch threads, on a loaded box, the weights came out
#: byte-identical to the shipped ones (sha256 of model.safetensors), so tests see what they saw.
TEST_WARM_STARTS = Path(__file__).resolve().parent / "warm_starts"


@pytest.fixture(scope="session", autouse=True)
def shipped_test_warm_starts():
    """Copy each shipped test warm start that ``SFT_CACHE`` lacks into it (``sft._install``: under a
    temporary name, then renamed, so two xdist workers doing it at once is safe)."""
    from brushrl.policy.sft import DONE_MARKER, _install

    for entry in TEST_WARM_STARTS.glob("*"):
        if (entry / DONE_MARKER).exists() and not (SFT_CACHE / entry.name / DONE_MARKER).exists():
            _install(entry, SFT_CACHE / entry.name)


if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers share the cores: a tiny warm start trained with 2 torch threads while the other
    # worker runs took 7 min 51 s in CI (900 tokens/s), ~25 s quiet (brushrl.policy.sft.sft_threads).
    os.environ.setdefault("BRUSHRL_SFT_THREADS", "1")


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


class JsonHandler:
    """Mixin for a ``BaseHTTPRequestHandler`` of a stand-in server: HTTP/1.1 keep-alive, no access
    log, ``_send(status, obj)`` answers with ``obj`` as JSON."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LocalHTTPServer:
    """A real threaded HTTP server on 127.0.0.1 (an OS-chosen port) serving ``handler`` in a daemon
    thread; ``url`` is its OpenAI-style root ``http://127.0.0.1:PORT/v1``. A client that timed out
    and hung up is not reported (tests do that on purpose)."""

    def __init__(self, handler) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class StandInServer:
    """Base of a test's stand-in server class: ``_serve(handler)`` starts it (``url``), ``close()``
    stops it."""

    def _serve(self, handler) -> None:
        self.http = LocalHTTPServer(handler)
        self.url = self.http.url

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def fresh_ray():
    """No Ray connection before the test (its code starts its own cluster) and none after it."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    yield
    ray.shutdown()


def pytest_collection_modifyitems(session, config, items):
    """Longest test files first (``tests/file_seconds.json``, measured; an unknown file counts as
    20 s): with ``make test``'s ``-n 2 --dist loadfile --no-loadscope-reorder`` the xdist workers take
    files in this order, so the long end-to-end files start early instead of meeting at the end
    (xdist's default reorder puts files with the most tests first). Within a file, order is kept.
    ``scripts/test_file_seconds.py`` refreshes the table from a run's JUnit XML."""
    from pathlib import Path

    table = Path(__file__).with_name("file_seconds.json")
    seconds = json.loads(table.read_text()) if table.exists() else {}
    root = Path(str(config.rootpath))

    def cost(item) -> float:
        try:
            return seconds.get(Path(str(item.path)).relative_to(root).as_posix(), 20)
        except ValueError:  # a test outside the repository
            return 20

    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-cost(item), order[id(item)]))
