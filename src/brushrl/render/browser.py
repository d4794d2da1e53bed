"""One headless Chromium that renders p5.brush sketches to PNG.

A ``Renderer`` owns one browser (Playwright sync API, Debian's ``/usr/bin/chromium``) and renders
each sketch in a fresh browser context + page (``brushrl.render.page.SketchPage``), i.e. a fresh JS
realm with no storage shared with the previous sketch. The next sketch's page is opened while the
current one draws (a *spare*, ``render.spare_page``), with p5 and p5.brush already loaded when its
sketch arrives. The page is the harness of ``brushrl.render.harness``, which refuses and
reports (``RenderResult.forbidden``) every call the sketch makes outside the gate's allowlist.
With ``mode="replay"`` (``render.mode``, the default) that page only *records*: its brush calls
are logged, never drawn, the log is validated here (``brushrl.render.calllog``), and a second page
holding only p5, p5.brush and the log re-draws the painting with the same seed; that PNG is the
result (a rejected log is an ``error`` with ``RenderResult.rejected``). The
network is closed by an empty network namespace around Chromium (``brushrl.render.netns``; a
renderer refuses to start without one unless the config opts out), and behind it by
``page.route`` (everything except the page and the two libraries is aborted and recorded), a CSP
(``connect-src 'none'``, nonce'd inline scripts, no ``unsafe-eval``) and Chromium's flags
(``BASE_ARGS``). Dialogs are dismissed, popups closed, downloads refused, and every refusal is
listed in ``RenderResult.refused``. The capture is checked: a PNG data URL whose IHDR size is that
of the canvas the harness read it from. While it waits, the renderer samples the browser's
processes (``brushrl.render.procs``): CPU core-seconds and peak memory go into the result, and a
page whose renderer process passes the memory cap is killed.

Outcome classification (``RenderResult.status``):

* ``ok``: the sketch finished (setup returned and, if it has ``draw``, one frame completed) and
  the canvas was captured with ``toDataURL`` inside the page.
* ``error``: an uncaught exception or unhandled rejection in the page (a sketch fault; it is not
  retried, rendering is deterministic), the page passed the memory cap and was killed, the sketch
  navigated the page away, or the page's renderer process crashed twice, the second time in a
  freshly launched browser (e.g. the sketch exhausted V8's heap).
* ``timeout``: the sketch started but no finished canvas came within ``deadline_s``, on every
  attempt (infinite loop, an await that never resolves). The runaway page is closed with its
  context; Python never evaluates in the page, so a busy page cannot block it (a Playwright
  ``evaluate`` or ``wait_for_function`` on a page in ``while (true) {}`` never returned, measured).
* ``infra``: the browser crashed / disconnected, Playwright failed, or the deadline passed before
  the page even reached the sketch (p5 still loading: an overloaded machine), even after
  relaunching the browser once, or an attempt whose driver call never returned (its browser is
  killed ``HANG_GRACE_S`` past the deadline, ``HangGuard``); the reward layer turns this into None.
"""

from __future__ import annotations

import base64
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Self

import psutil
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

from brushrl.config import RenderConfig
from brushrl.gate import reasons as R
from brushrl.render.calllog import MAX_ABS, Bounds, CallLogRejected, replay_program, validate_log
from brushrl.render.harness import harness_digest, load_assets
from brushrl.render.page import MAX_CHARS, SketchPage
from brushrl.render.paint import paint_fraction
from brushrl.render.netns import network_launcher
from brushrl.render.procs import ChromiumProcesses, Usage, new_marker
from brushrl.render.text import TextReader, shared_reader
from brushrl.types import RenderResult

#: Flags for every launch: no sandbox (we run as root) and no traffic of Chromium's own. The rest
#: is the second network layer, for a renderer without a namespace (``render.network_isolation:
#: none``): every connection Chromium makes (page requests the route missed, preconnects,
#: WebRTC's TCP TURN) goes to a proxy that does not exist, loopback included (Chromium bypasses a
#: proxy for localhost by default: ``<-loopback>`` undoes that), WebRTC may use no UDP but the
#: proxy's (none), and no DNS prefetch. Measured on a page without the harness, Chromium without a
#: namespace (tests/test_sandbox.py): a frame's WebRTC with TURN over TCP, a link preconnect and a
#: navigation made 2 TCP connections to a listener on 127.0.0.1 without the proxy flags, none with.
DEAD_PROXY = "socks5://255.255.255.255:9"
BASE_ARGS = (
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy",
    f"--proxy-server={DEAD_PROXY}",
    "--proxy-bypass-list=<-loopback>",
    "--dns-prefetch-disable",
)

#: Software WEBGL backends (measured on Chromium 156, docs/perf/render.md).
#: ``swiftshader``: WebGL on ANGLE/Vulkan/SwiftShader. ``--disable-gpu`` keeps WebGL there but moves
#: Chromium's own 2D canvas and compositing to the CPU; p5.brush paints its masks on a 2D canvas, so
#: this made the 21-shape painting ~15x faster (56 s -> 3.3 s under load) with a visually identical
#: picture. ``llvmpipe``: ANGLE on Mesa's GL-EGL llvmpipe (needs ``--ignore-gpu-blocklist``, else no
#: WebGL2); here ``--disable-gpu`` would silently fall back to SwiftShader, so only the 2D canvas is
#: moved to the CPU (``--disable-accelerated-2d-canvas``).
GL_ARGS = {
    "swiftshader": ("--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--disable-gpu"),
    "llvmpipe": ("--use-gl=angle", "--use-angle=gl-egl", "--ignore-gpu-blocklist", "--disable-accelerated-2d-canvas"),
}

log = logging.getLogger(__name__)

POLL_MS = 40
"""How often (ms) Python checks for the page's report; the wait runs in the Playwright driver."""
SPARE_MAX_AGE_S = 300.0
"""A spare page older than this is closed unused and a new one opened (its held script requests
should not have to wait on the browser for minutes, e.g. while the learner steps)."""
SPARE_OPEN_MS = 30_000
"""How long opening a spare page may take before the renderer goes on without one."""
_CRASH = "page crashed"
HANG_GRACE_S = 60.0
"""Seconds past an attempt's deadline after which its Playwright call is presumed never to return
and the browser is killed (``HangGuard``). The sync API's DevTools ``send`` and some waits take no
timeout; one waited 20+ minutes on an idle Chromium in a loaded CI run."""
_HUNG = "browser hung"
MEMORY_CAP = "memory cap"
"""Prefix of the ``js_errors`` entry (and ``refused`` entry) of a page killed for its memory."""


_local = threading.local()


def _acquire_playwright():
    """The calling thread's Playwright driver, started on first use. Playwright's sync API allows
    one driver per thread, so every Renderer of a thread shares it (reference-counted)."""
    held = getattr(_local, "held", None)
    if held is None:
        held = _local.held = [sync_playwright().start(), 0]
    held[1] += 1
    return held[0]


def _restart_playwright(dead):
    """Replace the calling thread's Playwright driver ``dead`` (its process exited or was killed)
    with a new one, keeping the reference count; returns the thread's driver (already replaced if
    another Renderer of the thread did it first)."""
    held = _local.held
    if held[0] is dead:
        try:
            dead.stop()
        except Exception:  # noqa: BLE001 - the driver is gone; stopping only frees the thread's loop
            pass
        held[0] = sync_playwright().start()
    return held[0]


def _release_playwright() -> None:
    held = _local.held
    held[1] -= 1
    if held[1] == 0:
        _local.held = None
        held[0].stop()


class HangGuard:
    """Kill a browser whose driver call outlives ``seconds``: a ``with`` block arms a timer; if the
    block is still inside when it fires, the browser's process tree is SIGKILLed from the timer's
    thread (never a Playwright call: the sync API is not thread-safe), which makes the blocked call
    raise. ``fired`` then says what happened (else '').

    Args:
        seconds: wall-clock limit of the block (s).
        procs: the browser's processes; None (not found at launch) makes the guard log and do nothing.
    """

    def __init__(self, seconds: float, procs: ChromiumProcesses | None):
        self.seconds, self.procs, self.fired = seconds, procs, ""
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        if self.procs is None:
            log.error("a render is %.0f s in and its browser's processes are unknown: cannot kill it", self.seconds)
            return
        self.fired = f"a driver call was still waiting {self.seconds:.0f} s into the attempt; the browser was killed"
        for proc in self.procs.processes():
            try:
                proc.kill()
            except psutil.Error:
                pass

    def __enter__(self) -> HangGuard:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


class Renderer:
    """One headless Chromium rendering sketches one at a time; use it from the thread that made it
    (Playwright's sync API). Renderers of one thread share one Playwright driver process.

    Args:
        chromium_path: the Chromium executable (never a Playwright-downloaded browser).
        gl_backend: ``"swiftshader"`` or ``"llvmpipe"`` (keys of ``GL_ARGS``).
        js_dir: folder with ``node_modules/p5`` and ``node_modules/p5.brush``; None finds it
            (``brushrl.render.harness.find_js_dir``).
        actor_id: written into every ``RenderResult.actor_id``.
        extra_args: more Chromium flags (benchmarks).
        memory_cap_mb: RSS cap of the page's renderer process, and of the GPU process, where its
            WebGL buffers live (MiB; None: no cap). Above it the process is killed (the GPU
            process over it: the pages are) and the render is a sketch ``error`` whose first ``js_errors`` entry
            starts with ``MEMORY_CAP``; the browser lives on. V8's old space is limited to half of
            it with ``--js-flags=--max-old-space-size`` (an ArrayBuffer is not V8 heap, hence the
            RSS watch). Checked every ``POLL_MS``.
        network_isolation: ``"netns"``: run Chromium in an empty network namespace, or raise
            where there is none (``brushrl.render.netns``); ``"none"``: explicitly without one
            (logged as a warning and counted). ``self.netns`` says which.
        spare_page: keep the next render's page open and loaded (``brushrl.render.page``) while a
            sketch draws, so a render does not wait for a new context and the libraries' load
            (with ``mode="replay"``, a record page and a replay page).
        mode: ``"replay"``: record the sketch's calls, validate the log, re-draw it in a page
            without sketch code and return that PNG (``brushrl.render.calllog``); ``"direct"``:
            capture the canvas the sketch painted itself; ``"bare"`` (benchmarks only, unsafe): the
            sketch in a page without the harness, the path before the in-page wrapping.
        text_reader: reads every ``ok`` render's PNG for text into ``RenderResult.text`` (its
            seconds in ``phases["text"]``; ``brushrl.render.text``); None leaves it None. A reader
            that fails makes the render ``infra``: an unread painting is never passed as read.

    Raises:
        FileNotFoundError: the js libraries are missing (run ``npm ci --prefix js``).
        RuntimeError: ``network_isolation="netns"`` and this machine has no network namespaces.
        playwright.sync_api.Error: Chromium cannot be launched.
    """

    def __init__(
        self,
        chromium_path: str = "/usr/bin/chromium",
        gl_backend: str = "swiftshader",
        js_dir: str | Path | None = None,
        actor_id: str = "local",
        extra_args: tuple[str, ...] = (),
        memory_cap_mb: int | None = 2048,
        network_isolation: str = "netns",
        spare_page: bool = True,
        mode: str = "replay",
        text_reader: TextReader | None = None,
    ):
        if mode not in ("replay", "direct", "bare"):
            raise ValueError(f"render mode {mode!r} is not replay or direct (or bare: benchmarks only)")
        self.mode = mode
        self.spare_page = spare_page
        self.text_reader = text_reader
        self._spares: dict[str, SketchPage] = {}  # page kind -> the spare of that kind
        self._assets = load_assets(Path(js_dir) if js_dir else None)
        self._marker = new_marker()
        heap = (f"--js-flags=--max-old-space-size={memory_cap_mb // 2}",) if memory_cap_mb else ()
        self._args = [*BASE_ARGS, *GL_ARGS[gl_backend], *heap, self._marker, *extra_args]
        self.memory_cap_mb = memory_cap_mb
        self.procs: ChromiumProcesses | None = None
        """The browser's processes (None if they could not be found: no CPU/memory figures, no cap)."""
        self._chromium, self.netns = network_launcher(chromium_path, network_isolation)
        if not self.netns:
            log.warning("renderer %s: Chromium runs WITHOUT a network namespace (render.network_isolation: "
                        "none); only the page's defences and the launch flags keep it off the network",
                        actor_id)
            from brushrl.render.netns import count_unisolated_renderer

            count_unisolated_renderer()
        self.gl_backend = gl_backend
        self.actor_id = actor_id
        self._pw = _acquire_playwright()
        self._browser = None
        try:
            self._launch()
        except BaseException:
            _release_playwright()
            raise

    @classmethod
    def from_config(cls, cfg: RenderConfig, actor_id: str = "local") -> Renderer:
        """A renderer for a ``brushrl.config.RenderConfig``."""
        return cls(cfg.chromium_path, cfg.gl_backend, actor_id=actor_id, memory_cap_mb=cfg.memory_cap_mb,
                   network_isolation=cfg.network_isolation, spare_page=cfg.spare_page, mode=cfg.mode,
                   text_reader=shared_reader(cfg.text_scan_side) if cfg.text_scan else None)

    @property
    def browser_version(self) -> str:
        """Chromium's version string, e.g. ``156.0.8078.108``."""
        return self._browser.version

    @property
    def env(self) -> str:
        """What besides code, seed and size decides the render: ``p5+brush:<digest>
        harness:<digest> chromium:<version> gl:<backend> mode:<mode>`` and ``text:<reader>`` with a
        text reader (the render cache's key part, ``brushrl.render.cache``; the harness decides what
        is refused, the reader what ``RenderResult.text`` holds)."""
        from brushrl.render.cache import library_digest

        text = f" text:{self.text_reader.version}" if self.text_reader else ""
        return (f"p5+brush:{library_digest(self._assets)} harness:{harness_digest()} "
                f"chromium:{self.browser_version} gl:{self.gl_backend} mode:{self.mode}{text}")

    def _launch(self) -> None:
        self._browser = self._pw.chromium.launch(
            executable_path=self._chromium, headless=True, args=self._args
        )
        self.procs = ChromiumProcesses.find(self._marker)

    def usage(self) -> Usage:
        """CPU and memory of the browser's processes now (zeros if they are unknown)."""
        return self.procs.usage() if self.procs else Usage(renderer_rss_mb={})

    def _relaunch(self) -> None:
        """A new browser; if the launch fails, the Playwright driver is presumed dead (killed, or
        taken with the browser) and replaced before one more launch.

        Raises:
            playwright.sync_api.Error: Chromium cannot be launched with a new driver either.
        """
        self._spares = {}  # their contexts go with the browser
        try:
            self._browser.close()
        except PlaywrightError:
            pass
        try:
            self._launch()
        except PlaywrightError:
            self._pw = _restart_playwright(self._pw)
            self._launch()

    def close(self) -> None:
        """Shut the browser and the Playwright driver down (idempotent)."""
        if self._browser is not None:
            spares, self._spares = self._spares, {}
            for spare in spares.values():
                try:
                    spare.close()
                except PlaywrightError:
                    pass
            try:
                self._browser.close()
            except PlaywrightError:
                pass
            self._browser = None
            _release_playwright()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def render(
        self, code: str, seed: int, size: int, deadline_s: float, attempts: int = 2
    ) -> RenderResult:
        """Run ``code`` with ``Math.random`` seeded by ``seed`` and capture its canvas.

        Args:
            code: the sketch (global-mode p5 JavaScript defining ``setup`` and usually ``draw``).
            seed: render seed (uint32; reduced modulo 2**32); same code + seed + size gives the
                same painting up to SwiftShader's rasterisation noise (docs/perf/render.md).
            size: viewport side in pixels; the sketch itself sizes its canvas with createCanvas.
            deadline_s: wall-clock seconds allowed per attempt (page creation included).
            attempts: tries when the deadline is hit; an infra failure is retried once in a
                relaunched browser on top of this.

        Returns:
            a ``RenderResult`` (never raises for sketch faults or browser failures); ``png`` is the
            captured ``size`` x ``size`` RGBA PNG when status is ``ok``.
        """
        start = time.monotonic()
        used, cpu_s, peak = 0, 0.0, 0.0

        def attempt() -> RenderResult:
            nonlocal used, cpu_s, peak
            r = self._attempt(code, seed, size, deadline_s)
            used, cpu_s, peak = used + 1, cpu_s + r.cpu_s, max(peak, r.peak_rss_mb)
            return r

        for _ in range(max(1, attempts)):
            result = attempt()
            if result.status == "infra":
                crashed = _crashed(result)
                self._safe_relaunch(result)
                result = attempt()
                if result.status == "infra" and crashed and _crashed(result):
                    result.status = "error"
                    result.js_errors.append("the page's renderer process crashed twice")
                if result.status == "infra":
                    self._safe_relaunch(result)
            if result.status != "timeout":
                break
        result.attempts, result.cpu_s, result.peak_rss_mb = used, cpu_s, peak
        if self.text_reader is not None and result.status == "ok" and result.png:
            t0 = time.monotonic()
            try:
                result.text = self.text_reader.read(result.png)
            except Exception as exc:  # noqa: BLE001 - unread is infra, never a pass
                result.status, result.detail = "infra", f"text scan failed: {type(exc).__name__}: {exc}"[:500]
            result.phases["text"] = time.monotonic() - t0
        result.wall_s = time.monotonic() - start
        result.actor_id = self.actor_id
        return result

    def _safe_relaunch(self, result: RenderResult) -> None:
        try:
            self._relaunch()
        except PlaywrightError as exc:  # next attempt fails fast and reports infra
            result.detail += f"; relaunch failed: {str(exc)[:MAX_CHARS]}"

    def _take_spare(self, size: int, kind: str) -> SketchPage | None:
        """The spare page of ``kind`` if it can take a sketch of ``size`` now, else None (a stale,
        crashed or wrongly sized spare is closed)."""
        spare = self._spares.pop(kind, None)
        if spare is None:
            return None
        if spare.size == size and not spare.crashed and time.monotonic() - spare.opened < SPARE_MAX_AGE_S:
            return spare
        self._dispose(spare)
        return None

    def _open_spare(self, size: int, left_ms: float, kind: str) -> None:
        """Open the next render's page now; its libraries load while this render's sketch draws
        (the driver serves the spare's requests during the render's wait, and this render's own
        reports while the spare opens). Waits at most ``left_ms`` of this render's deadline. A
        failure only costs the next render its head start."""
        if not self.spare_page or kind in self._spares:
            return
        try:
            self._spares[kind] = SketchPage(self._browser, self._assets, size, timeout_ms=min(SPARE_OPEN_MS, left_ms),
                                            kind=kind)
        except PlaywrightError as exc:
            log.debug("renderer %s: no spare page: %s", self.actor_id, exc)

    def _attempt(self, code: str, seed: int, size: int, deadline_s: float) -> RenderResult:
        """One attempt within ``deadline_s``: the sketch's page; in replay mode then the log's
        validation and the replay page (``brushrl.render.calllog``). An attempt still running
        ``HANG_GRACE_S`` past its deadline has its browser killed and ends as ``infra`` (counted,
        relaunched and retried by ``render``): no call into the driver can hold a renderer forever."""
        guard = HangGuard(deadline_s + HANG_GRACE_S, self.procs)
        with guard:
            result = self._attempt_pages(code, seed, size, deadline_s)
        if guard.fired:
            log.error("renderer %s: %s", self.actor_id, guard.fired)
            return RenderResult("infra", detail=f"{_HUNG}: {guard.fired}", console=result.console,
                                refused=result.refused)
        return result

    def _attempt_pages(self, code: str, seed: int, size: int, deadline_s: float) -> RenderResult:
        start = time.monotonic()
        if self.mode != "replay":
            return self._run_page(self.mode, code, seed, size, deadline_s, start)[0]
        rec, state = self._run_page("record", code, seed, size, deadline_s, start)
        if rec.status != "ok":
            return rec
        t0 = time.monotonic()
        try:
            if state.get("over"):  # the harness stopped recording at the value budget
                raise CallLogRejected(R.WORK_BUDGET, str(state["over"])[:MAX_CHARS])
            calls = validate_log(state.get("log"), Bounds(max_abs=max(MAX_ABS, 10.0 * size)))
        except CallLogRejected as exc:
            rec.status, rec.rejected, rec.detail = "error", exc.code, exc.detail
            rec.js_errors = [f"call log rejected ({exc.code}): {exc.detail}"[:MAX_CHARS]]
            return rec
        t_valid = time.monotonic() - t0
        rep, _ = self._run_page("replay", replay_program(calls), seed, size, deadline_s, start)
        # The sketch's page says what the sketch did (refusals, console, brush calls); the replay
        # page paints, and only its picture is judged. Its failures are the log's, i.e. the sketch's.
        phases = {**rec.phases, "validate": t_valid, **{f"replay_{k}": v for k, v in rep.phases.items() if k != "decode"}}
        if "decode" in rep.phases:
            phases["decode"] = rep.phases["decode"]
        return RenderResult(
            rep.status, png=rep.png, paint_fraction=rep.paint_fraction, draw_s=rep.draw_s,
            js_errors=rep.js_errors, console=rec.console, refused=rec.refused + rep.refused,
            detail=rep.detail and f"replay: {rep.detail}", cpu_s=rec.cpu_s + rep.cpu_s,
            peak_rss_mb=max(rec.peak_rss_mb, rep.peak_rss_mb), brush_calls=_calls(calls.brush_calls, rec.brush_calls),
            phases=phases, forbidden=rec.forbidden,
        )

    def _run_page(self, kind: str, body: str, seed: int, size: int, deadline_s: float,
                  start: float) -> tuple[RenderResult, dict | None]:
        """Run one page of ``kind`` with ``body`` (a sketch, or a replay program) until its done
        report, a crash or ``deadline_s`` after ``start``; returns the result and the done report
        (None without one). A record page's ``ok`` result has no PNG: its report holds the log."""

        def left_ms() -> float:
            return max(1.0, (deadline_s - (time.monotonic() - start)) * 1000)

        killed: list[str] = []  # why the page's renderer process was killed (memory cap)
        u0 = self.usage()
        peak = [u0.rss_mb]
        page: SketchPage | None = None

        gpu_over = [False]  # the GPU process passed the cap: the next render gets a new browser

        def kill(why: str, refused: str, pids) -> None:
            killed.append(f"{MEMORY_CAP}: {why}")
            page.refuse(refused)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

        def watch() -> None:
            """Sample the browser's processes: peak memory, and kill a page over the cap."""
            u = self.usage()
            peak[0] = max(peak[0], u.rss_mb)
            cap = self.memory_cap_mb
            for pid, rss in (u.renderer_rss_mb or {}).items():
                if cap and rss > cap and not killed:
                    kill(f"the page's renderer process used {rss:.0f} MiB > {cap} MiB and was killed",
                         f"memory {rss:.0f} MiB > cap {cap} MiB", [pid])
            if cap and u.gpu_rss_mb > cap and not killed:
                # WebGL memory is held in the GPU process, not the page's: the page is the one
                # drawing (spares only load), and killing the pages frees what they hold there.
                gpu_over[0] = True
                kill(f"the GPU process used {u.gpu_rss_mb:.0f} MiB > {cap} MiB (the page's WebGL buffers); "
                     "the pages were killed", f"memory: GPU process {u.gpu_rss_mb:.0f} MiB > cap {cap} MiB",
                     list(u.renderer_rss_mb or {}))

        t_begin = t_commit = time.monotonic()
        try:
            if self._browser is None or not self._browser.is_connected():
                return RenderResult("infra", detail="browser is not connected"), None
            page = self._take_spare(size, kind) or SketchPage(self._browser, self._assets, size,
                                                              timeout_ms=left_ms(), kind=kind)
            page.deliver(body, seed)
            t_commit = time.monotonic()
            if kind == "record":  # the replay page of this render loads while the sketch runs
                self._open_spare(size, left_ms(), "replay")
            self._open_spare(size, left_ms(), kind)
            # Wait in the driver, not in the page: the binding callback runs during these waits.
            while not page.done() and not page.crashed and not page.left and time.monotonic() - start < deadline_s:
                page.page.wait_for_timeout(min(POLL_MS, left_ms()))
                watch()
            if page.crashed and not page.done() and not killed:
                raise PlaywrightError("the page's renderer process crashed")
        except PlaywrightTimeoutError:  # the document did not even commit before the deadline
            pass
        except PlaywrightError as exc:
            if not killed:
                what = _CRASH if page is not None and page.crashed else "playwright error"
                seen = {"console": page.console, "refused": page.refused} if page is not None else {}
                self._dispose(page)
                return RenderResult("infra", detail=f"{what}: {str(exc)[:MAX_CHARS]}", **seen), None
        t_close = time.monotonic()
        self._dispose(page)
        t_closed = time.monotonic()
        if page is None:  # the new page did not commit in time
            return RenderResult("infra", detail=f"no finished canvas within {deadline_s:g} s: the page did not even "
                                                "open, so it never reached the sketch (machine overloaded?)"), None
        u1 = self.usage()
        seen = {"console": page.console, "refused": page.refused}
        meter = {"cpu_s": max(0.0, u1.cpu_s - u0.cpu_s), "peak_rss_mb": max(peak[0], u1.rss_mb),
                 "forbidden": page.forbidden()}
        if killed:
            result = RenderResult("error", js_errors=killed, **seen, **meter)
            if gpu_over[0]:  # the GPU process may keep what it grew to: the next render gets a new browser
                self._safe_relaunch(result)
            return result, None
        state = page.done()
        if page.left and not state:
            return RenderResult("error", js_errors=[f"the sketch navigated the page away (to {page.left})"[:MAX_CHARS]],
                                **seen, **meter), None
        if state is None:
            started = bool(page.events)
            return RenderResult(
                "timeout" if started else "infra",
                detail=f"no finished canvas within {deadline_s:g} s"
                + ("" if started else " and the page never reached the sketch (machine overloaded?)"),
                **seen,
                **meter,
            ), None
        # The sketch phase is timed on the page's clock: when its reports reach us depends on how
        # busy the machine is, so a split by arrival times could even make it shorter than draw_s.
        # The phases add up to the report's arrival: "page" is opening a page (about 0 with a
        # spare), "load" what was left of the libraries' load; a late report shortens "page".
        sketch_s = max(float(state.get("sketch_s", 0.0)), float(state["draw_s"]))
        t_sketch = state["_t"] - sketch_s
        t_commit = min(t_commit, t_sketch)
        t_commit = max(t_commit, t_begin)
        phases = {"page": t_commit - t_begin, "load": t_sketch - t_commit, "sketch": sketch_s,
                  "close": t_closed - t_close}
        common = {**seen, "draw_s": float(state["draw_s"]), "brush_calls": dict(state.get("calls") or {}),
                  "phases": phases, **meter}
        if state["errors"]:
            return RenderResult("error", js_errors=list(state["errors"]), **common), state
        if kind == "record" and not state.get("capture"):  # nothing captured: the report carries the log
            return RenderResult("ok", **common), state
        if not state["png"]:
            why = state.get("capture") or "the sketch created no canvas"
            return RenderResult("error", js_errors=[f"no capture: {why}"[:MAX_CHARS]], detail=why, **common), None
        t0 = time.monotonic()
        try:
            png = _decode_png(state["png"], state.get("canvas"))
        except ValueError as exc:  # the harness's own capture is wrong: never score it
            return RenderResult("error", js_errors=[f"capture refused: {exc}"[:MAX_CHARS]], **common), None
        fraction = paint_fraction(png)
        phases["decode"] = time.monotonic() - t0
        return RenderResult("ok", png=png, paint_fraction=fraction, **common), state

    def _dispose(self, page: SketchPage | None) -> None:
        """Close a page's context; this also kills a page stuck in a loop. If even that fails the
        browser is relaunched so that the next render starts clean."""
        if page is None:
            return
        try:
            page.close()
        except PlaywrightError:
            try:
                self._relaunch()
            except PlaywrightError:
                pass  # the next attempt reports infra


def _crashed(result: RenderResult) -> bool:
    """Whether an ``infra`` result is a crash of the page's renderer process, on the sketch's page
    or on the replay page (whose details start ``replay: ``): its program is the sketch's log."""
    return result.detail.removeprefix("replay: ").startswith(_CRASH)


def _calls(logged: dict[str, int], counted: dict[str, int]) -> dict[str, int]:
    """Brush calls of a replayed render: the log's, and for each method at least the record page's
    count, which has the calls that threw as p5.brush does (the direct path counts them too, and
    the whitelist judges them)."""
    out = dict(logged)
    for name, n in counted.items():
        if isinstance(n, int) and n > out.get(name, 0):
            out[name] = n
    return out


PNG_DATA_URL = "data:image/png;base64,"


def _decode_png(url: str, canvas: list | None) -> bytes:
    """The PNG bytes of the harness's capture, checked against the canvas it reported.

    Args:
        url: the data URL ``toDataURL('image/png')`` returned.
        canvas: ``[width, height]`` of the canvas element it was read from, pixels.

    Raises:
        ValueError: not a PNG data URL, not a PNG, or its IHDR size is not the canvas's (the
            picture did not come from that canvas).
    """
    from brushrl.gate.runtime import png_size

    if not isinstance(url, str) or not url.startswith(PNG_DATA_URL):
        raise ValueError("the capture is not a PNG data URL")
    png = base64.b64decode(url[len(PNG_DATA_URL):], validate=True)
    size = png_size(png)
    if not canvas or tuple(canvas) != size:
        raise ValueError(f"the PNG is {size[0]}x{size[1]} but the canvas it came from is {canvas}")
    return png
