"""One sketch page: a fresh browser context + page, loaded up to the sketch, then given one sketch.

A ``SketchPage`` is opened before its sketch is known: the document (``brushrl.render.harness.
page_html``) runs the harness, p5 and p5.brush, and then its parser waits on two scripts,
``START_PATH`` and ``SKETCH_PATH``, whose requests the page's route holds. ``deliver(code, seed)``
answers them, so the harness re-seeds and the sketch runs. This lets a ``Renderer`` keep a *spare*
page that loads the libraries while the previous sketch draws (their load was about 0.35 s of a
hibiscus render, the new context and page another 0.3 s; docs/perf/render.md).

Everything the page does is collected here: the harness's reports (``events``), what was refused
(``refused``: routes, CSP blocks, dialogs, popups, downloads, navigations), console lines, a crash.
One page, one sketch: after ``deliver`` neither script is served again (a sketch that adds
``<script src="/sketch.js">`` gets a refused route).
"""

from __future__ import annotations

import json
import secrets
import time
from urllib.parse import urlsplit

from playwright.sync_api import Error as PlaywrightError

from brushrl.render.harness import MAX_REPORT_CHARS, ORIGIN, SKETCH_PATH, START_PATH, csp, page_html, sketch_js, start_js

MAX_CONSOLE, MAX_CHARS, MAX_REFUSED = 20, 300, 50

#: DevTools issues (``Audits.issueAdded``) that say the page was stopped doing something, by code,
#: with the word its refusal starts with.
BLOCKING_ISSUES = {
    "ContentSecurityPolicyIssue": "csp issue",
    "BlockedByResponseIssue": "blocked response",
    "MixedContentIssue": "mixed content",
    "CorsIssue": "cors",
    "SharedArrayBufferIssue": "shared array buffer",
}


def _line(location) -> str:
    """`` at sketch.js:LINE`` for a DevTools source location (0-based line) in a script, else ''."""
    if not isinstance(location, dict) or not location.get("url"):
        return ""
    name = str(location["url"]).rsplit("/", 1)[-1]
    line = location.get("lineNumber")
    return f" at {name}:{int(line) + 1}" if isinstance(line, int) else f" in {name}"


class SketchPage:
    """A browser context with one page on the harness document, waiting for its sketch.

    Args:
        browser: a connected Playwright ``Browser``.
        assets: ``{path: bytes}`` the origin serves besides the document (the two libraries).
        size: viewport side, pixels.
        timeout_ms: how long the navigation may take to commit.
        kind: ``direct`` (the sketch paints, its canvas is captured), ``record`` (the sketch runs,
            its calls are logged), ``replay`` (``deliver`` takes ``calllog.replay_program``) or
            ``bare`` (benchmarks only: the sketch without the harness).

    Raises:
        playwright.sync_api.Error: the context or page cannot be made (the browser is gone), or the
            navigation did not commit in ``timeout_ms`` (``TimeoutError``); the context is closed.
    """

    def __init__(self, browser, assets: dict[str, bytes], size: int, timeout_ms: float, kind: str = "direct"):
        self.size = size
        self.kind = kind
        """One of ``brushrl.render.harness.PAGE_KINDS``."""
        self.opened = time.monotonic()
        """When the page was opened (monotonic seconds): a spare's age."""
        self.events: list[dict] = []
        """The harness's reports in arrival order, each with ``_t`` (monotonic arrival seconds)."""
        self.refused: list[str] = []
        self.console: list[str] = []
        self.crashed = False
        self.left: str | None = None
        """The URL the main frame navigated to, away from the harness (the harness is gone)."""
        self._assets = assets
        self._held: dict[str, object] = {}  # START_PATH / SKETCH_PATH requests waiting for deliver
        self._scripts: dict[str, bytes] | None = None  # their bodies, once delivered
        self._closing = False  # set by close(): what the page does while it goes is not the sketch's
        self._cdp = None
        self._world: int | None = None  # the execution context the harness reports from
        nonce = secrets.token_urlsafe(18)
        binding = "__brushrl_report_" + secrets.token_hex(8)
        self._binding = binding  # the report channel's name (_channel, _report)
        self._doc = page_html(nonce, binding, kind).encode()
        self._headers = {"Content-Security-Policy": csp(nonce), "Cache-Control": "no-store"}
        self.context = browser.new_context(
            viewport={"width": size, "height": size}, device_scale_factor=1, service_workers="block",
            accept_downloads=False,
        )
        try:
            self.context.route("**/*", self._route)
            self.page = self.context.new_page()
            self.context.on("page", self._popup)  # registered after our own page: every later one is a popup
            self.page.on("console", self._console)
            self.page.on("crash", lambda _: setattr(self, "crashed", True))
            self.page.on("dialog", self._dialog)
            self.page.on("download", lambda d: self.refuse(f"download {d.url}"))
            self.page.on("framenavigated", self._navigated)
            self._channel(binding)
            if kind in ("direct", "record"):  # pages that run sketch code
                self._watch()
            self.page.goto(ORIGIN + "/", wait_until="commit", timeout=timeout_ms)
        except BaseException:
            self.close()
            raise

    # -- the sketch ----------------------------------------------------------------------------------
    def deliver(self, code: str, seed: int) -> None:
        """Give the page its sketch: the harness re-seeds ``Math.random`` (and p5.brush's PRNGs from
        it) with ``seed`` (uint32), then ``code`` runs. Held requests are answered now, later ones
        when they come. Raises ``RuntimeError`` on a second call."""
        if self._scripts is not None:
            raise RuntimeError("a SketchPage renders one sketch")
        body = code if self.kind == "replay" else sketch_js(code)  # a replay page gets calllog.replay_program
        start = start_js(seed) + ("window.__brushrl_bare();\n" if self.kind == "bare" else "")
        self._scripts = {START_PATH: start.encode(), SKETCH_PATH: body.encode()}
        for path in (START_PATH, SKETCH_PATH):
            if path in self._held:
                self._serve(self._held.pop(path), path)

    def done(self) -> dict | None:
        """The harness's final report (``{"phase": "done", ...}``), or None before it."""
        return next((e for e in self.events if e.get("phase") == "done"), None)

    def forbidden(self) -> dict[str, int]:
        """What the harness refused, name -> calls: the done report's counts, and names pushed
        before it (a render that never finishes still has them)."""
        counts = {str(e.get("name"))[:MAX_CHARS]: 1 for e in self.events if e.get("phase") == "forbidden"}
        for name, n in ((self.done() or {}).get("forbidden") or {}).items():
            counts[str(name)[:MAX_CHARS]] = int(n)
        return dict(list(counts.items())[:MAX_REFUSED])

    def refuse(self, what: str) -> None:
        """Record one refused action (the first ``MAX_REFUSED``, ``MAX_CHARS`` each)."""
        if len(self.refused) < MAX_REFUSED:
            self.refused.append(what[:MAX_CHARS])

    def close(self) -> None:
        """Close the context; this also kills a page stuck in a loop. Raises Playwright's error if
        even that fails (the caller relaunches the browser)."""
        self._closing = True
        self.context.close()

    # -- what the page asks for and does ---------------------------------------------------------------
    def _watch(self) -> None:
        """Catch what the sketch attempted even when it failed quietly (a ``try/catch`` around a
        blocked ``fetch``, a ``Function`` built at run time, a socket or worker the CSP refused): the
        page's websockets, workers and failed requests through Playwright, and over a DevTools
        session of the driver's own, out of the sketch's reach, the page's Content-Security-Policy
        and blocked-request issues (``Audits.issueAdded``, with the sketch's line where Chromium
        knows it) and every navigation a frame asks for (``Page.frameRequestedNavigation``). Each is
        a refusal (``refused``): the runtime gate fails the sketch with ``sandbox_violation``."""
        self.page.on("websocket", lambda ws: self.refuse(f"websocket {ws.url}"))
        self.page.on("worker", lambda w: self.refuse(f"worker {w.url}"))
        self.page.on("requestfailed", self._request_failed)
        cdp = self._cdp
        cdp.on("Audits.issueAdded", self._issue)
        for event in ("Page.frameRequestedNavigation", "Page.frameScheduledNavigation"):
            cdp.on(event, self._navigation_requested)
        cdp.send("Page.enable")
        cdp.send("Audits.enable")

    def _channel(self, binding: str) -> None:
        """The harness's report channel, out of the sketch's reach: a DevTools binding of the
        driver's own session (``Runtime.addBinding``), a native function that takes one string and
        that the harness takes off ``window`` before any other script runs. Unlike Playwright's
        ``expose_binding`` it puts no controller object in the page for the sketch to call or
        shadow, and what arrives is a string, bounded (``MAX_REPORT_CHARS``) before it is parsed.
        The first report comes from the harness (before the sketch runs) and pins its execution
        context; a report from any other context is refused (``_report``)."""
        cdp = self.context.new_cdp_session(self.page)
        self._cdp = cdp
        cdp.on("Runtime.bindingCalled", self._report)
        cdp.send("Runtime.enable")  # Chromium sends bindingCalled only to a session with Runtime on
        cdp.send("Runtime.addBinding", {"name": binding})

    def _report(self, params: dict) -> None:
        """One report: a JSON object from the harness (``harness.js`` / ``replay.js``), kept in
        ``events``; anything else (too long, not JSON, too deep, not an object, from another
        execution context) is a refusal, never parsed further."""
        if (params or {}).get("name") != self._binding or self._closing:
            return
        world, payload = params.get("executionContextId"), params.get("payload")
        if self._world is None:
            self._world = world
        if world != self._world:
            self.refuse(f"a report from another execution context ({world})")
            return
        if not isinstance(payload, str) or len(payload) > MAX_REPORT_CHARS:
            self.refuse(f"a report of {len(payload) if isinstance(payload, str) else '?'} characters "
                        f"(cap {MAX_REPORT_CHARS})")
            return
        try:
            event = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            self.refuse(f"a malformed report: {str(exc)[:80]}")
            return
        if not isinstance(event, dict):
            self.refuse("a report that is not an object")
            return
        self.events.append({**event, "_t": time.monotonic()})

    def _request_failed(self, request) -> None:
        if self._closing:
            return
        url = request.url
        if url.startswith("data:") or request.failure == "net::ERR_BLOCKED_BY_CLIENT":
            return  # a data URL never leaves the page; the route's own abort is refused already
        self.refuse(f"request {request.method} {url} failed: {request.failure or '?'}")

    def _issue(self, params: dict) -> None:
        if self._closing:
            return
        issue = (params or {}).get("issue") or {}
        code = str(issue.get("code", ""))
        if code not in BLOCKING_ISSUES:
            return
        details = next(iter((issue.get("details") or {}).values()), None) or {}
        target = (details.get("blockedURL") or (details.get("request") or {}).get("url")
                  or details.get("violatedDirective") or "")
        kind = details.get("contentSecurityPolicyViolationType") or details.get("reason") or ""
        if kind == "kEvalViolation":
            target = "a string run as code (eval, Function, a string timer)"
        directive = details.get("violatedDirective") or ""
        self.refuse(f"{BLOCKING_ISSUES[code]} {directive} {kind} {target}{_line(details.get('sourceCodeLocation'))}"
                    .replace("  ", " "))

    def _navigation_requested(self, params: dict) -> None:
        if self._closing:
            return
        url = str((params or {}).get("url", ""))
        if url != ORIGIN + "/":
            self.refuse(f"navigation requested {url} ({(params or {}).get('reason', '?')})")

    def _route(self, route) -> None:
        url = route.request.url
        path = urlsplit(url).path if url.startswith(ORIGIN + "/") else None
        if path == "/":
            route.fulfill(body=self._doc, headers={**self._headers, "Content-Type": "text/html; charset=utf-8"})
        elif path in self._assets:
            route.fulfill(body=self._assets[path], headers={**self._headers, "Content-Type": "text/javascript"})
        elif path in (START_PATH, SKETCH_PATH) and path not in self._held and not self._served(path):
            if self._scripts is None:
                self._held[path] = route  # the parser waits here until deliver()
            else:
                self._serve(route, path)
        else:
            self.refuse(f"route {route.request.method} {url}")
            route.abort("blockedbyclient")

    def _served(self, path: str) -> bool:
        return self._scripts is not None and path not in self._scripts

    def _serve(self, route, path: str) -> None:
        body = self._scripts.pop(path)
        try:
            route.fulfill(body=body, headers={**self._headers, "Content-Type": "text/javascript"})
        except PlaywrightError:  # the page is gone (crashed, closed): the render loop sees why
            pass

    def _console(self, msg) -> None:
        # Chromium reports every CSP block (fetch, image, eval, ...) as a console error.
        if "Content Security Policy" in msg.text:
            self.refuse(f"csp {msg.text}")
        if len(self.console) < MAX_CONSOLE and "GL Driver Message" not in msg.text:  # ANGLE perf notes
            self.console.append(f"{msg.type}: {msg.text}"[:MAX_CHARS])

    def _dialog(self, dialog) -> None:
        self.refuse(f"dialog {dialog.type}: {dialog.message}")
        try:
            dialog.dismiss()
        except PlaywrightError:
            pass

    def _popup(self, popup) -> None:
        self.refuse(f"popup {popup.url}")
        try:
            popup.close()
        except PlaywrightError:
            pass

    def _navigated(self, frame) -> None:
        if frame.parent_frame is None and frame.url != ORIGIN + "/" and self.left is None:
            self.left = frame.url
            self.refuse(f"navigation {frame.url}")
