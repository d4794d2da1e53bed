"""Find the sketch in a policy reply.

The reply is Markdown around code. The sketch is the first fenced block whose info string is
``js``, ``javascript`` (any case) or empty; other languages' blocks are skipped. A fence that is
opened but never closed yields everything after it (the reply was probably cut off; the parser
then decides whether the code itself is truncated). With no such block the whole reply is the
sketch when tree-sitter finds a top-level ``setup`` in it. Fences are Markdown, not JavaScript, so
this file reads lines; everything about the code itself is left to the parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_javascript
from tree_sitter import Language, Parser

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$")
_JS_INFO = {"", "js", "javascript"}


@dataclass(frozen=True)
class Extraction:
    """Where the sketch came from.

    Attributes:
        code: the sketch source, or None when the reply holds none.
        fenced: True when it came from a fenced block.
        unterminated: True when that block's fence was never closed.
    """

    code: str | None
    fenced: bool = False
    unterminated: bool = False


@lru_cache(maxsize=1)
def js_parser() -> Parser:
    """A tree-sitter parser for JavaScript (tree-sitter-javascript's grammar, JSX included)."""
    return Parser(Language(tree_sitter_javascript.language()))


def defines_setup(code: str) -> bool:
    """True when tree-sitter finds a function or variable named ``setup`` anywhere in ``code``.

    Error recovery lets this see ``function setup`` inside a reply that mixes prose and code
    (the prose then makes the static gate report ``syntax_error``).
    """
    stack = [js_parser().parse(code.encode()).root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type in ("function_declaration", "function_expression", "variable_declarator"):
            name = node.child_by_field_name("name")
        elif node.type == "assignment_expression":
            name = node.child_by_field_name("left")
        else:
            continue
        if name is not None and name.text == b"setup":
            return True
    return False


def find_sketch(reply: str) -> Extraction:
    """Locate the sketch in ``reply`` (see the module docstring for the rules)."""
    lines = reply.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i].rstrip("\r\n"))
        if match is None:
            i += 1
            continue
        fence, info = match.group(1), match.group(2).lower()
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j].rstrip("\r\n")):
            j += 1
        if info in _JS_INFO:
            return Extraction("".join(lines[i + 1 : j]), fenced=True, unterminated=j >= len(lines))
        i = j + 1
    if reply.strip() and defines_setup(reply):
        return Extraction(reply)
    return Extraction(None)


def extract_code(reply: str) -> str | None:
    """The sketch in a policy reply: the first ```js / ```javascript / bare fenced block, else the
    whole reply when it defines ``setup``, else None."""
    return find_sketch(reply).code
