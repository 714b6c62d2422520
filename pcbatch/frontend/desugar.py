"""Rewriting ``for`` loops over sequences into counted loops, before the fence.

The rest of the frontend compiles one kind of ``for``: ``for i in range(...)``.
Python's other loops are rewritten into it here, keeping Python's order of
evaluation (the sequence is evaluated once, before the first iteration) and the
user's line numbers on every node made, so errors still point at the user's line:

``for a in v``               ``for k in range(len(v)): a = v[k]``
``for i, a in enumerate(v)`` ``for k in range(len(v)): i, a = k, v[k]``
``for a, b in zip(v, w)``    ``for k in range(min(len(v), len(w))): a, b = v[k], w[k]``
``for a in reversed(v)``     ``for k in range(len(v)): a = v[len(v) - 1 - k]``
``for i in reversed(range(n))`` ``for k in range(len(range(n))): i = len(range(n)) - 1 - k``
``for c in (x, 2.0, y)``     ``for k in range(3): c = x if k == 0 else 2.0 if k == 1 else y``

A sequence that is a local name is indexed where it stands, as iterating an
ndarray does (NumPy's iterator indexes the live array: an in-place change made by
the body shows in later items); one the body rebinds, or any other expression, is
bound to a hidden local first (Python's iterator keeps the object it started on).
A tuple or list written in the loop (or a global one) becomes a choice among its
items, so each keeps its own type (``1`` stays a Python int beside ``2.5``).
"""

from __future__ import annotations

import ast
import copy
import dataclasses

from pcbatch.frontend.fence import changed_in_place, shared_base
from pcbatch.frontend.parse import ParsedFunction, local_names

#: builtins whose loops this module rewrites (unless the function rebinds the name)
_ITERATORS = ("enumerate", "zip", "reversed")


def for_loops(parsed: ParsedFunction) -> ParsedFunction:
    """``parsed`` with every ``for`` over something other than ``range(...)`` rewritten
    into a ``for`` over ``range``; the same object when there is none."""
    locals_ = local_names(parsed.tree)
    if not any(
        isinstance(node, ast.For) and not _is_builtin_call(node.iter, "range", parsed, locals_)
        for node in ast.walk(parsed.tree)
    ):
        return parsed
    tree = copy.deepcopy(parsed.tree)
    _Rewriter(parsed).visit(tree)
    return dataclasses.replace(parsed, tree=tree)


def _is_builtin_call(node: ast.expr, name: str, parsed: ParsedFunction, locals_: frozenset) -> bool:
    """``node`` calls the builtin ``name`` (not a local, global or closure of that name)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and name not in locals_
        and name not in parsed.globals
        and name not in parsed.closure
    )


@dataclasses.dataclass
class _Source:
    """One sequence of a loop: statements binding it before the loop, its length, and its
    item at a counter (expressions)."""

    before: list
    length: ast.expr
    item: object  # callable: counter expression -> item expression


class _Rewriter(ast.NodeTransformer):
    def __init__(self, parsed: ParsedFunction):
        self.parsed = parsed
        self.locals = local_names(parsed.tree)
        self.changed_in_place = changed_in_place(parsed.tree)

    def reject(self, node: ast.AST, message: str):
        raise self.parsed.syntax_error(node, message)

    def visit_For(self, stmt: ast.For):
        self.generic_visit(stmt)  # inner loops first
        if _is_builtin_call(stmt.iter, "range", self.parsed, self.locals):
            return stmt
        tag = str(stmt.lineno)  # one for statement per line
        counter = f"__for{tag}_index"
        source = self.source(stmt.iter, stmt, tag)
        item = source.item(ast.Name(counter, ast.Load()))
        # what messages and profiles call them (`to_ir._label`)
        item._pcbatch_text = f"the next item of {ast.unparse(stmt.iter)}"
        source.length._pcbatch_text = f"the length of {ast.unparse(stmt.iter)}"
        bind = ast.Assign(targets=[stmt.target], value=item)
        bind._pcbatch_loop = ast.unparse(stmt.iter)  # what the fence's messages name
        body = [bind, *stmt.body]
        loop = ast.For(
            target=ast.Name(counter, ast.Store()),
            iter=ast.Call(ast.Name("range", ast.Load()), [source.length], []),
            body=body,
            orelse=stmt.orelse,  # the fence rejects for ... else at its line
        )
        made = [*source.before, loop]
        for node in made:
            _locate(node, stmt)
        return made

    # -- sequences -------------------------------------------------------------
    def source(self, node: ast.expr, stmt: ast.For, tag: str) -> _Source:
        if _is_builtin_call(node, "enumerate", self.parsed, self.locals):
            return self.enumerated(node, stmt, tag)
        if _is_builtin_call(node, "zip", self.parsed, self.locals):
            return self.zipped(node, stmt, tag)
        if _is_builtin_call(node, "reversed", self.parsed, self.locals):
            if len(node.args) != 1 or node.keywords:
                self.reject(node, "reversed() takes exactly one argument")
            inner = self.sequence(node.args[0], stmt, tag)
            last = ast.BinOp(inner.length, ast.Sub(), ast.Constant(1))
            return _Source(
                inner.before, inner.length,
                lambda k: inner.item(ast.BinOp(copy.deepcopy(last), ast.Sub(), k)),
            )
        return self.sequence(node, stmt, tag)

    def enumerated(self, node: ast.Call, stmt: ast.For, tag: str) -> _Source:
        keywords = {k.arg: k.value for k in node.keywords}
        given = [*node.args, keywords.pop("iterable", None), keywords.pop("start", None)]
        given = [part for part in given if part is not None]
        if not 1 <= len(given) <= 2 or keywords or len(node.args) > 2:
            self.reject(node, "enumerate() takes a sequence and an optional start")
        sequence, start = given[0], given[1] if len(given) == 2 else ast.Constant(0)
        inner = self.source(sequence, stmt, f"{tag}e")
        before = list(inner.before)
        if not isinstance(start, ast.Constant):
            start_name = f"__for{tag}_start"
            before.insert(0, _assign(start_name, start))  # Python evaluates it first
            start = ast.Name(start_name, ast.Load())

        def item(k):
            count = ast.BinOp(copy.deepcopy(start), ast.Add(), copy.deepcopy(k))
            return ast.Tuple([count, inner.item(k)], ast.Load())

        return _Source(before, inner.length, item)

    def zipped(self, node: ast.Call, stmt: ast.For, tag: str) -> _Source:
        for keyword in node.keywords:
            if keyword.arg != "strict" or not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                self.reject(
                    keyword,
                    "zip(strict=True) is not supported in a batched for loop (Python raises "
                    "only once the shortest sequence ends); check the lengths before the "
                    "loop: if len(a) != len(b): raise ValueError(...)",
                )
        if not node.args:
            self.reject(node, "zip() without sequences makes a loop that never runs; remove it")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.reject(
                    arg,
                    f"zip({ast.unparse(arg)}) in a batched for loop is not supported; loop "
                    f"over the columns: for column in {ast.unparse(arg.value)}.T",
                )
        parts = [self.source(arg, stmt, f"{tag}z{i}") for i, arg in enumerate(node.args)]
        length = parts[0].length
        if len(parts) > 1:
            length = ast.Call(ast.Name("__pcb_min", ast.Load()), [p.length for p in parts], [])
        return _Source(
            [s for p in parts for s in p.before],
            length,
            lambda k: ast.Tuple([p.item(copy.deepcopy(k)) for p in parts], ast.Load()),
        )

    def sequence(self, node: ast.expr, stmt: ast.For, tag: str) -> _Source:
        """A sequence indexed by the counter: a local name where it stands (unless the
        loop rebinds it), anything else bound once before the loop."""
        if _is_builtin_call(node, "range", self.parsed, self.locals):
            return self.ranged(node, tag)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
            node.func.id in _ITERATORS
            and _is_builtin_call(node, node.func.id, self.parsed, self.locals)
        ):
            self.reject(
                node,
                f"{node.func.id}() inside another call in a for loop is not supported; "
                "loop over an index, for i in range(len(v)), and compute the items from i",
            )
        items = self.literal_items(node)
        if items is not None:
            return self.unrolled(items, stmt, tag)
        if isinstance(node, ast.Name) and node.id in self.locals and (
            node.id not in _rebound_in(stmt.body)
        ):
            name, before = node.id, []
        else:
            self.no_view_of_a_changed_array(node)
            name = f"__for{tag}_items"
            before = [_assign(name, node)]
        return _Source(
            before,
            ast.Call(ast.Name("__pcb_len", ast.Load()), [ast.Name(name, ast.Load())], []),
            lambda k: _item_of(name, k),
        )

    def ranged(self, node: ast.Call, tag: str) -> _Source:
        """``range(...)`` inside ``reversed``, ``zip`` or ``enumerate``: its arguments
        evaluated once, in order, as Python ints; its length `runtime.range_length` (which
        fails a zero step as Python does); its item at ``k`` ``start + k * step``."""
        if node.keywords or not 1 <= len(node.args) <= 3 or any(
            isinstance(arg, ast.Starred) for arg in node.args
        ):
            self.reject(node, "range() takes 1 to 3 integer arguments, written out")
        args = list(node.args)
        if len(args) == 1:
            args.insert(0, ast.Constant(0))
        if len(args) == 2:
            args.append(ast.Constant(1))
        before, bound = [], []
        for i, arg in enumerate(args):
            if isinstance(arg, ast.Constant) and type(arg.value) is int:
                bound.append(arg)
                continue
            name = f"__for{tag}_range{i}"
            before.append(_assign(name, ast.Call(ast.Name("__pcb_index", ast.Load()), [arg], [])))
            bound.append(ast.Name(name, ast.Load()))
        start, stop, step = bound
        length = ast.Call(ast.Name("__pcb_range_len", ast.Load()), copy.deepcopy(bound), [])

        def item(k):
            offset = k
            if not (isinstance(step, ast.Constant) and step.value == 1):
                offset = ast.BinOp(k, ast.Mult(), copy.deepcopy(step))
            if isinstance(start, ast.Constant) and start.value == 0:
                return offset
            return ast.BinOp(copy.deepcopy(start), ast.Add(), offset)

        return _Source(before, length, item)

    def no_view_of_a_changed_array(self, node: ast.expr) -> None:
        """Python's loop would iterate over the very array (or a view of it) that the
        function changes in place, and see the changes; a batch keeps a value per name."""
        base = shared_base(node)
        if base is None or base not in self.changed_in_place or base not in self.locals:
            return
        text = ast.unparse(node)
        how = "is rebound inside the loop" if text == base else "is a view of it"
        self.reject(
            node,
            f"this loop iterates over {text!r}, which {how}, and {base!r} is changed in place "
            f"in this function ('{base}[i] = ...' or '{base} += ...'); Python's loop would see "
            f"those changes: iterate over a copy, for ... in np.array({text}), or over an "
            f"index, for i in range(len({text}))",
        )

    # -- tuples and lists unrolled -------------------------------------------
    def literal_items(self, node: ast.expr) -> list | None:
        """The items of a tuple or list written in the loop, or of a global (or closure)
        tuple or list; None for anything else."""
        if isinstance(node, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return list(node.elts)
        if isinstance(node, ast.Name) and node.id not in self.locals:
            value = self.parsed.closure.get(node.id, self.parsed.globals.get(node.id))
            if isinstance(value, (tuple, list)):
                items = [
                    ast.Subscript(ast.Name(node.id, ast.Load()), ast.Constant(i), ast.Load())
                    for i in range(len(value))
                ]
                for item in items:
                    item._pcbatch_global = True  # read when compiling, as any global is
                return items
        return None

    def unrolled(self, items: list, stmt: ast.For, tag: str) -> _Source:
        """Items chosen by a conditional expression on the counter, so each keeps its own
        type; those the body could change are bound first (Python builds the whole tuple
        before the first iteration)."""
        if not items:  # `for a in ()`: the body never runs, `a` stays unbound
            return _Source([], ast.Constant(0), lambda k: ast.Constant(0))
        before, values = [], []
        rebound = _rebound_in(stmt.body)
        for i, item in enumerate(items):
            if isinstance(item, ast.Constant) or getattr(item, "_pcbatch_global", False) or (
                isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant)
            ) or (isinstance(item, ast.Name) and item.id not in rebound):
                values.append(item)
                continue
            name = f"__for{tag}_item{i}"
            before.append(_assign(name, item))
            values.append(ast.Name(name, ast.Load()))

        return _Source(before, ast.Constant(len(values)), lambda k: _chosen(values, k))


def _chosen(values: list, k: ast.expr) -> ast.expr:
    """``values[k]`` as conditional expressions (tuples are chosen item by item:
    `runtime.select`)."""
    chosen = copy.deepcopy(values[-1])
    for i in reversed(range(len(values) - 1)):
        test = ast.Compare(copy.deepcopy(k), [ast.Eq()], [ast.Constant(i)])
        chosen = ast.IfExp(test, copy.deepcopy(values[i]), chosen)
    return chosen


def _item_of(name: str, k: ast.expr) -> ast.expr:
    """``name[k]``, through `runtime.item` (a tuple's items are chosen, not indexed)."""
    return ast.Call(ast.Name("__pcb_item", ast.Load()), [ast.Name(name, ast.Load()), k], [])


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)


def _rebound_in(body: list) -> frozenset:
    """Names a loop body binds anew (``v = ...``, a for target, ``:=``); augmented
    assignment is not among them: on an array it changes the array in place."""
    names = set()
    for stmt in body:
        for node in ast.walk(stmt):
            targets: list = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.For, ast.NamedExpr)):
                targets = [node.target]
            for target in targets:
                names.update(
                    n.id for n in ast.walk(target)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                )
    return frozenset(names)


def _locate(node: ast.AST, stmt: ast.For) -> None:
    """Gives every node made here the ``for`` statement's position (nodes taken from the
    user's loop keep their own)."""
    for child in ast.walk(node):
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            child.lineno, child.col_offset = stmt.lineno, stmt.col_offset
            child.end_lineno, child.end_col_offset = stmt.end_lineno, stmt.end_col_offset
