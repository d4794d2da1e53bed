"""CPU time and memory of one headless Chromium's processes (psutil over the browser's tree).

Chromium is launched with a marker switch (``--brushrl-browser=<token>``; Chromium ignores unknown
switches) so that its browser process can be told apart from other Chromiums on the machine
(other actors, other users). Every Chromium child (zygotes, GPU, network service, the per-page
renderer processes) is a descendant of that browser process (measured on Chromium 156 with
``--no-sandbox``: renderers are children of the non-sandbox zygote, which is the browser's child).

CPU accounting: ``cpu_s`` sums user + system time of every live process in the tree *plus* the
user + system time of their reaped children (``children_user`` / ``children_system``, i.e.
``RUSAGE_CHILDREN``). A page's renderer process that exits when its context is closed is reaped by
the zygote, so its CPU time moves into the zygote's children time and the sum stays complete and
monotonic (up to a race of one reap between two reads). Crashpad handlers, which re-parent to init,
are not counted (they idle).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

import psutil

MARKER = "--brushrl-browser="
"""Prefix of the switch that tags a browser process (value: a random token per launch)."""

MB = 1024 * 1024


def new_marker() -> str:
    """A fresh marker switch, e.g. ``--brushrl-browser=3f9a...`` (random, 16 hex digits)."""
    return MARKER + secrets.token_hex(8)


@dataclass
class Usage:
    """One reading of a Chromium's processes.

    Attributes:
        cpu_s: user + system CPU seconds of the tree so far (reaped children included), core-seconds.
        rss_mb: sum of resident set sizes of the live processes, MiB (shared pages counted once per
            process, so an upper bound of the memory the browser really holds).
        renderer_rss_mb: ``{pid: RSS MiB}`` of the ``--type=renderer`` processes (the pages).
        gpu_rss_mb: RSS of the ``--type=gpu-process`` process, MiB: WebGL buffers and textures
            live there, beyond the renderer's cap.
    """

    cpu_s: float = 0.0
    rss_mb: float = 0.0
    renderer_rss_mb: dict[int, float] | None = None
    gpu_rss_mb: float = 0.0


class ChromiumProcesses:
    """The process tree of one browser process.

    Args:
        browser_pid: pid of Chromium's browser process (the one without ``--type=``).
    """

    def __init__(self, browser_pid: int):
        self.browser = psutil.Process(browser_pid)

    @classmethod
    def find(cls, marker: str, root_pid: int | None = None) -> ChromiumProcesses | None:
        """The browser launched with switch ``marker`` among the descendants of ``root_pid``
        (default: this process; the Playwright driver runs below it), or None if none is found."""
        try:
            below = psutil.Process(root_pid or os.getpid()).children(recursive=True)
        except psutil.Error:
            return None
        for p in below:
            try:
                if marker in p.cmdline():
                    return cls(p.pid)
            except psutil.Error:
                continue
        return None

    def processes(self) -> list[psutil.Process]:
        """The browser process and its live descendants (empty once the browser is gone)."""
        try:
            return [self.browser, *self.browser.children(recursive=True)]
        except psutil.Error:
            return []

    def usage(self) -> Usage:
        """Read CPU and memory of every process in the tree (processes that vanish mid-read are
        skipped). Costs about 0.1 ms per process."""
        out = Usage(renderer_rss_mb={})
        for p in self.processes():
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    rss = p.memory_info().rss / MB
                    if p is not self.browser:
                        cmd = p.cmdline()
                        if "--type=renderer" in cmd:
                            out.renderer_rss_mb[p.pid] = rss
                        elif "--type=gpu-process" in cmd:
                            out.gpu_rss_mb += rss
            except psutil.Error:
                continue
            out.cpu_s += t.user + t.system + t.children_user + t.children_system
            out.rss_mb += rss
        return out
