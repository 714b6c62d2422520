"""Reading a function's source into an `ast.FunctionDef` with the user's line numbers.

The tree's ``lineno`` values are those of the user's file (not of the
dedented snippet), and ``col_offset`` values are columns in that file, so
every error and every compiled primitive points at the user's own code.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import linecache
import textwrap
import types
from typing import Any

from pcbatch.errors import AutobatchSyntaxError


@dataclasses.dataclass(frozen=True)
class ParsedFunction:
    """A user function, parsed, with what is needed to resolve its free names."""

    function: Any
    name: str
    filename: str
    tree: ast.FunctionDef
    globals: dict
    closure: dict
    signature: inspect.Signature

    def line_text(self, lineno: int) -> str:
        return linecache.getline(self.filename, lineno).rstrip("\n")

    def syntax_error(
        self, node: ast.AST, message: str, kind: type[AutobatchSyntaxError] = AutobatchSyntaxError
    ) -> AutobatchSyntaxError:
        """An `AutobatchSyntaxError` (or the subclass ``kind``) located at ``node`` in the
        user's file."""
        lineno = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0)
        return kind(
            f"in batched function {self.name!r}: {message}",
            self.filename,
            lineno,
            col + 1,
            self.line_text(lineno),
        )


def _closure_values(fn: types.FunctionType) -> dict:
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        with contextlib.suppress(ValueError):  # an empty cell: not bound yet
            values[name] = cell.cell_contents
    return values


def _shift_columns(tree: ast.AST, indent: int) -> None:
    if not indent:
        return
    for node in ast.walk(tree):
        if hasattr(node, "col_offset"):
            node.col_offset += indent
        if getattr(node, "end_col_offset", None) is not None:
            node.end_col_offset += indent


def parse_function(fn: Any) -> ParsedFunction:
    """Parses ``fn``'s source; raises `AutobatchSyntaxError` if it is not a plain ``def``."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"pcbatch can batch only Python functions defined with def, not {fn!r}")
    filename = fn.__code__.co_filename
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise TypeError(
            f"cannot read the source of {fn.__qualname__!r} ({e}); pcbatch compiles a "
            "function from its source, so define it in a file"
        ) from None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    module = ast.parse(dedented, filename=filename)
    ast.increment_lineno(module, first_line - 1)
    _shift_columns(module, indent)
    node = module.body[0] if module.body else None
    if fn.__name__ == "<lambda>" or not isinstance(node, ast.FunctionDef):
        raise AutobatchSyntaxError(
            f"batched functions must be defined with def, not lambda ({fn.__qualname__})",
            filename,
            first_line,
            indent + 1,
            linecache.getline(filename, first_line).rstrip("\n"),
        )
    return ParsedFunction(
        function=fn,
        name=fn.__name__,
        filename=filename,
        tree=node,
        globals=fn.__globals__,
        closure=_closure_values(fn),
        signature=inspect.signature(fn),
    )


def _stored_names(node: ast.AST, into: set) -> None:
    """Names bound in ``node``'s own scope (nested lambdas/comprehensions excluded)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Lambda, ast.comprehension, ast.GeneratorExp)):
            continue
        if isinstance(child, (ast.ListComp, ast.SetComp, ast.DictComp)):
            continue
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            into.add(child.id)
        _stored_names(child, into)


def parameter_names(tree: ast.FunctionDef) -> frozenset:
    return frozenset(a.arg for a in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs)


def local_names(tree: ast.FunctionDef) -> frozenset:
    """Python's rule: parameters and every name assigned anywhere in the body are local."""
    names = set(parameter_names(tree))
    for stmt in tree.body:
        _stored_names(stmt, names)
        if isinstance(stmt, ast.Name) and isinstance(stmt.ctx, ast.Store):
            names.add(stmt.id)
    return frozenset(names)
