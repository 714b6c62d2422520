"""Rewriting ``for ... else`` and ``while ... else`` into a flag, before the fence.

Python runs a loop's ``else`` when the loop ends without a ``break``. The rest of the
frontend compiles loops without one, so each becomes::

    __else12_4_broke = False
    for a in v:                         # every break of this loop (not of a loop
        ...                             # inside it) first sets the flag
        __else12_4_broke = True; break
    if not __else12_4_broke:
        <the else clause>

A ``return`` in the body leaves the function as before, so the clause does not run;
a ``continue`` goes on looping. Loops inside the body are rewritten first, so a
``break`` in an inner loop's ``else`` (which belongs to the outer loop) is seen here.
Every node made takes the loop statement's position, so messages name the user's line.
"""

from __future__ import annotations

import ast
import copy
import dataclasses

from pcbatch.frontend.parse import ParsedFunction


def flags(parsed: ParsedFunction) -> ParsedFunction:
    """``parsed`` with every loop's ``else`` made a test of a flag; the same object when
    no loop has one."""
    if not any(
        isinstance(node, (ast.For, ast.While)) and node.orelse for node in ast.walk(parsed.tree)
    ):
        return parsed
    tree = copy.deepcopy(parsed.tree)
    _Rewriter().visit(tree)
    return dataclasses.replace(parsed, tree=tree)


class _Rewriter(ast.NodeTransformer):
    def visit_For(self, stmt: ast.For):
        return self.rewrite(stmt)

    def visit_While(self, stmt: ast.While):
        return self.rewrite(stmt)

    def rewrite(self, loop: ast.For | ast.While):
        self.generic_visit(loop)  # inner loops first
        if not loop.orelse:
            return loop
        flag = f"__else{loop.lineno}_{loop.col_offset}_broke"
        orelse, loop.orelse = loop.orelse, []
        if not _has_own_break(loop.body):
            # the clause always runs after the loop: no flag, so that a clause ending
            # in ``return`` ends the function on every path, as Python sees it
            return [loop, *orelse]
        loop.body = _flag_breaks(loop.body, flag)
        start = ast.Assign(targets=[ast.Name(flag, ast.Store())], value=ast.Constant(False))
        test = ast.UnaryOp(ast.Not(), ast.Name(flag, ast.Load()))
        after = ast.If(test=test, body=orelse, orelse=[])
        for node in (start, after):
            _locate(node, loop)
        return [start, loop, after]


def _flag_breaks(body: list, flag: str) -> list:
    """``body`` with each ``break`` of its own loop preceded by ``flag = True``."""
    rewritten = []
    for stmt in body:
        if isinstance(stmt, ast.Break):
            set_flag = ast.Assign(targets=[ast.Name(flag, ast.Store())], value=ast.Constant(True))
            _locate(set_flag, stmt)
            rewritten += [set_flag, stmt]
            continue
        if not isinstance(stmt, _OWN_BREAKS):
            for block in _blocks(stmt):
                block[:] = _flag_breaks(block, flag)
        rewritten.append(stmt)
    return rewritten


def _has_own_break(body: list) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Break):
            return True
        if not isinstance(stmt, _OWN_BREAKS) and any(map(_has_own_break, _blocks(stmt))):
            return True
    return False


#: statements whose breaks are not the enclosing loop's: a nested loop's are its own
_OWN_BREAKS = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef,
               ast.ClassDef)


def _blocks(stmt: ast.stmt) -> list:
    """The statement lists inside ``stmt`` (an ``if``'s two, a ``with``'s, a ``try``'s
    and its handlers', a ``match``'s cases': the fence rejects most of them later)."""
    blocks = [getattr(stmt, field) for field in ("body", "orelse", "finalbody")
              if isinstance(getattr(stmt, field, None), list)]
    inner = [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]
    return blocks + [part.body for part in inner]


def _locate(node: ast.AST, where: ast.stmt) -> None:
    """Gives every node made here ``where``'s position."""
    for child in ast.walk(node):
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            child.lineno, child.col_offset = where.lineno, where.col_offset
            child.end_lineno, child.end_col_offset = where.end_lineno, where.end_col_offset
