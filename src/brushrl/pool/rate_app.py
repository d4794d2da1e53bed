"""``brushrl pool rate POOL``: a local web page to rate a draft pool version (Starlette + uvicorn).

Routes (JSON unless said otherwise):

* ``GET /``: the page (``static/index.html``; its script and style are ``/static/app.js|css``).
* ``GET /api/state``: pool version, counts per tier, facet values (prompts, sources, rounds).
* ``GET /api/items?tier=&prompt=&source=&round=``: matching paintings (no code), manifest order.
* ``GET /api/code/{id}``: the sketch source of one painting (fetched on demand).
* ``GET /img/{id}``: its PNG (looked up by id: no path from the request reaches the disk).
* ``POST /api/rate`` ``{"id", "tier"}``: sets the tier (``unrated`` undoes). It answers only
  after ``PoolWriter.rate`` wrote the manifest atomically (fsync + ``os.replace`` under the pool
  lock), so a rating the page shows as saved survives a killed server; two tabs or two servers
  serialise on the lock.

Untrusted text (prompts, sources, code) reaches the page only as JSON and is inserted with
``textContent``; every response carries a CSP without inline script. Requests must name a local
host (``TrustedHostMiddleware``, against DNS rebinding) unless the server was bound elsewhere on
purpose, and ``POST`` must be ``application/json`` (a cross-site form cannot send it without a CORS
preflight, which this app never grants).
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from brushrl.pool.store import TIERS, PoolRow, PoolWriter, ReferencePool

STATIC = Path(__file__).with_name("static")
#: Content-Security-Policy of every response: scripts and styles only from this origin.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
LOCAL_HOSTS = ["127.0.0.1", "localhost", "[::1]"]


def _counts(rows: list[PoolRow]) -> dict[str, int]:
    return {t: sum(r.tier == t for r in rows) for t in TIERS}


def _item(r: PoolRow) -> dict:
    return {"id": r.id, "tier": r.tier, "prompt": r.prompt, "source": r.source, "round": r.round,
            "rated_by": r.rated_by, "parent_id": r.parent_id}


def create_app(pool_root: str | Path, rater: str, allowed_hosts: list[str] | None = None) -> Starlette:
    """The rating app for the draft pool at ``pool_root``; ratings are attributed to ``rater``.

    Raises:
        PoolError: the pool does not load or is published (immutable: rate a new version).
    """
    root = Path(pool_root)
    pool = ReferencePool(root)  # full validation once, images included
    writer = PoolWriter(root)
    version_id = pool.version_id

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def state(request: Request) -> Response:
        rows = await run_in_threadpool(writer.rows)
        return JSONResponse({
            "pool": {"version_id": version_id, "name": pool.meta.name, "version": pool.meta.version},
            "counts": _counts(rows), "total": len(rows), "rater": rater,
            "facets": {
                "prompts": sorted({r.prompt for r in rows}), "sources": sorted({r.source for r in rows}),
                "rounds": sorted({r.round for r in rows}),
            },
        })

    async def items(request: Request) -> Response:
        q = request.query_params
        rows = await run_in_threadpool(writer.rows)
        out = [
            _item(r) for r in rows
            if (not q.get("tier") or r.tier == q["tier"]) and (not q.get("prompt") or r.prompt == q["prompt"])
            and (not q.get("source") or r.source == q["source"])
            and (not q.get("round") or str(r.round) == q["round"])
        ]
        return JSONResponse({"items": out})

    async def row_or_404(entry_id: str) -> PoolRow | None:
        rows = await run_in_threadpool(writer.rows)
        return next((r for r in rows if r.id == entry_id), None)

    async def code(request: Request) -> Response:
        row = await row_or_404(request.path_params["id"])
        if row is None:
            return JSONResponse({"error": "no such id"}, status_code=404)
        return JSONResponse({"id": row.id, "code": row.code})

    async def image(request: Request) -> Response:
        row = await row_or_404(request.path_params["id"])
        if row is None:
            return JSONResponse({"error": "no such id"}, status_code=404)
        return FileResponse(root / row.png, media_type="image/png")

    async def rate(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "content-type must be application/json"}, status_code=415)
        try:
            body = await request.json()
            entry_id, tier = str(body["id"]), str(body["tier"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "body must be {\"id\": ..., \"tier\": ...}"}, status_code=400)
        if tier not in TIERS:
            return JSONResponse({"error": f"unknown tier {tier!r}"}, status_code=400)
        try:
            before = await run_in_threadpool(writer.rate, entry_id, tier, rater)
        except KeyError:
            return JSONResponse({"error": f"no such id {entry_id!r}"}, status_code=404)
        rows = await run_in_threadpool(writer.rows)
        return JSONResponse({"ok": True, "id": entry_id, "tier": tier, "previous": before.tier,
                             "counts": _counts(rows), "total": len(rows)})

    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        return response

    app = Starlette(
        routes=[
            Route("/", index), Route("/api/state", state), Route("/api/items", items),
            Route("/api/code/{id}", code), Route("/img/{id}", image), Route("/api/rate", rate, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOCAL_HOSTS),
            Middleware(BaseHTTPMiddleware, dispatch=security_headers),
        ],
    )
    return app


def serve(pool_root: str | Path, host: str = "127.0.0.1", port: int = 8765, rater: str = "anonymous") -> None:
    """Run the rating app with uvicorn until interrupted (blocks).

    A non-loopback ``host`` accepts any Host header (the page has no authentication: only do this
    on a trusted network).
    """
    import uvicorn

    local = host in ("127.0.0.1", "localhost", "::1")
    app = create_app(pool_root, rater, allowed_hosts=None if local else ["*"])
    uvicorn.run(app, host=host, port=port, log_level="warning")
