"""Run Chromium in an empty network namespace (``unshare -rn``, util-linux).

Why: the page's own defences (route interception, CSP, WebRTC policy) stop every request, but not
Chromium's speculative *preconnect*: a sketch that opens a popup, submits a form or navigates to
``http://127.0.0.1:PORT/`` made a TCP connection reach a listener on that port although the request
itself was aborted or refused (measured, Chromium 156). In a network namespace of its own Chromium
has only a loopback that is down and no route anywhere, so nothing it opens leaves it; Playwright
talks to it over a pipe (``--remote-debugging-pipe``) and is unaffected.

``unshare -rn`` needs unprivileged user namespaces (or root); where they are unavailable (some
container runtimes) ``network_launcher`` says so and the caller falls back to the page defences.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


@functools.cache
def netns_available() -> bool:
    """Whether ``unshare -rn true`` works on this machine (cached per process)."""
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def network_launcher(chromium_path: str, mode: str) -> tuple[str, bool]:
    """The executable to launch and whether it isolates the network.

    Args:
        chromium_path: the real Chromium executable.
        mode: ``"netns"`` (required: raise if unavailable), ``"auto"`` (netns when available) or
            ``"none"`` (``chromium_path`` unchanged).

    Returns:
        ``(executable, isolated)``; with isolation, ``executable`` is a two-line shell wrapper
        ``exec unshare -rn -- CHROMIUM "$@"`` in the temp folder (one per Chromium path, reused).

    Raises:
        RuntimeError: ``mode == "netns"`` and ``unshare -rn`` does not work here.
        ValueError: unknown ``mode``.
    """
    if mode not in ("netns", "auto", "none"):
        raise ValueError(f"render.network_isolation must be netns, auto or none, not {mode!r}")
    if mode == "none" or (mode == "auto" and not netns_available()):
        return chromium_path, False
    if not netns_available():
        raise RuntimeError("render.network_isolation=netns but `unshare -rn true` fails on this machine "
                           "(no user namespaces); use auto or none")
    tag = hashlib.sha256(chromium_path.encode()).hexdigest()[:12]
    wrapper = Path(tempfile.gettempdir()) / f"brushrl-chromium-netns-{tag}-{os.getuid()}"
    text = f'#!/bin/sh\nexec {shutil.which("unshare")} -rn -- {chromium_path} "$@"\n'
    if not wrapper.exists() or wrapper.read_text() != text:
        tmp = wrapper.with_name(wrapper.name + f".{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)
    return str(wrapper), True
