"""``brushrl serve runs/X``: a small static file server for a run directory on 127.0.0.1.

Built on the standard library's ``http.server`` (``ThreadingHTTPServer`` +
``SimpleHTTPRequestHandler``, which refuses paths outside the served directory). Every response is
sent with ``Cache-Control: no-store`` so the live gallery's reloads always see the latest step.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _NoStoreHandler(SimpleHTTPRequestHandler):
    """Static files with ``Cache-Control: no-store``; request logging off (the CLI prints the URL)."""

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
        pass


class RunServer:
    """Serves ``run_dir`` at ``http://127.0.0.1:<port>/`` from a background thread.

    Args:
        run_dir: the run directory (must exist).
        port: TCP port on 127.0.0.1; 0 picks a free one (see ``url``).

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
        OSError: the port is taken.
    """

    def __init__(self, run_dir: str | Path, port: int = 0):
        self.root = Path(run_dir).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"run directory {self.root} does not exist")
        handler = functools.partial(_NoStoreHandler, directory=str(self.root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The gallery's URL."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/gallery.html"

    def start(self) -> "RunServer":
        """Serve in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="brushrl-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self.httpd.serve_forever()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()
