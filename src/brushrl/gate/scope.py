"""Lexical scopes of a tree-sitter JavaScript tree: which identifiers the sketch declares itself.

The gate judges a name by what it refers to, so a sketch's own ``const textColour`` or a helper
``function petal()`` nested in ``draw`` is the sketch's business, while an undeclared ``text`` is
p5's. Rules (ES2015+ semantics, erring towards "global" where JavaScript is ambiguous):

* ``var`` and parameters bind in the nearest function (or the program);
* ``let``/``const``/``class`` bind in the nearest block (``for`` heads and ``catch`` clauses
  included);
* a function declaration binds in the block it appears in. Sloppy-mode Annex B would also hoist a
  block's function to the enclosing function; the gate does not, so a reference outside that block
  is judged as a global (never the other way round);
* a named function or class expression binds its name inside itself;
* ``arguments`` is local inside any non-arrow function;
* an assignment to an undeclared name that is not a known global (``petals = []`` in sloppy mode)
  creates an implicit top-level binding (see :meth:`ScopeTree.add_implicit_global`).

Nodes are identified by tree-sitter's ``Node.id``, stable within one tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

#: Nodes that own ``var`` bindings and parameters.
FUNCTION_NODES = frozenset(
    {
        "program",
        "function_declaration",
        "function_expression",
        "generator_function_declaration",
        "generator_function",
        "arrow_function",
        "method_definition",
        "class_static_block",
    }
)
#: Nodes that own ``let``/``const``/``class``/function-declaration bindings.
BLOCK_NODES = frozenset(
    {
        "program",
        "statement_block",
        "for_statement",
        "for_in_statement",
        "switch_body",
        "catch_clause",
        "class_body",
    }
)
_DECLARED_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration"})


_UNICODE_ESCAPE = re.compile(r"\\u(?:\{([0-9a-fA-F]+)\}|([0-9a-fA-F]{4}))")


def ident_name(node: Node) -> str:
    """The name an identifier-like node spells, with ``\\uXXXX``/``\\u{X}`` escapes decoded
    (``\\u0066etch`` is ``fetch`` to JavaScript, so it must be to the gate)."""
    text = node.text.decode(errors="replace")
    if "\\" not in text:
        return text
    return _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


@dataclass
class Binding:
    """One declared name.

    Attributes:
        name: the identifier.
        kind: ``var``, ``let``, ``const``, ``function``, ``class``, ``param``, ``catch``,
            ``import`` or ``implicit`` (sloppy-mode assignment to an undeclared name).
        node: the identifier node that declares it (for ``implicit``, the assigned identifier).
        scope: the node whose scope holds it (``program`` for top-level names).
        decl: the declaring construct (e.g. a ``function_declaration`` or ``variable_declarator``).
    """

    name: str
    kind: str
    node: Node
    scope: Node
    decl: Node


@dataclass
class ScopeTree:
    """Bindings per scope node of one parsed program; build with :func:`build_scopes`."""

    root: Node
    scopes: dict[int, dict[str, Binding]] = field(default_factory=dict)
    declaring_ids: set[int] = field(default_factory=set)

    def bindings(self, scope: Node) -> dict[str, Binding]:
        """Bindings held directly by ``scope`` (empty when it holds none)."""
        return self.scopes.get(scope.id, {})

    @property
    def top_level(self) -> dict[str, Binding]:
        """Bindings of the program scope (the sketch's top-level names)."""
        return self.bindings(self.root)

    def is_declaration(self, ident: Node) -> bool:
        """True when ``ident`` is the name in a declaration, not a reference."""
        return ident.id in self.declaring_ids

    def resolve(self, ident: Node) -> Binding | None:
        """The binding an identifier reference refers to, or None for a global.

        ``arguments`` inside a non-arrow function resolves to a synthetic ``param`` binding.
        """
        name = ident_name(ident)
        node = ident.parent
        while node is not None:
            binding = self.scopes.get(node.id, {}).get(name)
            if binding is not None:
                return binding
            if (
                name == "arguments"
                and node.type in FUNCTION_NODES
                and node.type not in ("arrow_function", "program")
            ):
                return Binding(name, "param", ident, node, node)
            node = node.parent
        return None

    def add_implicit_global(self, ident: Node) -> Binding:
        """Record ``name = ...`` on an undeclared name as a top-level ``implicit`` binding."""
        binding = Binding(ident_name(ident), "implicit", ident, self.root, ident.parent)
        self.scopes.setdefault(self.root.id, {}).setdefault(binding.name, binding)
        return self.top_level[binding.name]

    # -- construction ---------------------------------------------------------------------------

    def _declare(self, scope: Node, ident: Node, kind: str, decl: Node) -> None:
        name = ident_name(ident)
        self.declaring_ids.add(ident.id)
        self.scopes.setdefault(scope.id, {}).setdefault(
            name, Binding(name, kind, ident, scope, decl)
        )

    def _declare_pattern(self, scope: Node, pattern: Node | None, kind: str, decl: Node) -> None:
        """Declare every name bound by a binding pattern (identifier, object/array/rest/default)."""
        if pattern is None:
            return
        kind_of = pattern.type
        if kind_of in ("identifier", "shorthand_property_identifier_pattern"):
            self._declare(scope, pattern, kind, decl)
        elif kind_of == "object_pattern" or kind_of == "array_pattern":
            for child in pattern.named_children:
                self._declare_pattern(scope, child, kind, decl)
        elif kind_of == "pair_pattern":
            self._declare_pattern(scope, pattern.child_by_field_name("value"), kind, decl)
        elif kind_of in ("assignment_pattern", "object_assignment_pattern"):
            self._declare_pattern(scope, pattern.child_by_field_name("left"), kind, decl)
        elif kind_of == "rest_pattern":
            for child in pattern.named_children:
                self._declare_pattern(scope, child, kind, decl)


def _nearest(node: Node, types: frozenset[str]) -> Node:
    cur = node.parent
    while cur is not None and cur.type not in types:
        cur = cur.parent
    assert cur is not None, "every node lives under program"
    return cur


def build_scopes(root: Node) -> ScopeTree:
    """Walk a tree-sitter ``program`` and record every declaration in its scope."""
    tree = ScopeTree(root)
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        kind = node.type
        if kind in _DECLARED_FUNCTIONS:
            name = node.child_by_field_name("name")
            if name is not None:
                tree._declare(_nearest(node, BLOCK_NODES), name, "function", node)
            _declare_params(tree, node)
        elif kind in ("function_expression", "generator_function"):
            name = node.child_by_field_name("name")
            if name is not None:
                tree._declare(node, name, "function", node)
            _declare_params(tree, node)
        elif kind in ("arrow_function", "method_definition"):
            _declare_params(tree, node)
        elif kind in ("class_declaration", "class"):
            name = node.child_by_field_name("name")
            if name is not None:
                body = node.child_by_field_name("body")
                if kind == "class_declaration":
                    tree._declare(_nearest(node, BLOCK_NODES), name, "class", node)
                if body is not None:  # the class name is also visible inside the class
                    tree._declare(body, name, "class", node)
        elif kind == "variable_declaration":  # var
            scope = _nearest(node, FUNCTION_NODES)
            for decl in node.named_children:
                if decl.type == "variable_declarator":
                    tree._declare_pattern(scope, decl.child_by_field_name("name"), "var", decl)
        elif kind == "lexical_declaration":  # let / const
            word = node.child_by_field_name("kind")
            let_or_const = word.text.decode() if word is not None else "let"
            scope = _nearest(node, BLOCK_NODES)
            for decl in node.named_children:
                if decl.type == "variable_declarator":
                    tree._declare_pattern(
                        scope, decl.child_by_field_name("name"), let_or_const, decl
                    )
        elif kind == "for_in_statement":
            word = node.child_by_field_name("kind")
            if word is not None:
                text = word.text.decode()
                scope = _nearest(node, FUNCTION_NODES) if text == "var" else node
                tree._declare_pattern(scope, node.child_by_field_name("left"), text, node)
        elif kind == "catch_clause":
            tree._declare_pattern(node, node.child_by_field_name("parameter"), "catch", node)
        elif kind == "import_statement":
            for ident in _descendants(node, "identifier"):
                tree._declare(root, ident, "import", node)
    return tree


def _declare_params(tree: ScopeTree, fn: Node) -> None:
    single = fn.child_by_field_name("parameter")  # arrow function `x => ...`
    if single is not None:
        tree._declare_pattern(fn, single, "param", fn)
    params = fn.child_by_field_name("parameters")
    if params is not None:
        for param in params.named_children:
            tree._declare_pattern(fn, param, "param", fn)


def _descendants(node: Node, node_type: str) -> list[Node]:
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if cur.type == node_type:
            out.append(cur)
        stack.extend(cur.children)
    return out
