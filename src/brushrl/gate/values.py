"""What the static gate knows about the value of an expression: its :class:`Kind`.

The gate cannot run the sketch, so it types values coarsely, but soundly for what matters: which
values may be the global object or an object of p5 (the instance, its renderer, an event), because
members of those reach text, images, pixels, bare shapes, the DOM and the network.

* ``P5``: a value a p5 call returned that holds p5 itself (``translate()`` returns the renderer,
  ``shearX()`` the instance, see ``policy.P5_OBJECT_RETURNS``; any p5 call off the allowlist is
  assumed to), a member of such a value, a p5 event handler's parameter and what a brush call
  passes to a callback. Its members are judged like globals, and it must not *escape*: it may be
  used in place (``translate(1, 2).rotate(3)``), discarded, compared, bound to a ``const`` or
  passed to p5 or brush, nothing else (:meth:`ValueKinds.escapes`). So no other value can be one.
* ``WINDOW``: ``this`` where it can be the global object (sloppy functions, object-literal methods,
  the top level): ``this.name`` is judged like the global ``name``; bare ``this`` is refused. Not
  a method of a ``const`` object literal that can never be taken off it (``petal.draw()`` is its
  only use, ``this`` in it only ``this.name``: :meth:`ValueKinds._own_method`).
* ``BRUSH``: the p5.brush global (its own rules, in the static gate).
* ``OWN``: provably a plain object the sketch built: a literal, or ``new`` of the sketch's own
  function/class or an allowed built-in constructor, bound to a name every write of which is such
  a value. Only its members may be named by a key computed at run time.
* ``NAMESPACE``: an allowed ECMAScript global object (``Math``, ``Object``, ``JSON``, ...).
* ``FUNCTION``: a function or class the sketch declares (``F.prototype`` is allowed on it).
* ``OTHER``: anything else (parameters, returns, elements, p5 vectors and colours). Because P5
  values never escape and ``WINDOW`` is refused as a value, an ``OTHER`` value is the sketch's own
  data, a primitive, a p5 vector/colour or a built-in's result: its members need only the
  prototype-chain deny list.

Also: :meth:`ValueKinds.is_numeric` (a key that is a number cannot name a dangerous member).
"""

from __future__ import annotations

from tree_sitter import Node

from brushrl.gate import policy as P
from brushrl.gate.kinds import Kind
from brushrl.gate.names import JsNames
from brushrl.gate.scope import Binding, ScopeTree, ident_name


#: Nodes whose value is one of their children's (the child is found by :func:`_passes_through`).
_PROPAGATORS = frozenset(
    {"parenthesized_expression", "ternary_expression", "binary_expression", "await_expression",
     "sequence_expression"}
)
_LOGICAL = frozenset({"&&", "||", "??"})
#: Operators whose result is a number (or BigInt) whatever the operands: a computed key that is one
#: cannot spell a member name.
_NUMERIC_BINARY = frozenset({"-", "*", "/", "%", "**", "&", "|", "^", "<<", ">>", ">>>"})
_NUMERIC_ASSIGN = frozenset({"-=", "*=", "/=", "%=", "**=", "&=", "|=", "^=", "<<=", ">>=", ">>>="})
#: Operators whose result is a boolean: a P5 value used as their operand stays in place.
_TESTS = frozenset({"===", "!==", "==", "!=", "instanceof", "in", "<", ">", "<=", ">="})
_FUNCTION_VALUES = frozenset({"function_expression", "function", "arrow_function"})
_NON_ARROW = frozenset(
    {"function_declaration", "function_expression", "function", "generator_function_declaration",
     "generator_function", "method_definition"}
)


def _op(node: Node) -> str:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else ""


def _same(a: Node | None, b: Node | None) -> bool:
    return a is not None and b is not None and a.id == b.id


def _passes_through(parent: Node, child: Node) -> bool:
    """Whether ``parent``'s value can be ``child``'s value (so a P5 child makes a P5 parent)."""
    kind = parent.type
    if kind in ("parenthesized_expression", "await_expression"):
        return True
    if kind == "ternary_expression":
        return not _same(parent.child_by_field_name("condition"), child)
    if kind == "binary_expression":
        return _op(parent) in _LOGICAL
    if kind == "sequence_expression":
        return _same(parent.named_children[-1] if parent.named_children else None, child)
    return False


class ValueKinds:
    """Kinds of the expressions of one parsed sketch (memoised per node).

    Args:
        root: the ``program`` node.
        scopes: its scope tree (implicit globals already added).
        names: the p5 / p5.brush / browser name tables.
    """

    def __init__(self, root: Node, scopes: ScopeTree, names: JsNames):
        self.root = root
        self.scopes = scopes
        self.names = names
        self._memo: dict[int, Kind] = {}
        self._writes: dict[int, list[tuple[str, Node | None]]] = {}
        self._refs: dict[int, list[Node]] = {}
        self._numeric: dict[int, bool] = {}
        self._collect()

    # -- pre-pass -------------------------------------------------------------------------------

    def _collect(self) -> None:
        """Every write to and reference of each local binding (by the binding's node id)."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            target, op, value = None, "", None
            if node.type in ("assignment_expression", "augmented_assignment_expression"):
                target, value = node.child_by_field_name("left"), node.child_by_field_name("right")
                op = "=" if node.type == "assignment_expression" else _op(node)
            elif node.type == "update_expression":
                target, op = node.child_by_field_name("argument"), "++"
            elif node.type == "for_in_statement":
                target, op = node.child_by_field_name("left"), "in"
            if target is not None and target.type == "identifier":
                binding = self.scopes.resolve(target)
                if binding is not None:
                    self._writes.setdefault(binding.node.id, []).append((op, value))
            if node.type == "identifier" and not self.scopes.is_declaration(node):
                binding = self.scopes.resolve(node)
                if binding is not None:
                    self._refs.setdefault(binding.node.id, []).append(node)

    def writes(self, binding: Binding) -> list[tuple[str, Node | None]]:
        """``(operator, value)`` of every write to ``binding`` after its declaration (``=``,
        ``+=``, ..., ``++`` and ``in`` for a for-in/of head, whose value is None)."""
        return self._writes.get(binding.node.id, [])

    # -- kinds ----------------------------------------------------------------------------------

    def kind(self, node: Node | None) -> Kind:
        """The :class:`Kind` of an expression node (``OTHER`` for None and anything unknown)."""
        if node is None:
            return Kind.OTHER
        found = self._memo.get(node.id)
        if found is None:
            self._memo[node.id] = Kind.OTHER  # cycles (x = x.y) end as OTHER
            found = self._memo[node.id] = self._kind(node)
        return found

    def _kind(self, node: Node) -> Kind:
        kind = node.type
        if kind in _PROPAGATORS:
            kids = [c for c in node.named_children if c.type != "comment" and _passes_through(node, c)]
            kinds = [self.kind(c) for c in kids]
            if Kind.P5 in kinds:
                return Kind.P5
            return kinds[0] if len(kinds) == 1 else Kind.OTHER
        if kind == "identifier":
            return self._identifier(node)
        if kind == "this":
            return self.this_kind(node)
        if kind in ("object", "array"):
            return Kind.OWN
        if kind == "new_expression":
            ctor = self.kind(node.child_by_field_name("constructor"))
            return Kind.OWN if ctor in (Kind.FUNCTION, Kind.NAMESPACE) else Kind.OTHER
        if kind == "call_expression":
            return self._call(node)
        if kind in ("member_expression", "subscript_expression"):
            receiver = self.kind(node.child_by_field_name("object"))
            if receiver is Kind.P5:
                return Kind.P5
            prop = node.child_by_field_name("property")
            if receiver is Kind.WINDOW and prop is not None and prop.type == "property_identifier":
                return self._global(ident_name(prop))  # this.translate is window.translate
            return Kind.OTHER
        if kind == "assignment_expression":
            return self.kind(node.child_by_field_name("right"))
        return Kind.OTHER

    def _global(self, name: str) -> Kind:
        if name == "brush":
            return Kind.BRUSH
        if name in P.NAMESPACE_GLOBALS:
            return Kind.NAMESPACE
        return Kind.OTHER

    def _identifier(self, node: Node) -> Kind:
        binding = self.scopes.resolve(node)
        if binding is None:
            return self._global(ident_name(node))
        if binding.kind in ("function", "class"):
            return Kind.FUNCTION
        if binding.kind == "param":
            return Kind.P5 if self.library_function(binding.scope) else Kind.OTHER
        if binding.kind in ("const", "let", "var", "implicit"):
            return self._binding_value(binding)
        return Kind.OTHER

    def _binding_value(self, binding: Binding) -> Kind:
        """A variable's kind: its initialiser's, if every other write agrees (else OTHER)."""
        decl = binding.decl
        if decl.type != "variable_declarator" or not _same(decl.child_by_field_name("name"), binding.node):
            return Kind.OTHER  # destructured, for-in/of, implicit: an element of something
        first = self.kind(decl.child_by_field_name("value"))
        if binding.kind == "const" or first is Kind.P5:
            return first  # a P5 value may only be bound to a const: escapes() refuses the rest
        writes = self.writes(binding)
        if all(op == "=" and self.kind(value) is first for op, value in writes):
            return first
        return Kind.OTHER

    def _call(self, node: Node) -> Kind:
        fn = node.child_by_field_name("function")
        if fn is None:
            return Kind.OTHER
        if fn.type == "identifier" and self.scopes.resolve(fn) is None:
            name = ident_name(fn)
            return self._p5_call(name) if name in self.names.p5_globals else Kind.OTHER
        if fn.type == "member_expression":
            receiver = self.kind(fn.child_by_field_name("object"))
            prop = fn.child_by_field_name("property")
            name = ident_name(prop) if prop is not None else ""
            if receiver is Kind.P5:
                return Kind.P5  # "values returned by any p5 call are p5 objects"
            if receiver is Kind.WINDOW:
                return self._p5_call(name) if name in self.names.p5_globals else Kind.OTHER
        return Kind.OTHER

    @staticmethod
    def _p5_call(name: str) -> Kind:
        """Kind of what the p5 global ``name`` returns: P5 unless an allowed function known to
        return plain values (numbers, strings, vectors, colours, undefined)."""
        if name in P.ALLOWED_P5_GLOBALS and name not in P.P5_OBJECT_RETURNS:
            return Kind.OTHER
        return Kind.P5

    def library_function(self, fn: Node) -> bool:
        """Whether p5 or brush calls ``fn`` (so its parameters are p5's objects): a top-level p5
        entry point (``mousePressed(event)``), or a function passed to a p5 / brush call."""
        if fn.type in ("function_declaration", "function_expression", "function", "arrow_function"):
            name = fn.child_by_field_name("name")
            if fn.type == "function_declaration" and name is not None and fn.parent is not None \
                    and fn.parent.type == "program" and ident_name(name) in P.P5_ENTRY_POINTS:
                return True
            holder = fn.parent
            if holder is not None and holder.type == "variable_declarator" and holder.parent is not None \
                    and holder.parent.parent is not None and holder.parent.parent.type == "program":
                var = holder.child_by_field_name("name")
                if var is not None and ident_name(var) in P.P5_ENTRY_POINTS:
                    return True
            if holder is not None and holder.type == "arguments" and holder.parent is not None:
                return self.library_call(holder.parent)
        return False

    def library_call(self, call: Node) -> bool:
        """Whether ``call`` calls p5 or brush: a p5 global, a brush method or a member of a P5
        value (the library, not the sketch, then receives its arguments)."""
        if call.type != "call_expression":
            return False
        fn = call.child_by_field_name("function")
        if fn is None:
            return False
        if fn.type == "identifier":
            return self.scopes.resolve(fn) is None and ident_name(fn) in self.names.p5_globals
        if fn.type == "member_expression":
            return self.kind(fn.child_by_field_name("object")) in (Kind.BRUSH, Kind.P5, Kind.WINDOW)
        return False

    def from_refused_call(self, node: Node | None) -> bool:
        """Whether a P5 value comes from a p5 call the gate refuses anyway (``millis()``,
        ``createGraphics()``): that call's own finding names the problem, not its escape."""
        while node is not None:
            if node.type == "call_expression":
                fn = node.child_by_field_name("function")
                if fn is not None and fn.type == "identifier" and self.scopes.resolve(fn) is None:
                    return ident_name(fn) not in P.ALLOWED_P5_GLOBALS
                node = fn.child_by_field_name("object") if fn is not None and fn.type == "member_expression" else None
            elif node.type in ("member_expression", "subscript_expression"):
                node = node.child_by_field_name("object")
            elif node.type == "identifier":
                binding = self.scopes.resolve(node)
                if binding is None or binding.decl.type != "variable_declarator":
                    return False
                node = binding.decl.child_by_field_name("value")
            elif node.type in _PROPAGATORS:
                kids = [c for c in node.named_children if _passes_through(node, c) and self.kind(c) is Kind.P5]
                node = kids[0] if kids else None
            else:
                return False
        return False

    # -- this -----------------------------------------------------------------------------------

    def this_kind(self, node: Node) -> Kind:
        """``OTHER`` for ``this`` inside a class body or an ES5 constructor only ever called with
        ``new`` (strict mode, or a fresh object: never the global object); ``WINDOW`` elsewhere
        (a sloppy function, an object-literal method or the top level, all of which p5, a timer or
        an extracted method reference can call with ``this`` = window)."""
        cur = node.parent
        while cur is not None:
            if cur.type in ("class_static_block", "field_definition"):
                return Kind.OTHER
            if cur.type == "method_definition":
                in_class = cur.parent is not None and cur.parent.type == "class_body"
                return Kind.OTHER if in_class or self._own_method(cur) else Kind.WINDOW
            if cur.type == "function_declaration" and self._only_new(cur):
                return Kind.OTHER
            if cur.type in _NON_ARROW:
                return Kind.WINDOW
            cur = cur.parent
        return Kind.WINDOW

    def _own_method(self, method: Node) -> bool:
        """A plain shorthand method of an object literal that is a ``const``'s value
        (``const petal = { draw() { brush.fill(this.colour); } }``), where ``this`` is always
        that object: the object is only ever used as ``petal.name`` (never passed on, aliased,
        spread or indexed), each of its methods only called in place (``petal.draw()``, not
        ``petal.draw`` taken), and inside its methods ``this`` is only read as ``this.name``, a
        method again only called (``this.draw()``). Anything else can call the method with
        ``this`` = window."""
        obj = method.parent
        decl = obj.parent if obj is not None else None
        if obj is None or obj.type != "object" or decl is None or decl.type != "variable_declarator" \
                or not _same(decl.child_by_field_name("value"), obj):
            return False
        declaration = decl.parent
        if declaration is None or declaration.type != "lexical_declaration" or not any(
                c.type == "const" for c in declaration.children):
            return False
        name = decl.child_by_field_name("name")
        if name is None or name.type != "identifier":
            return False
        methods: set[str] = set()
        for member in obj.named_children:
            if member.type == "comment":
                continue
            if member.type == "method_definition":
                key = member.child_by_field_name("name")
                plain = all(c.type not in ("get", "set", "*", "static", "async") for c in member.children)
                if key is None or key.type != "property_identifier" or not plain:
                    return False
                methods.add(ident_name(key))
            elif member.type != "pair":
                return False  # a spread or a shorthand property
            else:
                key = member.child_by_field_name("key")
                if key is None or key.type != "property_identifier":
                    return False
                value = member.child_by_field_name("value")
                if value is not None and value.type in _NON_ARROW:
                    return False  # a function value: its `this` is whoever calls it
        if self._shorthand_uses(ident_name(name)):
            return False  # `{ petal }` passes the object on without an identifier reference
        refs = self._refs.get(name.id, [])
        if not refs or not all(self._member_in_place(ref, methods) for ref in refs):
            return False
        for member in obj.named_children:
            if member.type == "method_definition":
                for this in _own_this(member):
                    if not self._member_in_place(this, methods):
                        return False
        return True

    def _member_in_place(self, ref: Node, methods: set[str]) -> bool:
        """``ref.name`` with a plain name, and for a name in ``methods`` a call ``ref.name(...)``."""
        parent = ref.parent
        if parent is None or parent.type != "member_expression" or not _same(parent.child_by_field_name("object"), ref):
            return False
        prop = parent.child_by_field_name("property")
        if prop is None or prop.type != "property_identifier":
            return False
        if ident_name(prop) in methods:
            call = parent.parent
            return call is not None and call.type == "call_expression" and _same(
                call.child_by_field_name("function"), parent)
        return True

    def _shorthand_uses(self, name: str) -> bool:
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.type in ("shorthand_property_identifier", "shorthand_property_identifier_pattern") \
                    and ident_name(node) == name:
                return True
            stack.extend(node.children)
        return False

    def _only_new(self, fn: Node) -> bool:
        """Every reference to the declared function is ``new F(...)`` or ``F.prototype...``."""
        name = fn.child_by_field_name("name")
        if name is None:
            return False
        refs = self._refs.get(name.id, [])
        for ref in refs:
            parent = ref.parent
            if parent is not None and parent.type == "new_expression" and _same(
                parent.child_by_field_name("constructor"), ref
            ):
                continue
            if parent is not None and parent.type == "member_expression" and _same(
                parent.child_by_field_name("object"), ref
            ):
                prop = parent.child_by_field_name("property")
                if prop is not None and ident_name(prop) == "prototype":
                    continue
            return False
        return bool(refs)

    # -- escapes --------------------------------------------------------------------------------

    def escapes(self, node: Node) -> bool:
        """Whether a P5 expression ``node`` flows somewhere the gate stops following it.

        It stays in place as the object of a member access, an expression statement (also
        awaited), a ``const`` initialiser, an argument of a p5 / brush call, a condition or the
        operand of a test (``!``, ``typeof``, ``===``, ...). Anything else (an argument of the
        sketch's own function, an element, a property value, a return, an arrow's body, an
        assignment, a spread, a ``let``/``var``) lets it reach an untyped place: it escapes.
        """
        cur = node
        parent = cur.parent
        while parent is not None and parent.type in _PROPAGATORS and _passes_through(parent, cur):
            cur, parent = parent, parent.parent
        if parent is None:
            return False
        kind = parent.type
        if kind in ("member_expression", "subscript_expression"):
            return not _same(parent.child_by_field_name("object"), cur)
        if kind == "call_expression":  # called in place: translate(1, 2).rotate(3)
            return not _same(parent.child_by_field_name("function"), cur)
        if kind in ("expression_statement", "if_statement", "while_statement", "do_statement",
                    "switch_statement", "template_substitution"):
            return False
        if kind == "ternary_expression":  # as the condition
            return False
        if kind == "for_statement":
            return not _same(parent.child_by_field_name("condition"), cur)
        if kind == "unary_expression":
            return _op(parent) not in ("!", "typeof", "void")
        if kind == "binary_expression":
            return _op(parent) not in _TESTS
        if kind == "variable_declarator":
            decl = parent.parent
            word = decl.child_by_field_name("kind") if decl is not None else None
            return not (decl is not None and decl.type == "lexical_declaration"
                        and word is not None and word.type == "const"
                        and _same(parent.child_by_field_name("value"), cur)
                        and parent.child_by_field_name("name").type == "identifier")
        if kind == "arguments" and parent.parent is not None:
            return not self.library_call(parent.parent)
        return True

    # -- numbers --------------------------------------------------------------------------------

    def is_numeric(self, node: Node | None) -> bool:
        """Whether an expression is always a number, BigInt or boolean, so that as a computed key
        it spells ``"0"``, ``"NaN"``, ``"true"``, ... and never a member's name."""
        if node is None:
            return False
        found = self._numeric.get(node.id)
        if found is None:
            self._numeric[node.id] = False  # cycles (i = i + 1) end as "not known"
            found = self._numeric[node.id] = self._is_numeric(node)
        return found

    def _is_numeric(self, node: Node) -> bool:
        kind = node.type
        if kind in ("number", "true", "false"):
            return True
        if kind == "parenthesized_expression":
            return self.is_numeric(node.named_children[0] if node.named_children else None)
        if kind == "unary_expression":
            return _op(node) in ("-", "+", "~", "!")
        if kind == "update_expression":
            return True
        if kind == "binary_expression":
            op = _op(node)
            if op in _NUMERIC_BINARY or op in _TESTS:
                return True
            if op == "+":
                return self.is_numeric(node.child_by_field_name("left")) and self.is_numeric(
                    node.child_by_field_name("right"))
            return False
        if kind == "ternary_expression":
            return self.is_numeric(node.child_by_field_name("consequence")) and self.is_numeric(
                node.child_by_field_name("alternative"))
        if kind == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is not None and fn.type == "identifier" and self.scopes.resolve(fn) is None:
                return ident_name(fn) in P.NUMERIC_GLOBALS
            if fn is not None and fn.type == "member_expression":
                obj = fn.child_by_field_name("object")
                return obj is not None and obj.type == "identifier" and ident_name(obj) == "Math" \
                    and self.scopes.resolve(obj) is None
            return False
        if kind == "identifier":
            binding = self.scopes.resolve(node)
            if binding is None or binding.kind not in ("const", "let", "var"):
                return False
            decl = binding.decl
            if decl.type != "variable_declarator" or not _same(decl.child_by_field_name("name"), binding.node):
                return False
            value = decl.child_by_field_name("value")
            if value is None and binding.kind == "const":
                return False
            if value is not None and not self.is_numeric(value):
                return False
            for op, written in self.writes(binding):
                if op in ("++",) or op in _NUMERIC_ASSIGN:
                    continue
                if op in ("=", "+=") and self.is_numeric(written):
                    continue
                return False
            return value is not None or bool(self.writes(binding))
        return False


def _this_nodes(roots: list[Node]):
    """Yield the ``this`` nodes under ``roots`` that belong to their function (arrows included,
    not nested non-arrow functions or classes)."""
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if node.type == "this":
            yield node
        elif node.type not in _NON_ARROW and node.type not in ("class", "class_declaration"):
            stack.extend(node.children)


def _own_this(fn: Node) -> list[Node]:
    """The ``this`` nodes of a function's own parameters and body."""
    return list(_this_nodes(fn.children))


def function_uses_this(fn: Node) -> bool:
    """Whether a function's own body (not nested non-arrow functions or classes) uses ``this``."""
    return next(_this_nodes([fn.child_by_field_name("body")]), None) is not None
