"""Rewriting ``sum``, ``any``, ``all``, ``max`` and ``min`` of a comprehension over
per-example values into loops, before `desugar` (which then rewrites the loops over
sequences).

``s = sum(w * a for a in v if a > 0)`` becomes, in front of its statement::

    __comp7_acc = 0
    for __comp7_a in v:
        if __comp7_a > 0:
            __comp7_acc = __comp7_acc + w * __comp7_a
    s = __comp7_acc

which is what Python's ``sum`` computes (``0 + e1 + e2 + ...``, left to right).
``any``/``all`` stop at the first true/false item, as Python's do, so an item after it
is never computed. ``max``/``min`` keep the first item, then each later one that
compares greater (``item > best``; ``<`` for ``min``), Python's own comparisons, so
ties and NaNs come out as in Python; with no item they take ``default=`` or fail as
Python's ``ValueError`` for those examples (`runtime.EmptyReductionCheck`).
The comprehension's names are renamed (in Python they do not leak
into the function), and its first sequence is evaluated where Python evaluates it.

A call is moved in front of its statement only where Python would evaluate it anyway
and nothing evaluated before it in the statement could raise or call anything: the
value of an assignment, ``return`` or ``if`` test, outside the operands that
``and``/``or``/``x if c else y`` and chained comparisons may skip. Any other
comprehension over per-example values is still refused by the fence, which says to
write the loop.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools

from pcbatch.frontend.parse import ParsedFunction, local_names

REDUCERS = ("sum", "any", "all", "max", "min")

#: the name of the check that ``max``/``min`` had an item (`to_ir` makes it a primitive)
EMPTY_CHECK = "__pcb_nonempty"

#: expressions that cannot raise or run user code: evaluating them first changes nothing
_SAFE = (ast.Name, ast.Constant, ast.Attribute, ast.Tuple)
_SAFE_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.USub, ast.UAdd, ast.Invert)


def reductions(parsed: ParsedFunction) -> ParsedFunction:
    """``parsed`` with each movable reduction over a comprehension of per-example
    values written as a loop; the same object when there is none."""
    locals_ = local_names(parsed.tree)
    if not any(_is_reduction(node, parsed, locals_) for node in ast.walk(parsed.tree)):
        return parsed
    tree = copy.deepcopy(parsed.tree)
    _Hoister(parsed, locals_).visit(tree)
    return dataclasses.replace(parsed, tree=tree)


def _is_reduction(node: ast.AST, parsed: ParsedFunction, locals_: frozenset) -> bool:
    """``sum``/``any``/``all`` (Python's) of one comprehension over per-example values."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    name = node.func.id
    if name not in REDUCERS or name in locals_ or name in parsed.globals or (
        name in parsed.closure
    ):
        return False
    if not node.args or not isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):
        return False
    if not _arguments_fit(name, node):
        return False
    comprehension = node.args[0]
    if any(
        isinstance(inner, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                           ast.DictComp, ast.NamedExpr))
        for part in (comprehension.elt, *comprehension.generators)
        for inner in ast.walk(part)
    ) or any(g.is_async for g in comprehension.generators):
        return False
    # Over a local: the fence would refuse it. Over constants, the comprehension runs
    # inside one primitive on the whole batch, which is Python's meaning only for a sum
    # of per-example items: a filter, or any/all/max/min, test each item's truth.
    def reads_locals(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in locals_ for n in ast.walk(node))

    generators = comprehension.generators
    return (
        any(reads_locals(g.iter) or any(map(reads_locals, g.ifs)) for g in generators)
        or name != "sum" and reads_locals(comprehension.elt)
    )


def _arguments_fit(name: str, node: ast.Call) -> bool:
    """The arguments beside the comprehension are ones the loop reproduces: ``sum``'s
    ``start``; ``max``/``min``'s ``default`` when it is a name or a constant (the loop
    reads it after the items, where Python evaluates it before them); no ``key``."""
    keywords = [k.arg for k in node.keywords]
    extra = node.args[1:]
    if name == "sum":
        return len(extra) + len(keywords) <= 1 and keywords in ([], ["start"])
    if name in ("max", "min"):
        return not extra and (
            not keywords or keywords == ["default"] and _is_plain_value(node.keywords[0].value)
        )
    return not extra and not keywords


def _is_plain_value(node: ast.expr) -> bool:
    """A name, a constant, ``np.inf``, or minus one of those: evaluating it later than
    Python does changes nothing."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


class _Hoister(ast.NodeTransformer):
    def __init__(self, parsed: ParsedFunction, locals_: frozenset):
        self.parsed, self.locals = parsed, locals_
        self.tags = itertools.count()

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and all(isinstance(s, ast.stmt) for s in statements):
                setattr(node, field, [s for stmt in statements for s in self.statement(stmt)])
        return node

    def statement(self, stmt: ast.stmt) -> list:
        self.generic_visit(stmt)  # nested blocks first
        head = _head(stmt)
        if head is None:
            return [stmt]
        field, value = head
        found = _Scan(self.parsed, self.locals)
        found.scan(value, lazy=False)
        if not found.calls:
            return [stmt]
        before = []
        replaced = {}
        for call in found.calls:
            tag = f"{stmt.lineno}_{next(self.tags)}"
            loop, result = _loop(call, tag)
            for node in loop:
                _locate(node, call)
            before.extend(loop)
            replaced[id(call)] = result
        setattr(stmt, field, _Replace(replaced).visit(value))
        return [*before, stmt]


def _head(stmt: ast.stmt):
    """The field holding the expression Python evaluates first in ``stmt``, if it is
    one whose reductions may move in front of it."""
    if isinstance(stmt, ast.AugAssign) and not isinstance(stmt.target, ast.Name):
        return None  # `buf[i] += ...` reads buf[i] (which may raise) before the value
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
        return "value", stmt.value
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        return "value", stmt.value
    if isinstance(stmt, ast.If):
        return "test", stmt.test
    return None


class _Scan:
    """Finds, in Python's order of evaluation, the reductions that may move in front of
    the statement: each one evaluated on every path through the expression, after
    nothing that could raise or call user code."""

    def __init__(self, parsed: ParsedFunction, locals_: frozenset):
        self.parsed, self.locals = parsed, locals_
        self.calls: list = []
        self.clean = True  # nothing evaluated so far could raise or call anything

    def scan(self, node: ast.AST, lazy: bool) -> None:
        if _is_reduction(node, self.parsed, self.locals):
            if not lazy and self.clean:
                self.calls.append(node)
            else:
                self.clean = False
            return
        if isinstance(node, ast.BoolOp):
            self.scan(node.values[0], lazy)
            for value in node.values[1:]:
                self.scan(value, True)
        elif isinstance(node, ast.IfExp):
            self.scan(node.test, lazy)
            self.scan(node.body, True)
            self.scan(node.orelse, True)
        elif isinstance(node, ast.Compare):
            self.scan(node.left, lazy)
            for k, value in enumerate(node.comparators):
                self.scan(value, lazy or k > 0)
        elif isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                               ast.DictComp)):
            self.clean = False
            return
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.scan(child, lazy)
        if not _safe(node):
            self.clean = False


def _safe(node: ast.AST) -> bool:
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):  # `not v` of an array raises
        return isinstance(node.op, _SAFE_OPERATORS)
    if isinstance(node, (ast.BoolOp, ast.IfExp, ast.Compare)):
        return True  # their parts were judged one by one
    return isinstance(node, _SAFE)


def _loop(call: ast.Call, tag: str) -> tuple:
    """The statements computing ``call`` and the expression reading their result."""
    comprehension = call.args[0]
    names = {
        n.id: f"__comp{tag}_{n.id}"
        for g in comprehension.generators
        for n in ast.walk(g.target)
        if isinstance(n, ast.Name)
    }
    rename = _Rename(names)
    generators = [copy.deepcopy(g) for g in comprehension.generators]
    for k, g in enumerate(generators):
        g.target = rename.visit(g.target)
        g.ifs = [rename.visit(test) for test in g.ifs]
        if k:  # later sequences may read earlier targets; the first is read outside
            g.iter = rename.visit(g.iter)
    elt = rename.visit(copy.deepcopy(comprehension.elt))
    acc = f"__comp{tag}_acc"
    kind = call.func.id
    if kind == "sum":
        start = call.args[1] if len(call.args) > 1 else (
            call.keywords[0].value if call.keywords else ast.Constant(0)
        )
        init = _assign(acc, start)
        step = [_assign(acc, ast.BinOp(_load(acc), ast.Add(), elt))]
        stop = None
    elif kind in ("max", "min"):
        return _extreme_loop(call, generators, elt, tag)
    else:
        found = kind == "any"  # any: stops at a true item; all: at a false one
        init = _assign(acc, ast.Constant(not found))
        test = elt if found else ast.UnaryOp(ast.Not(), elt)
        step = [ast.If(test, [_assign(acc, ast.Constant(found)), ast.Break()], [])]
        stop = _load(acc) if found else ast.UnaryOp(ast.Not(), _load(acc))
        if isinstance(comprehension, ast.ListComp):  # the list is built whole first
            step = [ast.If(test, [_assign(acc, ast.Constant(found))], [])]
            stop = None
    return [init, *_nest(generators, step, stop)], _load(acc)


def _nest(generators: list, body: list, stop: ast.expr | None) -> list:
    """``body`` inside the comprehension's loops and filters; after each inner loop, the
    outer one stops too where ``stop`` holds (an inner loop's break leaves one loop)."""
    for k, g in enumerate(reversed(generators)):
        for test in reversed(g.ifs):
            body = [ast.If(test, body, [])]
        loop = ast.For(target=g.target, iter=g.iter, body=body, orelse=[])
        body = [loop] if k == len(generators) - 1 or stop is None else [
            loop, ast.If(copy.deepcopy(stop), [ast.Break()], [])
        ]
    return body


def _extreme_loop(call: ast.Call, generators: list, elt: ast.expr, tag: str) -> tuple:
    """``max``/``min`` of a comprehension: the first item, then each later one that
    compares greater (less), as Python's builtins compare. The best-so-far starts as
    ``False``, a weak Python bool that takes the items' dtype in type inference and is
    never read before the first item replaces it."""
    acc, seen, item = (f"__comp{tag}_{part}" for part in ("best", "seen", "item"))
    greater = ast.Gt() if call.func.id == "max" else ast.Lt()
    better = ast.Compare(_load(item), [greater], [_load(acc)])
    step = [
        _assign(item, elt),
        ast.If(_load(seen), [ast.If(better, [_assign(acc, _load(item))], [])], [
            _assign(acc, _load(item)), _assign(seen, ast.Constant(True)),
        ]),
    ]
    init = [_assign(acc, ast.Constant(False)), _assign(seen, ast.Constant(False))]
    if call.keywords:  # default=: the value where there is no item
        empty = ast.If(ast.UnaryOp(ast.Not(), _load(seen)), [
            _assign(acc, call.keywords[0].value)
        ], [])
    else:  # Python's ValueError for the examples with no item
        check = ast.Call(ast.Name(EMPTY_CHECK, ast.Load()),
                         [_load(seen), ast.Constant(call.func.id)], [])
        empty = _assign(seen, check)
    return [*init, *_nest(generators, step, None), empty], _load(acc)


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            return ast.copy_location(ast.Name(self.names[node.id], node.ctx), node)
        return node


class _Replace(ast.NodeTransformer):
    def __init__(self, replaced: dict):
        self.replaced = replaced

    def visit(self, node: ast.AST) -> ast.AST:
        made = self.replaced.get(id(node))
        if made is not None:
            return ast.copy_location(made, node)
        return super().visit(node)


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _locate(node: ast.AST, at: ast.AST) -> None:
    """Gives every node made here the reduction's position (the user's own nodes keep
    theirs)."""
    for child in ast.walk(node):
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            child.lineno, child.col_offset = at.lineno, at.col_offset
            child.end_lineno, child.end_col_offset = at.end_lineno, at.end_col_offset
