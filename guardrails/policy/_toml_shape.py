"""The shape of a TOML text, measured in one linear pass before it is parsed.

``tomllib`` recurses once per inline array or table nested in another (some
hundreds of levels raise ``RecursionError``), its time grows with the square
of the parts of one dotted key (100,000 parts: minutes), and each table header
costs it tens of microseconds. ``first_excess`` finds the first nesting too
deep, key too long or header too many without parsing, so that the loader
refuses such a text before ``tomllib`` sees it.

The pass knows strings (four kinds), comments, and where a key is read (a
line, a table header, an inline table) and where a value is. It reads only
as far as the text is TOML: at a string that is not closed it stops, since
``tomllib`` stops there too with an error.
"""

from __future__ import annotations

import re

__all__ = ["first_excess"]

_TOKENS = re.compile(
    r"""
      "{3}(?:\\[\s\S]|[^\\"]|"(?!""))*"{3,5}     # a multi-line basic string
    | '{3}(?:[^']|'(?!''))*'{3,5}                # a multi-line literal string
    | (?P<stop>"{3}|'{3})                         # either, not closed: TOML ends here
    | "(?:\\.|[^"\\\n])*"                         # a basic string
    | '[^'\n]*'                                   # a literal string
    | (?P<unclosed>["'])                          # either, not closed on its line
    | \#[^\n]*                                    # a comment
    | (?P<mark>[\[\]{}.=,\n])
    """,
    re.VERBOSE,
)

# Where the pass is: the start of a top-level line, a key, a table header, a
# value, or the rest of a header's line.
_LINE, _KEY, _HEADER, _VALUE, _REST = range(5)


def first_excess(text: str, depth: int, parts: int, tables: int) -> tuple[str, int] | None:
    """``("nesting" | "key" | "tables", line)`` of the first inline array or table
    nested deeper than ``depth``, key of more than ``parts`` dotted parts, or table
    header past the first ``tables``; None if none of them."""
    stack: list[str] = []
    state, dots, headers = _LINE, 0, 0
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "stop" or kind == "unclosed":
            return None
        if kind != "mark":
            if state == _LINE and match.group()[0] != "#":
                state = _KEY  # a quoted key begins the line
            continue  # a string or a comment
        mark = match.group()
        if state in (_LINE, _KEY, _HEADER):
            if mark == ".":
                dots += 1
                if dots >= parts:
                    return "key", _line(text, match.start())
                if state == _LINE:
                    state = _KEY
            elif mark == "=" and state != _HEADER:
                state = _VALUE
            elif mark == "[" and state == _LINE:
                state, headers = _HEADER, headers + 1
                if headers > tables:
                    return "tables", _line(text, match.start())
            elif mark == "]" and state == _HEADER:
                state = _REST
            elif mark == "}" and stack:  # an empty inline table
                stack.pop()
                state = _VALUE
            elif mark == "\n" and not stack:
                state, dots = _LINE, 0
        elif state == _REST:
            if mark == "\n":
                state, dots = _LINE, 0
        elif mark in "[{":
            stack.append(mark)
            if len(stack) > depth:
                return "nesting", _line(text, match.start())
            if mark == "{":
                state, dots = _KEY, 0
        elif mark in "]}":
            if stack:
                stack.pop()
        elif mark == ",":
            if stack and stack[-1] == "{":
                state, dots = _KEY, 0
        elif mark == "\n" and not stack:
            state, dots = _LINE, 0
    return None


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1
