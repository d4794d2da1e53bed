"""Names taken from the installed browser libraries and browser, committed as data files.

* ``data/js_names.json`` (made by node running ``data/dump_js_names.cjs``): p5.brush's exports,
  the names p5 binds onto ``window`` in global mode, and the ECMAScript globals V8 defines in a
  fresh context. node evaluates ``p5/lib/p5.js`` and ``p5.brush/dist/p5.brush.js`` from
  ``js/node_modules`` in a bare ``vm`` context and lists what they define.
* ``data/browser_globals.json`` (made with Playwright and the renderer's Chromium): every property
  name on ``window`` and its prototype chain in ``about:blank``.

The gate needs neither node nor Chromium at run time; the tests regenerate both tables and check
the committed files still match what is installed. Regenerate after upgrading p5, p5.brush or
Chromium::

    python -m brushrl.gate.make_names --write            # both files
    python -m brushrl.gate.make_names --write --only js  # node only
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).with_name("data")
NAMES_FILE = DATA_DIR / "js_names.json"
BROWSER_FILE = DATA_DIR / "browser_globals.json"
DUMP_SCRIPT = DATA_DIR / "dump_js_names.cjs"
#: ``js/node_modules`` of the repository (the renderer loads the same files).
DEFAULT_JS_ROOT = Path(__file__).resolve().parents[3] / "js" / "node_modules"
DEFAULT_CHROMIUM = "/usr/bin/chromium"

_WINDOW_NAMES_JS = """() => {
  const names = new Set();
  for (let o = window; o; o = Object.getPrototypeOf(o))
    for (const n of Object.getOwnPropertyNames(o)) names.add(n);
  return [...names].sort();
}"""


@dataclass(frozen=True)
class JsNames:
    """Names the gate checks sketches against.

    Attributes:
        p5_version: version of the p5 package the names came from (e.g. ``"2.3.4"``).
        p5_brush_version: version of the p5.brush package (e.g. ``"2.2.2"``).
        brush_exports: every property of the ``brush`` global (methods and classes).
        p5_globals: every name p5 binds onto ``window`` in global mode.
        ecmascript_globals: the language's own globals (``Math``, ``Array``, ``eval``, ...).
        browser_globals: names on ``window`` that are not ECMAScript globals (``fetch``,
            ``document``, ``name``, ``requestAnimationFrame``, ...).
        chromium_version: the browser ``browser_globals`` came from.
    """

    p5_version: str
    p5_brush_version: str
    brush_exports: frozenset[str]
    p5_globals: frozenset[str]
    ecmascript_globals: frozenset[str]
    browser_globals: frozenset[str]
    chromium_version: str


def dump_js_names(js_root: str | Path = DEFAULT_JS_ROOT, timeout_s: float = 60.0) -> dict:
    """Run the node dump script against ``js_root`` (a ``node_modules`` folder); its JSON as a dict.

    Raises:
        RuntimeError: node is not on PATH, or the script failed.
    """
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH; it is needed to read the p5/p5.brush name tables")
    proc = subprocess.run(
        [node, str(DUMP_SCRIPT), str(js_root)], capture_output=True, text=True, timeout=timeout_s
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{DUMP_SCRIPT.name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def dump_browser_globals(chromium_path: str = DEFAULT_CHROMIUM) -> dict:
    """``{"chromium_version": str, "names": [...]}``: every property name on ``window`` and its
    prototype chain in a blank page of headless Chromium (launched through Playwright).

    Raises:
        playwright.sync_api.Error: Chromium cannot be launched.
    """
    from playwright.sync_api import sync_playwright  # only needed to regenerate the table

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=["--no-sandbox"]
        )
        try:
            names = browser.new_page().evaluate(_WINDOW_NAMES_JS)
            return {"chromium_version": browser.version, "names": names}
        finally:
            browser.close()


@lru_cache(maxsize=1)
def load_js_names() -> JsNames:
    """The committed name tables (cached).

    Raises:
        FileNotFoundError: a data file is missing from the installed package.
    """
    data = json.loads(NAMES_FILE.read_text())
    browser = json.loads(BROWSER_FILE.read_text())
    ecmascript = frozenset(data["ecmascript_globals"])
    return JsNames(
        p5_version=data["p5_version"],
        p5_brush_version=data["p5_brush_version"],
        brush_exports=frozenset(data["brush_exports"]),
        p5_globals=frozenset(data["p5_globals"]),
        ecmascript_globals=ecmascript,
        browser_globals=frozenset(browser["names"]) - ecmascript,
        chromium_version=browser["chromium_version"],
    )
