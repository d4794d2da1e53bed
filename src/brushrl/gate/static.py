"""The static gate: judge a sketch's code before it is rendered.

The code is parsed with tree-sitter and judged by what it does, not by what words appear in it:
comments are never read, string contents only for URLs and prototype-chain member names, and each
identifier is resolved through the sketch's own scopes (:mod:`brushrl.gate.scope`) before it is
judged as a global (:mod:`brushrl.gate.policy`). Every problem found becomes a :class:`Finding`;
the verdict is the finding whose reason code ranks first in
:data:`brushrl.gate.reasons.STATIC_PRIORITY` (ties: earliest in the code).

Values are typed (:mod:`brushrl.gate.values`) and members judged by the kind of value they are
read from, so obfuscation is closed by construction rather than by pattern:

* what a p5 call returns is a p5 object: its members are judged like globals
  (``translate().text`` is ``text_label``) and it may not escape into a place the gate cannot
  follow (an element, a return, the sketch's own function), so no other value can be one;
* ``this`` that can be the global object (outside a class, an ES5 constructor only used with
  ``new``, or a method only ever called on its ``const`` object literal) is judged like the global of the member's name (``this.fetch`` is ``fetch``) and
  refused as a bare value;
* a member name computed at run time is refused unless the key is a number or the object is a
  plain object the sketch built (``palette[key]``); constant keys (``o["con" + "structor"]``) are
  judged by their value;
* any reference to a global-object name (``window``, ``globalThis``, ``self``, ...) fails;
  ``.constructor``/``__proto__``/``getPrototypeOf`` fail on any value; ``brush`` may only be used
  as ``brush.name``; aliasing a global (``const f = fetch``) fails because the reference itself is
  judged; ``with`` fails; p5 entry points must be plain functions.

Shadowing: a name the sketch declares is the sketch's own wherever that declaration is in scope
(a ``const text = ...`` helper inside ``draw`` may be called there). At the top level such names
collide with p5's globals and fail as ``name_collision`` anyway; ``brush`` may not be declared at
any depth. Line numbers in details are 1-based lines of the extracted code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from brushrl.config import GateConfig
from brushrl.gate import policy as P
from brushrl.gate import reasons as R
from brushrl.gate.extract import find_sketch, js_parser
from brushrl.gate.names import JsNames, load_js_names
from brushrl.gate.scope import ScopeTree, build_scopes, ident_name
from brushrl.gate.kinds import Kind
from brushrl.gate.values import ValueKinds, function_uses_this
from brushrl.types import PASS, GateVerdict

#: Deepest syntax tree the gate analyses (tree-sitter levels; the fixture sketches reach 14).
MAX_DEPTH = 300
_OPEN = {"{", "(", "[", "${"}
_CLOSE = {"}", ")", "]"}
#: Expressions that produce a value of their own kind (checked for a P5 value that escapes); the
#: propagating ones (parentheses, ``a || b``, ``await``) are followed by ``ValueKinds.escapes``.
_VALUE_ORIGINS = frozenset(
    {"call_expression", "identifier", "member_expression", "subscript_expression"}
)
_WHY = {
    R.EXTERNAL_ACCESS: "reaches outside the sketch",
    R.TEXT_LABEL: "draws or styles text",
    R.PIXEL_ACCESS: "touches pixels or the canvas behind p5",
    R.BARE_PRIMITIVES: "is a p5 shape; paint with brush.* instead",
    R.WRONG_CANVAS_SIZE: "changes the canvas size",
    R.DISALLOWED_GLOBAL: "is not an allowed p5/JS global",
}


@dataclass(frozen=True)
class Finding:
    """One broken rule: reason code, 1-based line and column in the code, and what was seen."""

    code: str
    line: int
    column: int
    message: str

    @property
    def rank(self) -> tuple[int, int, int]:
        return (R.priority(self.code), self.line, self.column)

    def detail(self) -> str:
        return f"line {self.line}: {self.message}"


def _snippet(node: Node, limit: int = 60) -> str:
    text = " ".join(node.text.decode(errors="replace").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\r\n|[\s\S])")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def _unescape(raw: str) -> str:
    """Decode JavaScript string escapes (``\\x63``, ``\\u0063``, ``\\u{63}``, ``\\n``, ...)."""

    def one(match: re.Match) -> str:
        body = match.group(1)
        if body[0] == "u" and len(body) > 1:
            return chr(int(body[2:-1] if body[1] == "{" else body[1:], 16))
        if body[0] == "x" and len(body) == 3:
            return chr(int(body[1:], 16))
        if body in ("\n", "\r\n", "\r", "\u2028", "\u2029"):
            return ""  # line continuation
        return _SIMPLE_ESCAPES.get(body, body)

    return _ESCAPE.sub(one, raw)


def const_string(node: Node | None) -> str | None:
    """The value of a string-constant expression: a literal, a template without substitutions, or
    a ``+`` chain of those (and number literals); None for anything else."""
    if node is None:
        return None
    kind = node.type
    if kind in ("string", "template_string"):
        if any(c.type == "template_substitution" for c in node.children):
            return None
        raw = node.text.decode(errors="replace")[1:-1]
        return _unescape(raw)
    if kind == "parenthesized_expression" and node.named_child_count == 1:
        return const_string(node.named_children[0])
    if kind == "binary_expression" and _operator(node) == "+":
        operands = _plus_operands(node)
        values = [const_string(op) for op in operands]
        if all(v is None for v in values):
            return None
        for i, op in enumerate(operands):
            if values[i] is None and op.type == "number":
                values[i] = op.text.decode()
        return "".join(values) if all(v is not None for v in values) else None  # type: ignore[arg-type]
    if kind == "call_expression":  # ["con", "structor"].join("")
        fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if fn is None or fn.type != "member_expression" or args is None:
            return None
        prop, array = fn.child_by_field_name("property"), fn.child_by_field_name("object")
        if prop is None or ident_name(prop) != "join" or array is None or array.type != "array":
            return None
        parts = [const_string(e) for e in array.named_children if e.type != "comment"]
        seps = [const_string(a) for a in args.named_children if a.type != "comment"]
        if any(p is None for p in parts) or len(seps) > 1 or any(sep is None for sep in seps):
            return None
        return (seps[0] if seps else ",").join(parts)  # type: ignore[arg-type]
    return None


def _plus_operands(node: Node) -> list[Node]:
    """The operands of an ``a + b + c`` chain, left to right, without recursion."""
    out: list[Node] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        if cur.type == "binary_expression" and _operator(cur) == "+":
            left, right = cur.child_by_field_name("left"), cur.child_by_field_name("right")
            stack.extend(n for n in (right, left) if n is not None)
        else:
            out.append(cur)
    return out


def _operator(node: Node) -> str:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else ""


class StaticAnalyzer:
    """Collects the :class:`Finding` s of one parsed sketch. Use :func:`check_static`."""

    def __init__(self, code: str, cfg: GateConfig, canvas_size: int, names: JsNames | None = None,
                 replay: bool = False):
        self.code = code
        self.cfg = cfg
        self.canvas_size = canvas_size
        self.replay = replay
        """``render.mode: replay``: leave out the checks that only guarded the sketch's own
        captured canvas (``direct``): docs/gate.md rows 12, 21 (capitalised built-ins), 31
        (``data:``) and 34."""
        self.brush_as_value = False  # replay: `brush` aliased or indexed, so its calls are not counted here
        self.names = names or load_js_names()
        self.tree = js_parser().parse(code.encode())
        self.root = self.tree.root_node
        self.findings: list[Finding] = []
        self.scopes: ScopeTree | None = None
        self.values: ValueKinds | None = None
        self.canvas_calls: list[Node] = []
        self.painting_calls = 0

    # -- plumbing -------------------------------------------------------------------------------

    def add(self, code: str, node: Node, message: str) -> None:
        row, col = node.start_point
        self.findings.append(Finding(code, row + 1, col + 1, message))

    def _is_global(self, ident: Node) -> bool:
        assert self.scopes is not None
        return self.scopes.resolve(ident) is None

    def _is_global_named(self, node: Node | None, name: str) -> bool:
        return (
            node is not None
            and node.type == "identifier"
            and ident_name(node) == name
            and self._is_global(node)
        )

    # -- entry ----------------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        """Analyse the code; returns every finding (possibly empty)."""
        if self._syntax():
            return self.findings
        self.scopes = build_scopes(self.root)
        self._implicit_globals()
        self.values = ValueKinds(self.root, self.scopes, self.names)
        for node in _walk(self.root):
            self._visit(node)
        self._collisions()
        self._entry_points()
        self._canvas()
        if self.painting_calls == 0 and not self.brush_as_value:  # an alias's calls: the runtime gate counts them
            self.add(
                R.NO_PAINTING_CALLS,
                self.root,
                "no brush painting call (brush.endShape, brush.circle, ...)",
            )
        return self.findings

    # -- syntax ---------------------------------------------------------------------------------

    def _syntax(self) -> bool:
        """Record truncated/syntax_error findings; True when the tree is not runnable (or nests
        deeper than ``MAX_DEPTH``, which no sketch needs and which would make analysis slow)."""
        problems: list[Node] = []
        stack = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                self.add(R.SYNTAX_ERROR, node, f"nesting deeper than {MAX_DEPTH} syntax levels")
                return True
            stack.extend((child, depth + 1) for child in node.children)
        for node in _walk(self.root):
            if node.is_error or node.is_missing:
                problems.append(node)
            elif node.type == "arguments" and _has_hole(node):
                # tree-sitter-javascript accepts `f(a, , b)`; V8 throws a SyntaxError (sampled
                # sketches wrote `brush.vertex(314, , 313)`).
                self.add(R.SYNTAX_ERROR, node, f"`{_snippet(node)}`: an empty argument")
            elif node.type.startswith("jsx_") or node.type == "export_statement":
                what = "JSX" if node.type.startswith("jsx_") else "module `export`"
                self.add(
                    R.SYNTAX_ERROR,
                    node,
                    f"`{_snippet(node)}`: {what} is not valid in a classic script",
                )
        if not problems:
            return bool(self.findings)
        end = len(self.code.rstrip().encode())
        at_eof = any(n.end_byte >= end for n in problems)
        depth = 0
        for leaf in _walk(self.root):
            if leaf.child_count == 0 and not leaf.is_missing:
                depth += (leaf.type in _OPEN) - (leaf.type in _CLOSE)
        missing_at_eof = any(n.is_missing and n.start_byte >= end for n in problems)
        if at_eof and (depth > 0 or missing_at_eof or _unclosed_literal_at_eof(problems, end)):
            open_what = (
                f"{depth} bracket(s) still open"
                if depth > 0
                else "a string, comment or statement left open"
            )
            last_line = self.code.rstrip().count("\n") + 1
            self.findings.append(
                Finding(
                    R.TRUNCATED,
                    last_line,
                    1,
                    f"the code stops mid-construct: {open_what} at its end",
                )
            )
        else:
            first = min(problems, key=lambda n: n.start_byte)
            what = (
                f"missing `{first.type}`"
                if first.is_missing
                else f"cannot parse `{_snippet(first, 40)}`"
            )
            self.add(R.SYNTAX_ERROR, first, what)
        return True

    # -- pre-pass -------------------------------------------------------------------------------

    def _implicit_globals(self) -> None:
        """Sloppy-mode ``name = value`` on an undeclared, unknown name declares it on window."""
        assert self.scopes is not None
        for node in _walk(self.root):
            target = None
            if node.type == "assignment_expression":
                target = node.child_by_field_name("left")
            elif node.type == "for_in_statement" and node.child_by_field_name("kind") is None:
                target = node.child_by_field_name("left")
            if target is None or target.type != "identifier" or not self._is_global(target):
                continue
            name = ident_name(target)
            known = name in self.names.p5_globals or name in self.names.ecmascript_globals
            if (
                known
                or name in P.RESERVED_TOP_LEVEL
                or P.classify_global(name, self.names) != R.DISALLOWED_GLOBAL
            ):
                continue
            self.scopes.add_implicit_global(target)

    # -- per node -------------------------------------------------------------------------------

    def _visit(self, node: Node) -> None:
        assert self.scopes is not None and self.values is not None
        kind = node.type
        if kind in ("identifier", "shorthand_property_identifier"):
            if not self.scopes.is_declaration(node) and self._is_global(node):
                self._global_reference(node)
        elif kind == "this":
            self._this(node)
        elif kind == "member_expression":
            prop = node.child_by_field_name("property")
            if prop is not None and prop.type == "property_identifier":
                self._member(self.values.kind(node.child_by_field_name("object")), ident_name(prop), prop, node)
        elif kind == "subscript_expression":
            self._subscript(node)
        elif kind == "shorthand_property_identifier_pattern":
            self._member(self._pattern_kind(node.parent), ident_name(node), node, node.parent or node)
        elif kind == "pair_pattern":
            key = node.child_by_field_name("key")
            name = self._key_name(key)
            if key is not None and name is not None:
                self._member(self._pattern_kind(node.parent), name, key, node)
            elif key is not None and key.type == "computed_property_name":
                self.add(R.EXTERNAL_ACCESS, key, f"`{_snippet(node)}`: member name built at run time")
        elif kind == "pair":
            if self._key_name(node.child_by_field_name("key")) == "__proto__":
                self.add(R.EXTERNAL_ACCESS, node, f"`{_snippet(node)}` sets the prototype")
        elif kind == "string":
            self._string_constant(node, const_string(node))
        elif kind == "template_string":
            value = const_string(node)
            if value is not None:
                self._string_constant(node, value)
            else:  # with substitutions: judge the literal parts
                for part in node.named_children:
                    if part.type == "string_fragment":
                        self._string_constant(node, _unescape(part.text.decode(errors="replace")))
        elif kind == "binary_expression" and _operator(node) == "+":
            parent = node.parent
            if not (
                parent is not None
                and parent.type == "binary_expression"
                and _operator(parent) == "+"
            ):
                value = const_string(node)
                if value is not None:
                    self._string_constant(node, value)
        elif kind == "with_statement":
            self.add(R.EXTERNAL_ACCESS, node, "`with` hides which names the code reaches")
        elif kind == "import_statement":
            self.add(R.EXTERNAL_ACCESS, node, f"`{_snippet(node)}` imports code")
        elif kind in ("assignment_expression", "augmented_assignment_expression"):
            self._assignment(node, node.child_by_field_name("left"))
        elif kind == "update_expression":
            self._assignment(node, node.child_by_field_name("argument"))
        if kind == "call_expression":
            self._call(node)
            folded = const_string(node)
            if folded is not None:
                self._string_constant(node, folded)
        if (
            kind in _VALUE_ORIGINS
            and not self.scopes.is_declaration(node)
            and self.values.kind(node) is Kind.P5
            and self.values.escapes(node)
            and not self.values.from_refused_call(node)
        ):
            self.add(
                R.PIXEL_ACCESS,
                node,
                f"`{_snippet(node)}` is a p5 object (the instance or its renderer) used where the "
                "gate cannot follow it; use it in place or pass it to p5/brush only",
            )

    def _pattern_kind(self, pattern: Node | None) -> Kind:
        """The kind of the value an object/array pattern destructures (its members' receiver)."""
        assert self.values is not None
        cur = pattern
        nested = False  # the pattern destructures a member of the source, not the source itself
        while cur is not None:
            parent = cur.parent
            if parent is None:
                return Kind.OTHER
            if parent.type == "variable_declarator" and _same(parent.child_by_field_name("name"), cur):
                source = self.values.kind(parent.child_by_field_name("value"))
                break
            if parent.type == "assignment_expression" and _same(parent.child_by_field_name("left"), cur):
                source = self.values.kind(parent.child_by_field_name("right"))
                break
            if parent.type == "formal_parameters":
                fn = parent.parent
                source = Kind.P5 if fn is not None and self.values.library_function(fn) else Kind.OTHER
                break
            if parent.type in ("pair_pattern", "array_pattern", "rest_pattern"):
                nested = True
            elif parent.type not in ("object_pattern", "assignment_pattern", "object_assignment_pattern"):
                return Kind.OTHER  # for-in/of heads, catch clauses: elements of something
            cur = parent
        else:
            return Kind.OTHER
        if nested:
            return Kind.P5 if source is Kind.P5 else Kind.OTHER
        return source

    def _key_name(self, key: Node | None) -> str | None:
        """The member name an object-literal or pattern key spells, or None when computed."""
        if key is None:
            return None
        if key.type in ("property_identifier", "shorthand_property_identifier"):
            return ident_name(key)
        if key.type == "computed_property_name":
            inner = key.named_children[0] if key.named_children else None
            return const_string(inner)
        return const_string(key) if key.type in ("string", "number") else None

    def _global_reference(self, ident: Node) -> None:
        name = ident_name(ident)
        parent = ident.parent
        is_callee = (
            parent is not None
            and parent.type == "call_expression"
            and _same(parent.child_by_field_name("function"), ident)
        )
        shown = f"{name}(...)" if is_callee else name
        if name == "brush":
            self._brush(ident, parent)
            return
        if name == "createCanvas":
            if is_callee:
                self.canvas_calls.append(parent)
                holder = parent.parent
                if holder is not None and holder.type == "await_expression":
                    holder = holder.parent
                if holder is None or holder.type != "expression_statement":
                    self.add(
                        R.PIXEL_ACCESS,
                        parent,
                        f"`{_snippet(parent)}` keeps the renderer createCanvas returns",
                    )
            else:
                self.add(R.NOT_WEBGL, ident, "createCanvas used as a value instead of called")
            return
        if name == "pixelDensity" and is_callee and self._density_one(parent):
            return  # pixelDensity(1) is what the harness sets anyway; pixelDensity() reads it
        if name in ("setTimeout", "setInterval"):
            if not (is_callee and self._callback_arg(parent)):
                self.add(
                    R.EXTERNAL_ACCESS,
                    ident,
                    f"`{shown}` without a function argument can evaluate a string",
                )
            return
        code = P.classify_global(name, self.names)
        if code is None or (self.replay and code == R.DISALLOWED_GLOBAL and name in P.REPLAY_ECMASCRIPT_GLOBALS):
            return
        why = _WHY[code]
        if code == R.DISALLOWED_GLOBAL:
            if name in self.names.p5_globals:
                why = "is a p5 global outside the gate's allowlist"
                if name in self.names.brush_exports:
                    why += f" (p5's own {name}; did you mean brush.{name}?)"
            elif name in self.names.ecmascript_globals:
                why = "is an ECMAScript global outside the gate's allowlist"
            else:
                why = "is not declared by the sketch nor an allowed global"
        self.add(code, ident, f"`{shown}` {why}")

    def _brush(self, ident: Node, parent: Node | None) -> None:
        if (
            parent is not None
            and parent.type == "member_expression"
            and _same(parent.child_by_field_name("object"), ident)
        ):
            prop = parent.child_by_field_name("property")
            if prop is None or prop.type != "property_identifier":
                self.add(
                    R.UNKNOWN_BRUSH_METHOD, parent, f"`{_snippet(parent)}` is not a brush method"
                )
                return
            method = ident_name(prop)
            if method not in self.names.brush_exports:
                self.add(
                    R.UNKNOWN_BRUSH_METHOD,
                    parent,
                    f"`brush.{method}` is not exported by p5.brush {self.names.p5_brush_version}",
                )
            elif self.cfg.enforce_whitelist and method not in self.cfg.whitelist:
                self.add(R.NOT_WHITELISTED, parent, f"`brush.{method}` is not in gate.whitelist")
            call = parent.parent
            if (
                call is not None
                and call.type == "call_expression"
                and _same(call.child_by_field_name("function"), parent)
            ):
                if method in P.BRUSH_PAINTING_METHODS:
                    self.painting_calls += 1
            return
        if self.replay:
            # The record page's `brush` is a frozen object of recording stubs: an alias or an index
            # reaches the same stubs, and the runtime gate checks the methods in the validated log.
            self.brush_as_value = True
            return
        if (
            parent is not None
            and parent.type == "subscript_expression"
            and _same(parent.child_by_field_name("object"), ident)
        ):
            self.add(
                R.UNKNOWN_BRUSH_METHOD,
                parent,
                f"`{_snippet(parent)}`: computed access hides which brush method is used",
            )
            return
        self.add(
            R.UNKNOWN_BRUSH_METHOD,
            ident,
            "`brush` used as a value; call its methods as brush.name(...)",
        )

    @staticmethod
    def _density_one(call: Node) -> bool:
        args = call.child_by_field_name("arguments")
        values = [a for a in args.named_children if a.type != "comment"] if args is not None else []
        return not values or (len(values) == 1 and values[0].type == "number" and _number(values[0]) == 1.0)

    def _callback_arg(self, call: Node) -> bool:
        args = call.child_by_field_name("arguments")
        first = (
            next((a for a in args.named_children if a.type != "comment"), None)
            if args is not None
            else None
        )
        if first is None:
            return False
        if first.type in ("arrow_function", "function_expression", "function"):
            return True
        if first.type == "identifier":
            assert self.scopes is not None
            binding = self.scopes.resolve(first)
            if binding is None:
                return False
            # A parameter: a string passed in would be an eval, which the page's CSP refuses (no
            # unsafe-eval), and with render.mode replay nothing the page does is scored.
            if binding.kind in ("function", "param") or _promise_executor_param(binding):
                return True
            value = binding.decl.child_by_field_name("value") if binding.kind == "const" else None
            return value is not None and value.type in (
                "arrow_function",
                "function_expression",
                "function",
            )
        return False

    def _this(self, node: Node) -> None:
        assert self.values is not None
        parent = node.parent
        used_in_place = parent is not None and parent.type in (
            "member_expression",
            "subscript_expression",
        ) and _same(parent.child_by_field_name("object"), node)
        if self.values.kind(node) is Kind.WINDOW and not used_in_place:
            self.add(
                R.EXTERNAL_ACCESS,
                node,
                "`this` outside a class (or an ES5 constructor used only with `new`) can be the "
                "global object; use it only as this.name",
            )

    def _member(self, kind: Kind, name: str, where: Node, construct: Node) -> None:
        """Judge reading member ``name`` of a value of ``kind``."""
        if kind is Kind.BRUSH:
            return  # judged with the brush reference (_brush)
        code = P.classify_member(name, kind, self.names)
        if code is not None:
            self.add(code, where, f"`{_snippet(construct)}` reads `{name}` of {kind.value}")

    def _subscript(self, node: Node) -> None:
        assert self.values is not None
        index = node.child_by_field_name("index")
        obj = node.child_by_field_name("object")
        if index is None:
            return
        key = const_string(index)
        kind = self.values.kind(obj)
        if key is not None:
            self._member(kind, key, index, node)
        elif kind is Kind.BRUSH:
            return  # judged with the brush reference (_brush)
        elif self.values.is_numeric(index) and kind is not Kind.WINDOW:
            return  # an index: a number never spells a member's name
        elif kind is Kind.OTHER:
            # A value of no known kind (a parameter, a call's result): `arr[k]` in a helper. The
            # values a sketch can hold are the ones this gate lets through (window, `this` and p5
            # objects cannot be passed on), and with render.mode replay what the sketch's page
            # reaches is never scored (brushrl.render.calllog): the gate is the pre-filter there.
            return
        elif kind is not Kind.OWN:
            self.add(
                R.EXTERNAL_ACCESS,
                index,
                f"`{_snippet(node)}`: member name computed at run time on {kind.value} "
                "(only the sketch's own objects and arrays may be indexed by a computed key)",
            )

    def _string_constant(self, node: Node, value: str | None) -> None:
        if value is None:
            return
        if (P.URL_IN_STRING_REPLAY if self.replay else P.URL_IN_STRING).search(value):
            self.add(
                R.EXTERNAL_ACCESS, node, f"string `{_snippet(node, 40)}` holds a URL or data: URI"
            )
        elif value in P.EXTERNAL_PROPS:
            self.add(R.EXTERNAL_ACCESS, node, f"string `{_snippet(node, 40)}` names `{value}`")

    def _call(self, node: Node) -> None:
        assert self.values is not None and self.scopes is not None
        fn = node.child_by_field_name("function")
        if fn is not None and fn.type == "import":
            self.add(R.EXTERNAL_ACCESS, node, f"`{_snippet(node)}` imports code")
        if self.replay or not self.values.library_call(node):
            return  # replay: the record page's stubs call no argument (docs/gate.md, row 34)
        args = node.child_by_field_name("arguments")
        for arg in args.named_children if args is not None else []:
            target = arg
            if arg.type == "identifier":
                binding = self.scopes.resolve(arg)
                target = binding.decl if binding is not None and binding.kind == "function" else None
            if target is not None and target.type in (
                "function_expression", "function", "function_declaration"
            ) and function_uses_this(target):
                self.add(
                    R.EXTERNAL_ACCESS,
                    arg,
                    f"`{_snippet(arg)}` uses `this` and is handed to p5/brush, which may call it "
                    "with `this` set to one of its own objects; pass an arrow function",
                )

    def _assignment(self, node: Node, target: Node | None) -> None:
        if target is None:
            return
        if target.type == "identifier" and self._is_global(target):
            name = ident_name(target)
            if name in self.names.p5_globals or name in P.RESERVED_TOP_LEVEL:
                self.add(
                    R.NAME_COLLISION, node, f"`{_snippet(node)}` overwrites the global `{name}`"
                )
        elif target.type in ("member_expression", "subscript_expression"):
            obj = target.child_by_field_name("object")
            prop = target.child_by_field_name("property")
            if self._is_global_named(obj, "brush"):
                self.add(R.NAME_COLLISION, node, f"`{_snippet(node)}` overwrites part of brush")
            elif (
                prop is not None
                and prop.type == "property_identifier"
                and self.values is not None
                and self.values.kind(obj) is Kind.WINDOW
                and ident_name(prop) in self.names.p5_globals
            ):  # this.width = 3 may be window.width = 3
                self.add(
                    R.NAME_COLLISION,
                    node,
                    f"`{_snippet(node)}` may overwrite the global `{ident_name(prop)}`",
                )

    # -- whole-sketch rules ---------------------------------------------------------------------

    def _collisions(self) -> None:
        assert self.scopes is not None
        for binding in self.scopes.top_level.values():
            name = binding.name
            if name in P.P5_ENTRY_POINTS:
                continue
            if name in self.names.p5_globals:
                if binding.kind in ("function", "var", "implicit"):
                    why = f"p5 cannot bind its own `{name}` on window and start-up fails"
                else:
                    why = f"shadows p5's `{name}` for the whole sketch"
                self.add(
                    R.NAME_COLLISION,
                    binding.node,
                    f"top-level {binding.kind} `{name}` clashes with a p5 global: {why}",
                )
            elif name in P.RESERVED_TOP_LEVEL:
                self.add(
                    R.NAME_COLLISION,
                    binding.node,
                    f"top-level {binding.kind} `{name}` replaces a browser/library global",
                )
            elif name in self.names.browser_globals and binding.kind in (
                "function",
                "var",
                "implicit",
            ):
                # a var on an existing window property keeps the browser's value until assigned
                # (and read-only ones stay the browser's), so `var fetch; fetch(...)` would escape
                why = "a top-level var/function is the browser's window property of that name"
                self.add(
                    R.NAME_COLLISION, binding.node, f"top-level {binding.kind} `{name}`: {why}"
                )
        for scope in self.scopes.scopes.values():
            brush = scope.get("brush")
            if brush is not None and brush.scope.id != self.root.id:
                self.add(
                    R.NAME_COLLISION, brush.node, "a local `brush` shadows the p5.brush global"
                )

    def _entry_points(self) -> None:
        """``setup`` must exist, and every p5 entry point the sketch puts on window (a top-level
        function or var, or an implicit global) must be a plain function it wrote: p5 calls it
        with ``this`` = window, so a method or a value from elsewhere would run with window."""
        assert self.scopes is not None and self.values is not None
        if "setup" not in self.scopes.top_level:
            self.add(R.MISSING_SETUP, self.root, "no top-level `function setup()`")
        for name in sorted(P.P5_ENTRY_POINTS & set(self.scopes.top_level)):
            binding = self.scopes.top_level[name]
            code = R.MISSING_SETUP if name == "setup" else R.EXTERNAL_ACCESS
            decl = binding.decl
            if binding.kind == "function":
                if decl.type != "function_declaration":
                    self.add(code, decl, f"`{name}` is a generator; p5 would not run its body")
                    continue
                values = []
            elif binding.kind in ("var", "implicit"):
                values = [decl.child_by_field_name("value" if binding.kind == "var" else "right")]
            else:
                if name == "setup":
                    self.add(code, binding.node,
                             f"`{binding.kind} setup` does not create window.setup, so p5 never calls it")
                continue  # a let/const/class is not on window: p5 does not see it
            values += [v for _, v in self.values.writes(binding)]
            for i, value in enumerate(values):
                if value is None and binding.kind == "var" and i == 0:
                    continue  # `var draw;` alone: no function yet
                if value is None or not _plain_function(value, self.scopes):
                    self.add(code, value or decl,
                             f"`{name}` is not assigned a function the sketch wrote (p5 calls it "
                             "with this = window)")
                    break

    def _canvas(self) -> None:
        if not self.canvas_calls:
            self.add(
                R.NOT_WEBGL,
                self.root,
                "no createCanvas(w, h, WEBGL) call (p5 would make a 2D canvas)",
            )
            return
        for call in self.canvas_calls:
            args_node = call.child_by_field_name("arguments")
            args = (
                [a for a in args_node.named_children if a.type != "comment"]
                if args_node is not None
                else []
            )
            if (
                any(a.type == "spread_element" for a in args)
                or len(args) < 3
                or not self._is_global_named(args[2], "WEBGL")
            ):
                self.add(
                    R.NOT_WEBGL,
                    call,
                    f"`{_snippet(call)}` does not pass WEBGL as the third argument",
                )
                continue
            for arg in args[:2]:
                if arg.type != "number" or _number(arg) != float(self.canvas_size):
                    self.add(
                        R.WRONG_CANVAS_SIZE,
                        call,
                        f"`{_snippet(call)}`: the size must be the literals "
                        f"{self.canvas_size}, {self.canvas_size}",
                    )
                    break


def _plain_function(value: Node, scopes: ScopeTree) -> bool:
    """A function or arrow expression (not a generator), or the name of a sketch function
    declaration."""
    if value.type in ("function_expression", "arrow_function", "function"):
        return True
    if value.type == "identifier":
        binding = scopes.resolve(value)
        return binding is not None and binding.kind == "function" and binding.decl.type == "function_declaration"
    return False


def _promise_executor_param(binding) -> bool:
    """Whether ``binding`` is the ``resolve`` or ``reject`` parameter of a function passed as the
    executor of ``new Promise(...)``: functions V8 makes (``await new Promise(r => setTimeout(r,
    ms))``), never a string."""
    fn = binding.scope
    if binding.kind != "param" or fn.type not in ("arrow_function", "function_expression", "function"):
        return False
    params = fn.child_by_field_name("parameters")
    names = [p for p in params.named_children if p.type != "comment"] if params is not None else []
    single = fn.child_by_field_name("parameter")
    if single is not None:
        names = [single]
    if not any(_same(binding.node, p) for p in names[:2]):
        return False
    args = fn.parent
    new = args.parent if args is not None and args.type == "arguments" else None
    if new is None or new.type != "new_expression" or not _same(args.named_children[0], fn):
        return False
    ctor = new.child_by_field_name("constructor")
    return ctor is not None and ctor.type == "identifier" and ident_name(ctor) == "Promise"


def _number(node: Node) -> float | None:
    text = node.text.decode().replace("_", "")
    try:
        if text[:2].lower() in ("0x", "0o", "0b"):
            return float(int(text, 0))
        return float(text.rstrip("n"))
    except ValueError:
        return None


def _same(a: Node | None, b: Node | None) -> bool:
    return a is not None and b is not None and a.id == b.id


def _walk(root: Node):
    """Pre-order traversal of every node (named or not)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _unclosed_literal_at_eof(problems: list[Node], end: int) -> bool:
    """An ERROR reaching the end that starts a string, template or comment left open."""
    for node in problems:
        if node.is_error and node.end_byte >= end:
            for leaf in _walk(node):
                if leaf.child_count == 0 and leaf.type in ('"', "'", "`", "/*"):
                    return True
    return False


def judge(findings: list[Finding]) -> GateVerdict:
    """The static verdict for a list of findings: pass, or the highest-priority one."""
    if not findings:
        return GateVerdict(PASS, "", "static")
    first = min(findings, key=lambda f: f.rank)
    return GateVerdict(first.code, first.detail(), "static")


def check_static(reply: str, cfg: GateConfig, canvas_size: int, *, replay: bool = False
                 ) -> tuple[str | None, GateVerdict]:
    """Run the static gate on a policy reply.

    Args:
        reply: the completion text (Markdown with a fenced sketch, or bare code).
        cfg: gate settings (brush whitelist and whether it is enforced).
        canvas_size: the side in pixels that createCanvas must ask for.
        replay: the sketch renders with ``render.mode: replay`` (pass
            ``cfg.render.mode == "replay"``): the checks that only guarded a captured sketch canvas
            are left out (docs/gate.md, "Left out under replay"). False, the default, runs
            every check, as ``render.mode: direct`` needs.

    Returns:
        ``(code, verdict)``: the extracted sketch (None when there is none) and a
        ``GateVerdict(stage="static")`` whose verdict is ``"pass"`` or the first failing reason
        code in :data:`brushrl.gate.reasons.STATIC_PRIORITY`, with a detail naming the line and
        the construct.
    """
    code = find_sketch(reply).code
    if code is None or not code.strip():
        return code, GateVerdict(R.NO_SKETCH, "no ```js block and no setup in the reply", "static")
    return code, check_code(code, cfg, canvas_size, replay=replay)


def check_code(code: str, cfg: GateConfig, canvas_size: int, *, replay: bool = False) -> GateVerdict:
    """The static verdict for already-extracted sketch code (a ``.js`` file).

    See :func:`check_static`; an empty ``code`` is ``no_sketch_in_response``.
    """
    if not code.strip():
        return GateVerdict(R.NO_SKETCH, "empty sketch", "static")
    try:
        findings = StaticAnalyzer(code, cfg, canvas_size, replay=replay).run()
    except RecursionError:  # pathological nesting: fail closed rather than crash the reward actor
        return GateVerdict(R.SYNTAX_ERROR, "line 1: nesting too deep to analyse", "static")
    return judge(findings)


def findings_for(code: str, cfg: GateConfig, canvas_size: int, *, replay: bool = False) -> list[Finding]:
    """Every finding for already-extracted code, in priority order (for tools and tests)."""
    return sorted(StaticAnalyzer(code, cfg, canvas_size, replay=replay).run(), key=lambda f: f.rank)


def _has_hole(arguments: Node) -> bool:
    """Whether an ``arguments`` node has an empty slot (``f(, a)`` or ``f(a, , b)``); a single
    trailing comma (``f(a,)``) is valid JavaScript and not a hole."""
    previous = None
    for child in arguments.children:
        if child.type == "," and previous in ("(", ","):
            return True
        previous = child.type
    return False
