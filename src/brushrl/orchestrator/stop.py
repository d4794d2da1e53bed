"""Stopping a run cleanly on ``ray job stop`` (SIGTERM) or Ctrl-C (SIGINT).

``ray job stop`` sends the job's driver (and its child processes) SIGTERM, waits
``RAY_JOB_STOP_WAIT_TIME_S`` seconds (Ray 2.60 default 3; the repo's runtime envs set 60) and then
sends SIGKILL (``ray/dashboard/modules/job/job_supervisor.py``). ``ray.init`` installs its own
SIGTERM handler (``sys.exit(15)``), so :class:`GracefulStop` must be entered *after* ``ray.init``.
"""

from __future__ import annotations

import signal
import threading


class GracefulStop:
    """Turns the first SIGTERM or SIGINT into ``KeyboardInterrupt`` in the main thread, so the
    trainer's ``except``/``finally`` flush metrics, close the renderers and write the final status.

    Invariants:
        * only the first signal raises; later ones are recorded and ignored, so a second
          ``ray job stop`` (or Ctrl-C) cannot cut the cleanup short (SIGKILL still can);
        * after :meth:`shutting_down` no signal raises (the cleanup itself is never interrupted);
        * leaving the ``with`` block restores the previous handlers;
        * outside the main thread (where Python delivers no signals) it installs nothing.

    Attributes:
        received: name of the first signal received (``"SIGTERM"``, ``"SIGINT"``), or None.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: str | None = None
        self._raising = True
        self._previous: dict[int, object] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def shutting_down(self) -> None:
        """From now on signals are only recorded (the run is already ending)."""
        self._raising = False

    def _handle(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        first = self.received is None
        if first:
            self.received = signal.Signals(signum).name
        if first and self._raising:
            self._raising = False
            raise KeyboardInterrupt(self.received)
