"""The layer order of docs/architecture.md, enforced on every import of ``src/brushrl``.

An AST walk, not import-linter: it must see what a run sees, so imports inside functions,
``if TYPE_CHECKING:`` blocks and module names passed as strings (``importlib.import_module``,
the CLIs' command tables, PEP 562 ``__getattr__`` tables) all count as arrows. A unit is a
top-level module (``config.py``) or package (``gate/``) of brushrl. The walk fails when an arrow
runs up :data:`FLOORS`, when files form a circle, or when units do.

``python tests/test_layers.py`` prints the counts docs/architecture.md quotes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "brushrl"

#: The floors from the ground up (docs/architecture.md). A unit may import its own floor's other
#: units only where listed in :data:`SIDEWAYS`; anything on a lower floor freely.
FLOORS: list[set[str]] = [
    {"__init__", "config", "types", "stats", "vision"},
    {"corpus", "hub", "ray_setup"},
    {"prompts"},
    {"conversation"},
    {"gate"},
    {"render"},
    {"pool"},
    {"reward"},
    {"policy", "artifacts"},
    {"learner"},
    {"rollout"},
    {"plan"},
    {"orchestrator", "perf"},
    {"rehearse", "bench_cli", "gate_cli", "pool_cli"},
    {"cli"},
]

#: Arrows between two units of one floor that are allowed (none today: a floor's units are peers).
SIDEWAYS: set[tuple[str, str]] = set()

#: The only units that may import ``plan`` (issue 37: the plan is a front-door concern).
PLAN_IMPORTERS = {"plan", "cli", "orchestrator", "rehearse"}

_MODULE_NAME = re.compile(r"brushrl(\.[A-Za-z_]\w*)+")


def module_files() -> dict[str, Path]:
    """``brushrl.x.y`` -> its file, for every module of the package."""
    out = {}
    for path in SRC.rglob("*.py"):
        parts = ("brushrl",) + path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a brushrl module (``brushrl.a.b.attr`` -> ``brushrl.a.b``)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def imported_names(path: Path, module: str) -> set[str]:
    """Every brushrl module name ``path`` imports, anywhere in it, or names as a whole string."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import name``: the module pkg.name where it is one, else pkg (:func:`_resolve`).
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            names.add(node.value)
    return {n for n in names if n == "brushrl" or n.startswith("brushrl.")}


def file_graph() -> dict[str, set[str]]:
    """module -> the brushrl modules it imports (itself excluded)."""
    modules = module_files()
    graph = {}
    for mod, path in modules.items():
        targets = {_resolve(n, modules) for n in imported_names(path, mod)}
        graph[mod] = {t for t in targets if t and t != mod}
    return graph


def unit(module: str) -> str:
    """The top-level unit of a module: ``brushrl.gate.static`` -> ``gate``; ``brushrl`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        out.setdefault(unit(src), set()).update(unit(t) for t in targets if unit(t) != unit(src))
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def floor_of(name: str) -> int:
    for i, units in enumerate(FLOORS):
        if name in units:
            return i
    raise AssertionError(f"brushrl unit {name!r} has no floor in tests/test_layers.py FLOORS (docs/architecture.md)")


def up_arrows(units: dict[str, set[str]]) -> list[str]:
    """Arrows that run up the floors, or sideways without a :data:`SIDEWAYS` entry."""
    bad = []
    for src, targets in sorted(units.items()):
        for dst in sorted(targets):
            if floor_of(dst) > floor_of(src) or (floor_of(dst) == floor_of(src) and (src, dst) not in SIDEWAYS):
                bad.append(f"{src} (floor {floor_of(src)}) -> {dst} (floor {floor_of(dst)})")
    return bad


def counts() -> dict[str, int]:
    graph = file_graph()
    units = unit_graph(graph)
    return {"unit arrows": sum(len(t) for t in units.values()),
            "up arrows": len(up_arrows(units)),
            "file circles": len(circles(graph)),
            "files in circles": sum(len(c) for c in circles(graph)),
            "unit circles": len(circles(units)),
            "units in circles": sum(len(c) for c in circles(units))}


def test_every_unit_has_a_floor():
    for name in unit_graph(file_graph()):
        floor_of(name)


def test_no_import_runs_up_the_floors():
    assert up_arrows(unit_graph(file_graph())) == []


def test_no_circle_between_files():
    assert circles(file_graph()) == []


def test_no_circle_between_units():
    assert circles(unit_graph(file_graph())) == []


def test_config_and_types_import_no_stage():
    units = unit_graph(file_graph())
    ground = FLOORS[0]
    for name in ("config", "types"):
        assert units.get(name, set()) <= ground, f"{name}.py imports {sorted(units[name] - ground)}"


def test_plan_is_imported_only_by_the_front_door():
    importers = {src for src, targets in unit_graph(file_graph()).items() if "plan" in targets}
    assert importers <= PLAN_IMPORTERS, sorted(importers - PLAN_IMPORTERS)


def test_the_walk_sees_lazy_and_string_imports(tmp_path):
    """The walk counts what the tests above rely on: in-function, TYPE_CHECKING and by-name imports."""
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from brushrl.plan import x\n"
                 "def f():\n    from ..render import y\n    importlib.import_module('brushrl.cli')\n")
    assert imported_names(f, "brushrl.gate.m") == {"brushrl.plan.x", "brushrl.render.y", "brushrl.cli"}


if __name__ == "__main__":
    g = file_graph()
    u = unit_graph(g)
    for k, v in counts().items():
        print(f"{k}: {v}")
    for c in circles(g):
        print("file circle:", " ".join(c))
    for c in circles(u):
        print("unit circle:", " ".join(c))
    for a in up_arrows(u):
        print("up:", a)
