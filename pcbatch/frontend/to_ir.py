"""From a fenced function's AST to structured IR, through the DSL builder.

Straight-line expressions become primitives: each maximal piece of an
expression that involves no batched call and no short-circuit is compiled
(with the user's filename and line numbers, so tracebacks point at the user's
code) into one lambda over the local variables it reads. Calls to batched
functions become `FunctionCallOp`s; ``and``/``or``/``x if c else y`` and
chained comparisons whose later operands could fail or call batched code
become control flow, so those operands run only for the threads that reach
them; trivially pure ones are evaluated eagerly as per-example selections.

Example: ``return fib(n - 1) + fib(n - 2)`` becomes
``$0 = (n - 1); $1 = fib($0); $2 = (n - 2); $3 = fib($2); $4 = ($1 + $3); return $4``.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import inspect
import operator
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pcbatch import callbacks
from pcbatch.dsl import FunctionBuilder
from pcbatch.errors import AutobatchSyntaxError, StaticValueError
from pcbatch.frontend import comprehensions, runtime, statics
from pcbatch.frontend.parse import ParsedFunction, local_names
from pcbatch.ir.nodes import SourceLoc
from pcbatch.ir.setitem import FULL_SLICE, SetItem, StaticSlice
from pcbatch.passes import shape_branches

#: what `Translator.constant_of` returns for a local or an unknown name
_NOT_CONSTANT = object()

#: the truth of an ``if`` test decided by shapes (`Translator.condition`)
_SHAPE_TRUTH = "__pcb_shape_truth"
#: a per-example value's attributes that are one for the whole batch: its shape, and its
#: dtype (a variable holds one dtype: ``v.dtype.kind == "f"`` is decided as a shape is)
_SHAPE_ATTRIBUTES = frozenset({"ndim", "shape", "size", "dtype"})
#: functions of a per-example value that give its shape
_SHAPE_FUNCTIONS = (len, np.ndim, np.shape, np.size)
#: functions of dtypes a test decided by shapes and dtypes may call (on ``v.dtype``)
_DTYPE_FUNCTIONS = (np.issubdtype, np.dtype, np.iinfo, np.finfo, np.can_cast, np.promote_types)
#: the frontend's own per-example forms a shape test may hold (`_Hoister`)
_PURE_FORMS = frozenset({_SHAPE_TRUTH, "__pcb_and", "__pcb_or", "__pcb_not", "__pcb_select"})
_SHAPE_TEST_NODES = (
    ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.Compare,
    ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.cmpop, ast.boolop, ast.unaryop, ast.operator,
    ast.expr_context,
)

_SAFE_UNARY = (ast.Not, ast.USub, ast.UAdd, ast.Invert)
#: never raise on numbers (integers wrap as they do wherever they are computed); ``&``,
#: ``|``, ``^`` and ``~`` take integers and bools only, whatever their values
_SAFE_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)
#: never raise when the divisor is a nonzero number literal
_SAFE_BY_LITERAL = (ast.Mod, ast.FloorDiv)


def _safe_arithmetic(node: ast.BinOp) -> bool:
    if isinstance(node.op, _SAFE_BINARY):
        return True
    right = node.right
    return (
        isinstance(node.op, _SAFE_BY_LITERAL)
        and isinstance(right, ast.Constant)
        and isinstance(right.value, (int, float))
        and right.value != 0
    )


def _cannot_fail(node: ast.AST, bound: Callable[[str], bool]) -> bool:
    """Whether evaluating ``node`` for a thread that Python would not evaluate it for is
    harmless: names assigned on every path to here (``bound``: a read of a local that
    may be unbound raises UnboundLocalError), constants, attributes (a namedtuple's
    field), and comparisons, ``not``, signs, ``+``, ``-``, ``*``, bitwise ``&``, ``|``,
    ``^``, ``~``, ``%`` or ``//`` by a nonzero literal, ``and``/``or`` and conditional
    expressions of those.
    Other arithmetic is not: ``2 ** n``, ``a // b``, ``a % b``, ``a / b`` and shifts
    raise for some operands, and a call or an index may fail or run batched code."""
    if isinstance(node, ast.Name):
        return bound(node.id)
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Attribute):
        # a namedtuple's field, an array's .T or .shape: the type decides, not the value
        return _cannot_fail(node.value, bound)
    if isinstance(node, ast.BinOp):
        return (
            _safe_arithmetic(node)
            and _cannot_fail(node.left, bound)
            and _cannot_fail(node.right, bound)
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, _SAFE_UNARY) and _cannot_fail(node.operand, bound)
    if isinstance(node, ast.Compare):
        return all(_cannot_fail(n, bound) for n in (node.left, *node.comparators))
    if isinstance(node, ast.BoolOp):
        return all(_cannot_fail(n, bound) for n in node.values)
    if isinstance(node, ast.IfExp):
        return all(_cannot_fail(n, bound) for n in (node.test, node.body, node.orelse))
    return False


def _is_trivially_pure(node: ast.AST, bound: Callable[[str], bool]) -> bool:
    """Whether a short-circuit (``and``/``or``, ``x if c else y``, a chained comparison)
    may run as one eager per-example selection: every operand that Python evaluates for
    only some threads `_cannot_fail`. The operand Python always evaluates (the first of
    ``and``/``or``, the test of a conditional, the left of a chain) may be anything; a
    batched call in it is hoisted out before the selection. (A chain's eager form reads
    its middle operands twice, so they must not fail either: ``0 < rand() < 0.5`` must
    draw once.)"""
    if isinstance(node, ast.BoolOp):
        return all(_cannot_fail(n, bound) for n in node.values[1:])
    if isinstance(node, ast.IfExp):
        return _cannot_fail(node.body, bound) and _cannot_fail(node.orelse, bound)
    if isinstance(node, ast.Compare):
        return all(_cannot_fail(n, bound) for n in node.comparators)
    return _cannot_fail(node, bound)


def _label(node: ast.AST) -> str:
    """A primitive's name in messages and profiles: the user's expression as written
    (before `_Hoister` rewrites it), or what `desugar` says a node it made stands for."""
    text = getattr(node, "_pcbatch_text", None) or ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
_BIG_INT_ADVICE = (
    "{} is {}, past int64's range: a batched variable holds a Python int as an int64 "
    "and this one would wrap. Write it as a float (2.0 ** 63, 9.3e18) if that is what "
    "it meets, or as np.uint64(...) for an unsigned value below 2 ** 64, or use it "
    "inside the expression that needs it (x + 2 ** 70) rather than through a variable"
)


class Translator:
    """Emits one function's body into a `FunctionBuilder`."""

    def __init__(
        self,
        parsed: ParsedFunction,
        builder: FunctionBuilder,
        resolve_batched: Callable[[str], Any],
        specialised: statics.Specialised = None,
        is_main: bool = False,
    ):
        self.parsed = parsed
        self.fb = builder
        self.fb.strict = False  # Python allows reads of possibly-unbound locals
        self.locals = local_names(parsed.tree)
        self.resolve_batched = resolve_batched
        self.namespace = {**parsed.globals, **parsed.closure, **runtime.NAMESPACE}
        self.temps = 0
        self.specialised = specialised
        # this function's static parameters still holding their call's value: a name
        # leaves when straight-line code rebinds it (`pcbatch.frontend.statics`)
        self.statics: dict[str, Any] = (
            dict(specialised[1]) if specialised and specialised[0] == parsed.name else {}
        )
        self.folder = statics.Folder(self.statics, self.static_lookup)
        # how many loops and per-example branches enclose the statement being compiled,
        # and whether one compiled before it may have returned for some examples: then
        # not every example reaches it
        self.dynamic_depth = 0
        self.some_returned = False
        # called from Python (not only from other batched functions): every example of
        # the call runs its top level
        self.is_main = is_main

    # -- helpers ---------------------------------------------------------------
    def loc(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(self.parsed.filename, self.parsed.name, getattr(node, "lineno", 0))

    def fresh(self) -> str:
        self.temps += 1
        return f"${self.temps}"

    def batched_callee(self, node: ast.AST):
        """The batched function ``node`` calls, or None for any other expression.

        A batched function of another Context, or one reached through an attribute,
        is an error at the call: compiled as a plain call it would run inside a
        primitive, on the whole batch, as a batched run of its own.
        """
        if not isinstance(node, ast.Call):
            return None
        value = self.constant_of(node.func)
        own = self.resolve_batched(value)
        if own is None and getattr(type(value), "is_batched_function", False) is not True:
            return None
        written = ast.unparse(node.func)
        if own is None:
            raise self.error(
                node,
                f"{written!r} is a batched function of another pcbatch.Context; a batched "
                "function can call only batched functions of its own Context: decorate "
                f"both with the same ctx.batch, or call the plain {written}.python_function",
            )
        if not isinstance(node.func, ast.Name):
            raise self.error(
                node,
                f"call the batched function {own.name!r} by its own name (import it: "
                f"from ... import {own.name}), not as {written!r}",
            )
        return own

    def constant_of(self, node: ast.expr) -> Any:
        """The value a global or closure name (or a module path such as ``pcbatch.sync``)
        has here; `_NOT_CONSTANT` for locals and for anything else."""
        path, value = [], node
        while isinstance(value, ast.Attribute):
            path.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id in self.locals:
            return _NOT_CONSTANT
        value = self.namespace.get(value.id, _NOT_CONSTANT)
        for attr in reversed(path):
            value = getattr(value, attr, _NOT_CONSTANT)
        return value

    def builtin_form(self, node: ast.Call) -> str | None:
        """The per-example form (`runtime.BUILTIN_FORMS`) of a call to Python's float, int,
        bool, min or max by its builtin name, with positional arguments only; else None."""
        func = node.func
        if not isinstance(func, ast.Name) or func.id in self.locals or func.id in self.namespace:
            return None
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        value = getattr(builtins, func.id, None)
        return next((form for b, form in runtime.BUILTIN_FORMS.items() if b is value), None)

    def numpy_form(self, node: ast.Call) -> str | None:
        """The per-example form (`runtime.NUMPY_FORMS`) of ``np.array(v)`` or
        ``np.asarray(v)`` (by any name they have here), else None."""
        value = self.constant_of(node.func)
        return next((form for f, form in runtime.NUMPY_FORMS.items() if f is value), None)

    def reject_global_random(self) -> None:
        """Random draws from a global generator cannot be per example (see `_draws_globally`)."""
        for node in ast.walk(self.parsed.tree):
            if not isinstance(node, ast.Call):
                continue
            function = self.constant_of(node.func)
            if function is not _NOT_CONSTANT and _draws_globally(function):
                raise self.error(node, _GLOBAL_RANDOM_ADVICE.format(ast.unparse(node.func)))

    def calls(self, node: ast.expr, function: Callable) -> bool:
        """Whether ``node`` calls ``function`` (by any name or module path it has here)."""
        return isinstance(node, ast.Call) and self.constant_of(node.func) is function

    def error(self, node: ast.AST, message: str, kind: type = AutobatchSyntaxError):
        return self.parsed.syntax_error(node, message, kind)

    # -- values known at compile time (`pcbatch.frontend.statics`) ------------------
    def static_lookup(self, node: ast.expr) -> Any:
        """A static parameter's value, or a global's (through modules only)."""
        if isinstance(node, ast.Name) and node.id in self.statics:
            return self.statics[node.id]
        value = statics.module_path_value(node, self.constant_of)
        if value is _NOT_CONSTANT and isinstance(node, ast.Name) and node.id not in self.locals:
            value = getattr(builtins, node.id, _NOT_CONSTANT)  # not shadowed: the builtin
        return statics.UNKNOWN if value is _NOT_CONSTANT else value

    def known(self, node: ast.expr) -> Any:
        """``node``'s value if fixed at compile time, else `statics.UNKNOWN`."""
        return statics.evaluate(node, self.static_lookup)

    def known_number(self, node: ast.expr) -> Any:
        """The Python number an expression of literals and global constants has (``-1``,
        ``2 ** 9``, ``LIMIT``), else None. As a literal, type inference checks that it
        fits the dtype it meets (`infer_types.check_literals`): ``m = -1`` where ``m`` is
        also uint8 was 255, silently."""
        if not isinstance(node, (ast.UnaryOp, ast.BinOp, ast.Name, ast.Attribute)) or (
            _free_locals(node, self.locals)
        ):
            return None
        value = self.known(node)
        return value if type(value) in (bool, int, float, complex) else None

    def fold(self, node: ast.expr) -> ast.expr:
        """``node`` with what is known at compile time worked out (`statics.Folder`)."""
        if not statics.may_fold(node, self.statics):
            return node
        folded = self.folder.fold(node)
        held = statics.held_static(folded)
        if held is not None:
            name = held.pcbatch_static  # type: ignore[attr-defined]
            advice = _static_value_advice(self.parsed.name, name, self.statics[name])
            raise self.error(held, advice, StaticValueError)
        return folded

    def no_static_writes(self, stmt: ast.stmt, where: str) -> None:
        """A static parameter rebound inside a loop or a per-example branch would be None
        (or text) for some examples and a number for others: refused at the line."""
        write = statics.first_write(stmt, self.statics)
        if write is not None:
            value = self.statics[write.id]
            raise self.error(
                write,
                f"{write.id!r} is {value!r} in this call (None and text arguments are fixed "
                f"when {self.parsed.name} is called) and cannot be rebound {where}: rebind "
                f"it before, in straight-line code ({write.id} = ... if {write.id} is None "
                f"else {write.id}), or use another name",
            )

    # -- statements ------------------------------------------------------------
    def function_body(self) -> None:
        # the locals every path to the statement being compiled has assigned (Python's
        # definite assignment): an operand Python skips for some examples may be read
        # for all of them by an eager selection only if it names no other local
        arguments = self.parsed.tree.args
        self.assigned = {
            a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
        }

        self.reject_global_random()
        self.body(self.parsed.tree.body)

    def surely_bound(self, name: str) -> bool:
        """Whether reading ``name`` here cannot raise UnboundLocalError."""
        return name not in self.locals or name in self.assigned

    def body(self, statements: list) -> bool:
        """Emits ``statements``; whether they end every path through them (a return,
        break or continue, or a branch known at compile time that does): what follows
        is dead code, never run by Python, and not compiled."""
        for stmt in statements:
            with self.fb.at(self.loc(stmt)):
                ends = getattr(self, f"stmt_{type(stmt).__name__}")(stmt)
            if not isinstance(stmt, _COMPOUND):
                self.assigned |= _stored_names(stmt)
            if self.statics and not isinstance(stmt, _COMPOUND):
                # straight-line code rebinding a static parameter: a per-example value
                # from here on (compound statements rebind in their own bodies)
                for name in list(self.statics):
                    if statics.first_write(stmt, {name: None}) is not None:
                        del self.statics[name]
            if ends or isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
                return True
        return False

    def stmt_Pass(self, stmt) -> None:
        pass

    def stmt_Expr(self, stmt: ast.Expr) -> None:
        if isinstance(stmt.value, ast.Constant):
            return  # a docstring or a bare constant does nothing
        if self.calls(stmt.value, runtime.sync):
            if stmt.value.args or stmt.value.keywords:
                raise self.error(stmt.value, "pcbatch.sync() takes no arguments")
            self.fb.sync()
            return
        if self.calls(stmt.value, callbacks.host_callback):
            self.host_callback(stmt.value)
            return
        self.value(stmt.value)

    def host_callback(self, call: ast.Call) -> None:
        """``pcbatch.host_callback(f, *values)``: one primitive calling ``f`` on the host,
        or nothing when ``f`` is None (see `pcbatch.callbacks`)."""
        args = call.args
        if call.keywords or not args or any(isinstance(a, ast.Starred) for a in args):
            raise self.error(call, "pcbatch.host_callback(f, *values) takes positional "
                             "arguments only: the function, then the values to pass it")
        function = self.constant_of(args[0])
        if function is _NOT_CONSTANT or not (function is None or callable(function)):
            raise self.error(args[0], "the function pcbatch.host_callback calls must be a "
                             "global or closure variable holding a function (or None)")
        if function is None:
            return  # switched off: no primitive at all
        if len(args) < 2:
            raise self.error(call, "pcbatch.host_callback needs at least one value to pass")
        values = [self.value(a) for a in args[1:]]
        op = callbacks.HostCallbackOp(function)
        self.fb.prim(op, *values, out=self.fresh(), name=op.__name__)

    def stmt_Assign(self, stmt: ast.Assign) -> None:
        if isinstance(stmt.targets[0], ast.Subscript):
            self.item_assign(stmt.targets[0], stmt.value)
            return
        first = _target_pattern(stmt.targets[0])
        value = stmt.value
        shared = getattr(stmt, "_pcbatch_shares", None)  # set by the fence
        if shared is not None:
            check = ast.Name(id="__pcb_unshared", ctx=ast.Load())
            args = [value, ast.Constant(shared)]
            if _converts_dtype(value):  # np.asarray(y, dtype): a copy unless the dtype stays
                args.append(value.args[0])
            value = ast.Call(func=check, args=args, keywords=[])
            value = ast.copy_location(value, stmt.value)
        self.value(value, out=first)
        for target in stmt.targets[1:]:
            self.copy(first, _target_pattern(target))

    def stmt_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        self.value(stmt.value, out=_target_pattern(stmt.target))

    def stmt_AugAssign(self, stmt: ast.AugAssign) -> None:
        if isinstance(stmt.target, ast.Subscript) and self.maybe_masked(stmt.target):
            self.augmented_item(stmt)
            return
        if isinstance(stmt.target, ast.Subscript):
            load = ast.copy_location(
                ast.Subscript(value=stmt.target.value, slice=stmt.target.slice, ctx=ast.Load()),
                stmt.target,
            )
            combined = ast.BinOp(left=load, op=stmt.op, right=stmt.value)
            self.item_assign(stmt.target, ast.copy_location(combined, stmt))
            return
        name = stmt.target.id
        combined = ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=stmt.op, right=stmt.value)
        self.value(ast.copy_location(combined, stmt), out=name)

    def maybe_masked(self, target: ast.Subscript) -> bool:
        """Whether ``target``'s index may be a boolean mask: one part, a slice whose bounds
        are per-example values, or an expression that is not a number known here."""
        if isinstance(target.slice, ast.Tuple):
            return False
        if isinstance(target.slice, ast.Slice):
            return not self.is_static(target.slice)
        known = self.known(target.slice)
        return known is statics.UNKNOWN or isinstance(known, np.ndarray)

    def augmented_item(self, stmt: ast.AugAssign) -> None:
        """``w[i] += x`` whose index may be a mask (``w[w < 0] += 1``, ``w[:n] *= 2``): the
        index evaluated once; `runtime.AugmentedItem` gives the item combined with ``x``,
        or for a mask the whole array combined, which the assignment writes where the mask
        holds (`pcbatch.passes.masked_items`)."""
        target = stmt.target
        part = target.slice
        if isinstance(part, ast.Slice):
            part = _slice_mask(target, part)
        index = self.value(part)
        operand = self.value(stmt.value)
        combine = runtime.AugmentedItem(type(stmt.op).__name__)
        name = target.value.id
        value = self.fb.prim(combine, name, index, operand, out=self.fresh(),
                             name="augmented_item", per_example=True)
        setitem = SetItem((None,), str(self.loc(target)), augmented=True)
        self.fb.prim(setitem, name, value, index, out=name, name="setitem")

    def item_assign(self, target: ast.Subscript, value: ast.expr) -> None:
        """``buf[i, :] = v`` as a `SetItem` primitive, which the machines run in place."""
        value_var = self.value(value)
        parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if len(parts) == 1 and isinstance(parts[0], ast.Slice) and not self.is_static(parts[0]):
            parts = [_slice_mask(target, parts[0])]  # w[:n] = x: through a mask
        index, index_vars = [], []
        for part in parts:
            if isinstance(part, ast.Slice):
                index.append(self.static_slice(part))
            else:
                index.append(None)
                index_vars.append(self.value(part))
        name = target.value.id
        setitem = SetItem(tuple(index), str(self.loc(target)))
        self.fb.prim(setitem, name, value_var, *index_vars, out=name, name="setitem")

    def is_static(self, part: ast.Slice) -> bool:
        """Whether the slice's bounds are known when compiling."""
        bounds = (part.lower, part.upper, part.step)
        return all(b is None or self.known(b) is not statics.UNKNOWN for b in bounds)

    def static_slice(self, part: ast.Slice) -> Any:
        """A slice of an item assignment, its bounds known (`fence.check_static_slice`)."""
        bounds = [None if b is None else self.known(b) for b in (part.lower, part.upper, part.step)]
        if bounds == [None, None, None]:
            return FULL_SLICE
        return StaticSlice(*(None if b is None else operator.index(b) for b in bounds))

    def stmt_Return(self, stmt: ast.Return) -> None:
        if self.dynamic_depth:
            self.some_returned = True
        value = self.fold(stmt.value)
        if isinstance(value, ast.IfExp) and not _is_trivially_pure(value, self.surely_bound):
            # `return a if c else f(x)` returns from each arm, so f(x) stays a tail call.
            with self.fb.if_(self.condition(value.test)):
                self.fb.return_(self.value(value.body))
            with self.fb.else_():
                self.fb.return_(self.value(value.orelse))
            return
        self.fb.return_(self.value(value))

    def stmt_If(self, stmt: ast.If) -> bool | None:
        test = self.known(stmt.test)
        if test is not statics.UNKNOWN:
            # the same for every example (a constant, a static parameter, a global
            # scalar): only the branch Python takes is compiled
            return self.body(stmt.body if test else stmt.orelse)
        self.no_static_writes(stmt, "inside an if on per-example values")
        cond = self.condition(stmt.test, by_shapes=self.reads_only_shapes(stmt.test))
        before = set(self.assigned)
        with self.fb.if_(cond), self.per_example_path():
            body_ends = self.body(stmt.body)
        after_body, self.assigned = self.assigned, set(before)
        else_ends = False
        if stmt.orelse:
            with self.fb.else_(), self.per_example_path():
                else_ends = self.body(stmt.orelse)
        # past the if: what every branch that gets there assigns (not one that returns)
        branches = ((after_body, body_ends), (self.assigned, else_ends))
        reaching = [assigned for assigned, ends in branches if not ends]
        self.assigned = before | set.intersection(*reaching) if reaching else before
        return None

    @contextlib.contextmanager
    def per_example_path(self) -> Iterator[None]:
        """Inside a loop or a branch on per-example values: reached by some examples."""
        self.dynamic_depth += 1
        try:
            yield
        finally:
            self.dynamic_depth -= 1

    def stmt_Raise(self, stmt: ast.Raise) -> bool:
        """``raise``, its exception made from the values known when compiling. Where
        every example reaches it (the batched function's straight-line code, or a branch
        decided when compiling: ``else: raise ValueError(f"unknown method {method!r}")``)
        the call raises it at once; elsewhere (a branch or loop on per-example values, a
        function another batched function calls) the examples that reach it fail with
        it (`runtime.RaiseCheck`). What follows on its path is dead code."""
        if stmt.exc is None:
            raise self.error(stmt, "a bare raise (re-raise) is not supported: there is no "
                             "exception being handled in a batched function")
        self.raise_where_reached(stmt, stmt.exc, "raise")
        return True

    def stmt_Assert(self, stmt: ast.Assert) -> bool | None:
        """``assert test, message``: on a value known when compiling nothing, or the
        AssertionError; on per-example values, the AssertionError for the examples whose
        test is false (``if not test: raise AssertionError(message)``)."""
        message = [stmt.msg] if stmt.msg is not None else []
        error = ast.copy_location(ast.Call(
            func=ast.Name(id="AssertionError", ctx=ast.Load()), args=message, keywords=[],
        ), stmt)
        test = self.known(stmt.test)
        if test is statics.UNKNOWN:
            failed = ast.UnaryOp(ast.Not(), copy.deepcopy(stmt.test))
            fail = ast.Raise(exc=error, cause=None)
            check = ast.If(test=failed, body=[fail], orelse=[])
            for node in (failed, fail, check):
                ast.copy_location(node, stmt)
            return self.stmt_If(ast.fix_missing_locations(check))
        if not test:
            self.raise_where_reached(stmt, error, "assert")
            return True
        return None

    def raise_where_reached(self, stmt: ast.stmt, exc: ast.expr, what: str) -> None:
        every_call = not (self.dynamic_depth or self.some_returned)
        if every_call and not self.is_main:
            # a function that raises whenever it is called has no result to type
            raise self.error(
                stmt, f"{what} on every path of a function called from another batched "
                "function is not supported (only the examples that call it would raise); "
                "raise in the caller's branch, or return a flag or a sentinel such as np.nan")
        error = self.exception_of(stmt, exc, what)
        if every_call:
            if hasattr(error, "add_note"):
                error.add_note(
                    f"raised by {self.parsed.name} at {self.parsed.filename}, line "
                    f"{stmt.lineno}, for every example of the call (pcbatch decided the "
                    "branch when compiling)")
            raise error
        # reached by some examples: those fail with it (after the run where compiled)
        check = runtime.RaiseCheck(error, str(self.loc(stmt)))
        reached = self.fb.const(True, out=self.fresh())
        self.fb.prim(check, reached, out=self.fresh(), name=check.__name__)
        self.fb.stop()

    def exception_of(self, stmt: ast.stmt, exc: ast.expr, what: str) -> BaseException:
        """The exception ``exc`` makes, from literals, globals and static arguments."""
        dynamic = [n.id for n in ast.walk(exc) if isinstance(n, ast.Name)
                   and n.id in self.locals and n.id not in self.statics]
        if dynamic:
            raise self.error(
                stmt, f"the exception this {what} raises reads {dynamic[0]!r}, a per-example "
                "value: make it from literals, globals and None or text arguments only")
        namespace = {**self.parsed.globals, **self.parsed.closure, **self.statics}
        code = compile(ast.fix_missing_locations(ast.Expression(copy.deepcopy(exc))),
                       self.parsed.filename, "eval")
        error = eval(code, namespace)  # noqa: S307 - the user's own expression
        if isinstance(error, type) and issubclass(error, BaseException):
            error = error()
        if not isinstance(error, BaseException):
            raise self.error(stmt, "exceptions must derive from BaseException")
        return error

    def stmt_While(self, stmt: ast.While) -> None:
        self.no_static_writes(stmt, "inside a loop")
        test = self.known(stmt.test)
        if test is not statics.UNKNOWN and not test:
            return  # the body never runs
        always = test is not statics.UNKNOWN
        before = set(self.assigned)
        with self.fb.loop(), self.per_example_path():
            if not always:
                self.fb.break_unless(self.condition(stmt.test))
            self.body(stmt.body)
        self.assigned = before  # the body may run no time, or stop at a break

    def stmt_For(self, stmt: ast.For) -> None:
        """``for i in range(...)``: the arguments evaluated once, before the loop (rebinding
        a bound variable in the body changes nothing); a counter of its own, a Python int
        per example (weak: ``uint8_x + i`` stays uint8), copied to ``i`` at each
        iteration's start (rebinding ``i`` in the body changes nothing either); after the
        loop ``i`` holds the last value it took."""
        self.no_static_writes(stmt, "inside a loop")
        args = stmt.iter.args
        start = self.value(args[0]) if len(args) > 1 else self.fb.const(0, out=self.fresh())
        stop = self.fb.prim(
            runtime.python_int, self.value(args[1] if len(args) > 1 else args[0]),
            out=self.fresh(), name="range_stop", per_example=True,
        )
        if len(args) == 3:
            step = self.value(args[2], out=self.fresh())
            if not _is_number_literal(args[2]):
                check = runtime.RangeStepCheck(str(self.loc(stmt.iter)))
                self.fb.prim(check, step, out=step, name="range_step_check")
        else:
            step = self.fb.const(1, out=self.fresh())
        counter = self.fb.prim(
            runtime.python_int, start, out=self.fresh(), name="range_start", per_example=True
        )
        with self.fb.loop(), self.per_example_path():
            more = self.fb.prim(
                _range_continues, counter, stop, step, out=self.fresh(), name="range_test"
            )
            self.fb.break_unless(more)
            self.fb.copy(counter, out=stmt.target.id)
            self.fb.prim(
                runtime.range_next, counter, step, out=counter, name="range_next",
                per_example=True,
            )
            before = set(self.assigned)
            self.assigned.add(stmt.target.id)
            self.body(stmt.body)
            self.assigned = before  # the body may run no time

    def stmt_Break(self, stmt) -> None:
        self.fb.break_()

    def stmt_Continue(self, stmt) -> None:
        self.fb.continue_()

    # -- expressions -----------------------------------------------------------
    def copy(self, source: Any, target: Any) -> None:
        if isinstance(source, str):
            self.fb.copy(source, out=[target] if isinstance(target, tuple) else target)
        else:
            self.fb.prim(_identity, *_flat(source), out=target, name="pack")

    def value(self, node: ast.expr, out: Any = None) -> Any:
        """Emits code computing ``node``; returns the local name (or pattern) holding it."""
        node = self.fold(node)
        with self.fb.at(self.loc(node)):
            if isinstance(node, ast.Name) and node.id in self.locals:
                if out is None:
                    return node.id
                self.copy(node.id, out)
                return out
            if self.batched_callee(node) is not None:
                return self.call(node, out)
            if isinstance(node, ast.Constant):
                return self.literal(node, node.value, out)
            number = self.known_number(node)
            if number is not None:  # -1, 2 ** 9, LIMIT: a literal, checked as one
                return self.literal(node, number, out)
            if isinstance(node, ast.IfExp) and _literal_arms(node):
                return self.short_circuit(node, out)  # a weak result: see _literal_arms
            pure = _is_trivially_pure(node, self.surely_bound)
            if isinstance(node, (ast.BoolOp, ast.IfExp)) and not pure:
                return self.short_circuit(node, out)
            if _is_chain(node) and not pure:
                return self.chain(node, out)
            residual = _Hoister(self).visit(copy.deepcopy(node))
            return self.primitive(residual, out, label=_label(node))

    def out(self, out: Any) -> Any:
        return self.fresh() if out is None else out

    def literal(self, node: ast.expr, value: Any, out: Any) -> Any:
        """``out = value`` for a number known when compiling. A variable holds a Python
        int as an int64 (NEP 50's weak int), so one past int64's range would wrap
        (``m = 2 ** 63; x + m`` gave -9.2e18 for float ``x``): refused at the line."""
        if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
            raise self.error(node, _BIG_INT_ADVICE.format(ast.unparse(node), value))
        return self.fb.const(value, out=self.out(out))

    def condition(self, test: ast.expr, by_shapes: bool = False) -> str:
        """A per-thread bool variable for an ``if``/``while`` test. One that reads
        per-example values only through their shapes is one primitive, marked: type
        inference decides it when compiling (`pcbatch.passes.shape_branches`)."""
        with self.fb.at(self.loc(test)):
            if by_shapes:  # shapes are Python ints: and/or/calls run as Python runs them
                truth = ast.Call(ast.Name(_SHAPE_TRUTH, ast.Load()), [copy.deepcopy(test)], [])
                return self.primitive(ast.copy_location(truth, test), self.fresh())
            return self.truth(self.value(test))

    def reads_only_shapes(self, test: ast.expr, names: frozenset | None = None) -> bool:
        """Whether ``test`` reads a per-example value (a local, or one of ``names``), and
        reads each one only through its shape or dtype (``v.ndim``, ``v.shape``, ``v.size``,
        ``len(v)``, ``np.ndim(v)``, ``np.shape(v)``, ``np.size(v)``, ``v.dtype``), with
        constants, arithmetic, comparisons, functions of dtypes and Python's boolean
        operators."""
        names = self.locals if names is None else names
        parents = {child: node for node in ast.walk(test) for child in ast.iter_child_nodes(node)}
        reads = False
        for node in ast.walk(test):
            if isinstance(node, ast.Name) and node.id in names:
                parent = parents.get(node)
                if not (
                    isinstance(parent, ast.Attribute) and parent.attr in _SHAPE_ATTRIBUTES
                    or isinstance(parent, ast.Call) and parent.args == [node]
                    and self.measures_shapes(parent.func)
                ):
                    return False
                reads = True
            elif isinstance(node, ast.Call):
                if node.keywords or not self.is_shape_function(node.func):
                    return False
            elif not isinstance(node, _SHAPE_TEST_NODES):
                return False
        return reads

    def is_shape_function(self, func: ast.expr) -> bool:
        """A function a shape test may call: one of `measures_shapes`, a function of
        dtypes (``np.issubdtype(v.dtype, np.floating)``), or the frontend's own boolean
        forms."""
        if isinstance(func, ast.Name) and func.id in _PURE_FORMS:
            return True
        value = self.function_named(func)
        return any(value is f for f in (*_SHAPE_FUNCTIONS, *_DTYPE_FUNCTIONS))

    def measures_shapes(self, func: ast.expr) -> bool:
        """``len``, ``np.ndim``, ``np.shape``, ``np.size``, by any name they have here."""
        value = self.function_named(func)
        return any(value is f for f in _SHAPE_FUNCTIONS)

    def function_named(self, func: ast.expr) -> Any:
        """The function ``func`` names, a constant of the module or a builtin."""
        value = self.constant_of(func)
        if value is _NOT_CONSTANT and isinstance(func, ast.Name) and func.id not in self.locals:
            value = getattr(builtins, func.id, _NOT_CONSTANT)
        return value

    def truth(self, variable: str) -> str:
        return self.fb.prim(
            runtime.truthy, variable, out=self.fresh(), name="truthy", per_example=True
        )

    def primitive(self, residual: ast.expr, out: Any, label: str | None = None) -> Any:
        params = _free_locals(residual, self.locals)
        lam = ast.Lambda(
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=p) for p in params],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            body=residual,
        )
        expression = ast.fix_missing_locations(ast.copy_location(ast.Expression(lam), residual))
        ast.copy_location(lam, residual)
        ast.fix_missing_locations(expression)
        code = compile(expression, self.parsed.filename, "eval")
        function = eval(code, self.namespace)  # noqa: S307 - the user's own expression
        declared = _declared_weak_results(residual, params, self.namespace)
        if declared is not None:
            function.weak_results = declared
        if _is_shape_truth(residual) and self.reads_only_shapes(residual, frozenset(params)):
            # still so after the hoisting: no input is a value computed before it
            setattr(function, shape_branches.MARK, True)
        if _operators_only(residual, frozenset(params)):
            # Raw batches aligned to one rank compute it as one example would: NumPy's
            # vectorize may skip its per-example wrappers (`batched_array.vectorize`).
            function.batch_rule = function
        return self.fb.prim(
            function, *params, out=self.out(out), name=label or _label(residual),
            per_example=True,
        )

    def call(self, node: ast.Call, out: Any) -> Any:
        callee = self.batched_callee(node)
        try:
            bound = callee.signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
        except TypeError as e:
            raise self.error(node, f"bad call to batched function {callee.name!r}: {e}") from None
        fixed = dict(self.specialised[1]) if (
            self.specialised and self.specialised[0] == callee.name) else {}
        args = []
        for name, param in callee.signature.parameters.items():
            if name in fixed:
                self.same_static(node, callee.name, name, bound.arguments.get(name), param,
                                 fixed[name])
            elif name in bound.arguments:
                argument = bound.arguments[name]
                if statics.is_static_value(self.known(argument)):
                    raise self.error(argument, _STATIC_TO_CALLEE.format(
                        callee=callee.name, name=name, value=self.known(argument)),
                        StaticValueError)
                args.append(self.value(argument))
            elif statics.is_static_value(param.default):
                raise self.error(
                    node,
                    f"{callee.name}() is called without {name!r}, whose default is "
                    f"{param.default!r}; None and text are no batched values (only the "
                    f"function called from Python is compiled for them): pass {name}=..., "
                    f"or give {name!r} a number or array default (a flag such as "
                    "use_x=False, or a value such as 0.0)",
                )
            elif param.default is not inspect.Parameter.empty:
                args.append(self.fb.const(_lists_as_arrays(param.default), out=self.fresh()))
        target = self.out(out)
        self.fb.call(callee.name, *args, out=[target])
        return target

    def same_static(self, node: ast.Call, callee: str, name: str, argument: Any,
                    param: inspect.Parameter, fixed: Any) -> None:
        """A call of the function compiled for ``name`` = ``fixed`` (recursion) must pass
        that same value: another would need another program."""
        value = param.default if argument is None else self.known(argument)
        if value is statics.UNKNOWN or type(value) is not type(fixed) or value != fixed:
            shown = "a per-example value" if value is statics.UNKNOWN else repr(value)
            raise self.error(
                node,
                f"this run of {callee} is compiled for {name}={fixed!r} (None and text "
                f"arguments are fixed when {callee} is called from Python); this call "
                f"passes {shown}: pass {name}={name} (the same value), or give {name} a "
                "number flag",
            )

    def batched_primitive_call(self, node: ast.Call) -> str:
        """A call of a helper marked `pcbatch.batched_primitive`: its own primitive, given
        the whole batch of the threads at this line (the seed's primitive contract)."""
        helper = self.constant_of(node.func)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, f"{helper.__name__}, a batched primitive, takes "
                             "positional arguments only (no keywords, no *args)")
        args = [self.value(a) for a in node.args]
        return self.fb.prim(helper, *args, out=self.fresh(), name=helper.__name__)

    def short_circuit(self, node: ast.expr, out: Any) -> Any:
        """``and``/``or``/conditional expression as control flow into one result variable,
        so each operand runs only for the threads that Python evaluates it for."""
        result = out if self.may_write_early(node, out) else self.fresh()
        if isinstance(node, ast.IfExp):
            cond = self.condition(node.test, by_shapes=self.reads_only_shapes(node.test))
            with self.fb.if_(cond):
                self.value(node.body, out=result)
            with self.fb.else_():
                self.value(node.orelse, out=result)
        else:
            # Python's value: the first operand that decides, not a bool.
            self.value(node.values[0], out=result)
            for operand in node.values[1:]:
                helper = runtime.logical_not if isinstance(node.op, ast.Or) else runtime.truthy
                test = self.fb.prim(
                    helper, result, out=self.fresh(), name=helper.__name__, per_example=True
                )
                with self.fb.if_(test):
                    self.value(operand, out=result)
        return self.finish(result, out)

    def may_write_early(self, node: ast.expr, out: Any) -> bool:
        """Whether the short-circuit may build its result in ``out`` itself: ``out`` is one
        variable that no operand after the first reads (``n = 0 or g(n)`` must not
        overwrite ``n`` before ``g(n)`` reads it)."""
        if not isinstance(out, str):
            return False
        if isinstance(node, ast.IfExp):
            return True  # the test is read first, then exactly one arm writes
        later = node.values[1:]
        return not any(isinstance(n, ast.Name) and n.id == out for v in later for n in ast.walk(v))

    def finish(self, result: str, out: Any) -> Any:
        if out is not None and out != result:
            self.copy(result, out)
            return out
        return result

    def chain(self, node: ast.Compare, out: Any) -> Any:
        """``a < b < c`` as Python runs it: ``b`` evaluated once, and ``c`` (and the second
        comparison) only for the threads where ``a < b`` held; the value is the first
        false comparison's, else the last one's."""
        result = self.fresh()
        left = self.operand(node.left)
        pairs = list(zip(node.ops, node.comparators))
        self.chain_from(left, pairs, result, node)
        return self.finish(result, out)

    def chain_from(self, left: ast.expr, pairs: list, result: str, node: ast.Compare) -> None:
        (op, right), rest = pairs[0], pairs[1:]
        right = self.operand(right)
        compare = ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), node)
        self.primitive(compare, result)
        if rest:
            with self.fb.if_(self.truth(result)):
                self.chain_from(right, rest, result, node)

    def operand(self, node: ast.expr) -> ast.expr:
        """``node`` evaluated now: itself if a constant or a name, else a temporary's name."""
        if isinstance(node, ast.Constant) or (
            isinstance(node, ast.Name) and node.id in self.locals
        ):
            return node
        return ast.copy_location(ast.Name(id=self.value(node, out=self.fresh()), ctx=ast.Load()),
                                 node)


def _is_shape_truth(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id == _SHAPE_TRUTH
    )


def _is_empty_check(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == comprehensions.EMPTY_CHECK


#: Python's comparison of two tuples whose common items are all equal: by their lengths
_COMPARE_LENGTHS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
                    ast.GtE: operator.ge}


def _compares_tuples(node: ast.Compare) -> bool:
    """``(a, b) < (c, d)`` (an order or equality test of two tuple displays)."""
    sides = (node.left, node.comparators[0])
    return (
        isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq))
        and all(isinstance(side, ast.Tuple) for side in sides)
        and not any(isinstance(e, ast.Starred) for side in sides for e in side.elts)  # type: ignore[attr-defined]
    )


class _Hoister(ast.NodeTransformer):
    """Replaces batched calls and real short-circuits by temporaries, in evaluation order,
    and Python's boolean operators by their per-example forms."""

    def __init__(self, translator: Translator):
        self.t = translator

    def _temp(self, name: str, like: ast.AST) -> ast.Name:
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), like)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if self.t.batched_callee(node) is not None:
            return self._temp(self.t.call(node, None), node)
        if runtime.is_batched_primitive(self.t.constant_of(node.func)):
            return self._temp(self.t.batched_primitive_call(node), node)
        plain = not any(isinstance(a, ast.Starred) for a in node.args) and not node.keywords
        power_call = self._is_builtin(node, "pow") or self.t.constant_of(node.func) is np.power
        if power_call and len(node.args) == 2 and plain:
            # pow(a, b), np.power(a, b) are a ** b: the same guard (`visit_BinOp`)
            power = ast.BinOp(left=node.args[0], op=ast.Pow(), right=node.args[1])
            return self.visit_BinOp(ast.copy_location(power, node))
        if _is_empty_check(node):
            return self._temp(self._empty_check(node), node)
        self._list_as_array(node)
        form = self.t.builtin_form(node) or self.t.numpy_form(node)
        self._guard_int_conversion(node, form)
        node = self.generic_visit(node)
        if form is not None:
            node.func = ast.copy_location(ast.Name(id=form, ctx=ast.Load()), node.func)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        """``COEF[i]``: the array is lifted into the index's library first (`runtime.lift`:
        a constant NumPy array cannot take a JAX or TensorFlow value as its index)."""
        node = self.generic_visit(node)
        names = sorted({n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)})
        if not isinstance(node.ctx, ast.Load) or not names:
            return node
        parts = [ast.Name(id=name, ctx=ast.Load()) for name in names]
        lift = ast.Name(id="__pcb_lift", ctx=ast.Load())
        node.value = ast.copy_location(
            ast.Call(func=lift, args=[node.value, *parts], keywords=[]), node.value
        )
        return node

    def _list_as_array(self, node: ast.Call) -> None:
        """``np.mean([x, 1.0])``: a list (or tuple) of per-example values given to a NumPy
        function that reads it as one array is made that array first (`runtime.to_asarray`,
        as ``np.array([a, b])``), as NumPy does; NumPy's dispatch does not look inside a
        list, so JAX's and TensorFlow's values failed there."""
        first = node.args[0] if node.args else None
        if (
            not isinstance(first, (ast.List, ast.Tuple))
            or not any(self.t.constant_of(node.func) is f for f in _READ_AS_ONE_ARRAY)
            or not _free_locals(first, self.t.locals)
        ):
            return
        convert = ast.Name(id="__pcb_asarray", ctx=ast.Load())
        node.args[0] = ast.copy_location(ast.Call(func=convert, args=[first], keywords=[]), first)

    def _empty_check(self, node: ast.Call) -> str:
        """``max``/``min`` of a comprehension with no item (`comprehensions`): Python's
        ValueError for those examples, at the call's line."""
        seen, builtin = node.args
        check = runtime.EmptyReductionCheck(builtin.value, str(self.t.loc(node)))
        return self.t.fb.prim(check, self.t.value(seen), out=self.t.fresh(), name=check.__name__)

    def _guard_int_conversion(self, node: ast.Call, form: str | None) -> None:
        """``int(x)``, ``round(x)`` of a per-example value: ``x`` computed first, then
        checked finite (`runtime.IntConversionGuard`), as Python raises for nan and inf."""
        name = "int" if form == "__pcb_int" else "round" if self._is_round(node) else None
        if name is None or len(node.args) != 1 or not _free_locals(node.args[0], self.t.locals):
            return
        value = self.t.value(node.args[0])
        guard = runtime.IntConversionGuard(name, str(self.t.loc(node)))
        checked = self.t.fb.prim(guard, value, out=self.t.fresh(), name=guard.__name__)
        node.args[0] = self._temp(checked, node.args[0])

    def _is_round(self, node: ast.Call) -> bool:
        return self._is_builtin(node, "round")

    def _is_builtin(self, node: ast.Call, name: str) -> bool:
        """A call of the builtin ``name`` (not shadowed), without keywords."""
        func = node.func
        return (
            isinstance(func, ast.Name) and func.id == name and not node.keywords
            and func.id not in self.t.locals and func.id not in self.t.namespace
        )

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        """``base ** exponent`` of per-example values: both computed first, then checked
        (`runtime.IntPowerGuard`: integers to negative powers raise)."""
        if not isinstance(node.op, ast.Pow) or not _free_locals(node, self.t.locals):
            return self.generic_visit(node)
        base = self.t.value(node.left)
        exponent = self.t.value(node.right)
        guard = runtime.IntPowerGuard(str(self.t.loc(node)))
        checked = self.t.fb.prim(guard, base, exponent, out=self.t.fresh(), name=guard.__name__)
        left = self._temp(base, node.left) if isinstance(base, str) else node.left
        power = ast.Name(id="__pcb_checked_power", ctx=ast.Load())
        call = ast.Call(func=power, args=[left, self._temp(checked, node.right)], keywords=[])
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        if not _is_trivially_pure(node, self.t.surely_bound):
            return self._temp(self.t.short_circuit(node, None), node)
        node = self.generic_visit(node)
        helper = "__pcb_and" if isinstance(node.op, ast.And) else "__pcb_or"
        result = node.values[0]
        for operand in node.values[1:]:
            result = ast.copy_location(
                ast.Call(
                    func=ast.Name(id=helper, ctx=ast.Load()), args=[result, operand], keywords=[]
                ),
                node,
            )
        return result

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        if not _is_trivially_pure(node, self.t.surely_bound) or self.t.reads_only_shapes(
            node.test
        ):  # on shapes: the side Python does not run is not compiled either
            return self._temp(self.t.short_circuit(node, None), node)
        node = self.generic_visit(node)
        call = ast.Call(
            func=ast.Name(id="__pcb_select", ctx=ast.Load()),
            args=[node.test, node.body, node.orelse],
            keywords=[],
        )
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if len(node.ops) == 1 and _is_membership(node):
            # ``n in (1, 2, 3)``: Python's ``==`` with each item, one bool per example;
            # ``x in v`` of an array: NumPy's ``(v == x).any()``
            node = self.generic_visit(node)
            helper = "__pcb_in" if isinstance(node.ops[0], ast.In) else "__pcb_not_in"
            call = ast.Call(
                func=ast.Name(id=helper, ctx=ast.Load()),
                args=[node.left, node.comparators[0]], keywords=[],
            )
            return ast.copy_location(call, node)
        if len(node.ops) == 1 and _compares_with_none(node):
            # ``v == None``: Python's answer is False (elementwise for an array), which
            # JAX's and TensorFlow's ``==`` refuse to compute
            node = self.generic_visit(node)
            left, right = node.left, node.comparators[0]
            operand = right if _is_none_constant(left) else left
            helper = "__pcb_eq_none" if isinstance(node.ops[0], ast.Eq) else "__pcb_ne_none"
            call = ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=[operand], keywords=[])
            return ast.copy_location(call, node)
        if len(node.ops) == 1 and _compares_tuples(node):
            return self.visit(self._tuple_comparison(node))
        if len(node.ops) == 1:
            return self.generic_visit(node)
        if not _is_trivially_pure(node, self.t.surely_bound):
            return self._temp(self.t.chain(node, None), node)
        node = self.generic_visit(node)
        pairs, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            pairs.append(
                ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), node)
            )
            left = right
        return self.visit_BoolOp(ast.copy_location(ast.BoolOp(op=ast.And(), values=pairs), node))

    def _tuple_comparison(self, node: ast.Compare) -> ast.expr:
        """``(a, b) < (c, d)`` as Python compares tuples: the first items that differ
        decide (``a < c if a != c else b < d``), else the lengths; ``==`` item by item.
        Each item is computed once, first, in order (as Python builds both tuples); the
        per-example value of a tuple comparison was Python's truth of a batch: refused on
        JAX and TensorFlow, one example at a time on NumPy and Torch."""
        op = node.ops[0]
        left = [self._item_value(e) for e in node.left.elts]  # type: ignore[attr-defined]
        right = [self._item_value(e) for e in node.comparators[0].elts]  # type: ignore[attr-defined]

        def compare(a: ast.expr, o: ast.cmpop, b: ast.expr) -> ast.expr:
            return ast.copy_location(ast.Compare(left=a, ops=[o], comparators=[b]), node)

        pairs = list(zip(left, right))
        if isinstance(op, (ast.Eq, ast.NotEq)):
            equal: ast.expr = ast.Constant(len(left) == len(right))
            if len(left) == len(right) and pairs:
                equal = ast.BoolOp(op=ast.And(), values=[compare(a, ast.Eq(), b) for a, b in pairs])
            result = equal if isinstance(op, ast.Eq) else ast.UnaryOp(op=ast.Not(), operand=equal)
            return ast.fix_missing_locations(ast.copy_location(result, node))
        decided: ast.expr = ast.Constant(_COMPARE_LENGTHS[type(op)](len(left), len(right)))
        for a, b in reversed(pairs):
            decided = ast.IfExp(test=compare(a, ast.NotEq(), b), body=compare(a, op, b),
                                orelse=decided)
        return ast.fix_missing_locations(ast.copy_location(decided, node))

    def _item_value(self, item: ast.expr) -> ast.expr:
        """A tuple item as a name or constant, computed into a temporary first where it
        might fail or cost (a call, an index)."""
        if _cannot_fail(item, self.t.surely_bound):
            return item
        value = self.t.value(item)
        return self._temp(value, item) if isinstance(value, str) else item

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            call = ast.Call(
                func=ast.Name(id="__pcb_not", ctx=ast.Load()), args=[node.operand], keywords=[]
            )
            return ast.copy_location(call, node)
        return node

    # Nested scopes run inside the primitive as ordinary Python.
    def visit_Lambda(self, node):
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


_STATIC_TO_CALLEE = (
    "passes {name}={value!r} to the batched function {callee}: None and text are no batched "
    "values (only the function called from Python is compiled for its None and text "
    "arguments); pass a number flag instead (such as {name}=0), or call a plain helper"
)

#: statements with bodies of their own
_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)


def _static_value_advice(function: str, name: str, value: Any) -> str:
    return (
        f"{name!r} is {value!r} in this call: None and text arguments are fixed when "
        f"{function} is called, so they can be tested (if {name} is None:, if {name} == "
        f"'...':) or passed to plain helpers, but not held as a per-example value "
        f"(assigned, returned, computed with): replace it first ({name} = 1.0 if {name} is "
        f"None else {name}), or pass a number"
    )


_GLOBAL_RANDOM_ADVICE = (
    "{} uses a random generator with hidden state: batched, it would be one "
    "draw for all examples (NumPy) or a constant fixed when the program compiles (JAX, "
    "TensorFlow). Pass the random numbers in as a batched argument (one row per "
    "example), or pass a per-example seed and draw with "
    "pcbatch.mcmc.random.uniform(seed, example, draw, tag, index, dtype) or "
    "pcbatch.mcmc.random.normal(seed, example, draw, tag, size, dtype) (counter-based: "
    "the numbers depend only on their arguments)"
)

#: TensorFlow modules whose functions draw from (or seed) a global or stateful generator
_TF_STATEFUL_RANDOM = ("random_ops", "stateful_random_ops", "candidate_sampling_ops",
                       "random_seed")


def _draws_globally(function: Any) -> bool:
    """Whether ``function`` draws from (or seeds, or makes) a generator with hidden state:
    Python's `random`, `numpy.random` (module functions, RandomState, default_rng and
    Generator methods), TensorFlow's stateful ``tf.random`` ops. Key-based draws
    (``jax.random``, ``tf.random.stateless_*``) are pure functions and pass."""
    owner = getattr(function, "__self__", None)
    if isinstance(owner, (random.Random, np.random.RandomState, np.random.Generator)):
        return True
    module = str(getattr(function, "__module__", None) or "")
    if module == "random" or module == "numpy.random" or module.startswith("numpy.random."):
        return True
    if module.startswith("tensorflow."):
        last = module.rsplit(".", 1)[-1]
        return last in _TF_STATEFUL_RANDOM or type(owner).__name__ == "Generator"
    return False


def _stored_names(stmt: ast.stmt) -> set:
    """The names a simple statement binds (``x = ...``, ``a, b = ...``, ``x += ...``)."""
    targets = getattr(stmt, "targets", None) or [getattr(stmt, "target", None)]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
        return set()  # ``x: int`` binds nothing
    return {
        node.id
        for target in targets if target is not None
        for node in ast.walk(target)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }


def _is_membership(node: ast.Compare) -> bool:
    """``x in (a, b)``, ``x not in v``: a membership test (`runtime.contains`)."""
    return isinstance(node.ops[0], (ast.In, ast.NotIn))


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (bool, int, float, complex)


def _literal_arms(node: ast.IfExp) -> bool:
    """``1 if c else 2.5``: each example's value is a Python scalar (weak, NEP 50), which
    a variable keeps only if each arm assigns its literal (control flow, not a select)."""
    return _is_literal(node.body) and _is_literal(node.orelse)


def _is_chain(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and len(node.ops) > 1


def _converts_dtype(node: ast.expr) -> bool:
    """``np.asarray(y, dtype)`` or ``np.asarray(y, dtype=...)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "asarray"
        and bool(node.args)
        and (len(node.args) > 1 or any(k.arg == "dtype" for k in node.keywords))
    )


def _target_pattern(target: ast.expr) -> Any:
    """The names an assignment target binds; a name bound twice (``_, _ = ...``) keeps
    only its last binding, as in Python, the earlier ones going to throwaway temporaries."""
    pattern = _names_of(target)
    leaves = _flat(pattern)
    last = {name: i for i, name in enumerate(leaves)}
    counter = iter(range(len(leaves)))

    def dedupe(p):
        if isinstance(p, str):
            i = next(counter)
            return p if last[p] == i else f"$dup{i}"
        return tuple(dedupe(x) for x in p)

    return dedupe(pattern)


def _names_of(target: ast.expr) -> Any:
    if isinstance(target, ast.Name):
        return target.id
    return tuple(_names_of(t) for t in target.elts)


def _flat(pattern: Any) -> list:
    if isinstance(pattern, str):
        return [pattern]
    return [leaf for p in pattern for leaf in _flat(p)]


def _identity(*values):
    return values[0] if len(values) == 1 else tuple(values)


#: Operators whose NumPy ufunc on batches of one rank is the per-example operation
#: (``**`` is left out: NumPy's ndarray power takes shortcuts for some exponents).
_ELEMENTWISE_OPERATORS = (
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
    ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift,
    ast.USub, ast.UAdd, ast.Invert,
    ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq,
)


def _declared_weak_results(residual: ast.expr, params, namespace: dict):
    """The ``weak_results`` a callee declares (which of its results are Python scalars
    per example), where ``residual`` is one call of it: type inference then need not run
    it on a dummy example to find out (`pcbatch.passes.infer_types.with_weak_results`),
    which for a JAX function compiles each of its operations eagerly (NUTS's gradient:
    about a second of a first call)."""
    if not isinstance(residual, ast.Call) or not isinstance(residual.func, ast.Name):
        return None
    if residual.func.id in params:
        return None
    return getattr(namespace.get(residual.func.id), "weak_results", None)


def _operators_only(node: ast.expr, params: frozenset) -> bool:
    """Whether ``node`` is built of arithmetic and single comparisons over the primitive's
    parameters and number literals only: no calls, attributes, globals or chains, so on
    arrays of one rank with the batch in front it computes each example's value."""
    if isinstance(node, ast.Name):
        return node.id in params
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float, bool)
    if isinstance(node, ast.BinOp):
        return (isinstance(node.op, _ELEMENTWISE_OPERATORS)
                and _operators_only(node.left, params) and _operators_only(node.right, params))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, _ELEMENTWISE_OPERATORS) and _operators_only(node.operand, params)
    if isinstance(node, ast.Compare):
        return (len(node.ops) == 1 and isinstance(node.ops[0], _ELEMENTWISE_OPERATORS)
                and _operators_only(node.left, params)
                and _operators_only(node.comparators[0], params))
    return False


#: NumPy functions whose first argument is read as one array (np.asarray of it)
_READ_AS_ONE_ARRAY = (
    np.mean, np.sum, np.prod, np.max, np.min, np.amax, np.amin, np.std, np.var,
    np.median, np.any, np.all, np.argmax, np.argmin, np.sort, np.cumsum, np.average,
    np.ptp, np.linalg.norm,
)


def _is_none_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _compares_with_none(node: ast.Compare) -> bool:
    """``v == None``, ``None != v`` (one side the literal None, the other not)."""
    sides = (node.left, node.comparators[0])
    return isinstance(node.ops[0], (ast.Eq, ast.NotEq)) and sum(map(_is_none_constant, sides)) == 1


def _free_locals(node: ast.AST, locals_: frozenset) -> list:
    seen = []
    for n in ast.walk(node):
        is_local = isinstance(n, ast.Name) and (n.id in locals_ or n.id.startswith("$"))
        if is_local and n.id not in seen:
            seen.append(n.id)
    return seen


def _is_number_literal(node: ast.expr) -> bool:
    """``3``, ``-2``: a value known before anything runs (the fence rejects a zero step)."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


def _lists_as_arrays(value: Any) -> Any:
    """A default value as a batched call passes it: a list is one array (as at the top
    level, `pcbatch.api`), a tuple a pattern of fields."""
    if isinstance(value, list):
        return np.asarray(value)
    if isinstance(value, tuple):
        items = [_lists_as_arrays(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def _slice_mask(target: ast.Subscript, part: ast.Slice) -> ast.expr:
    """``w[a:b:s]`` with a bound per example: the index ``__pcb_slice_mask(w, a, b, s)``
    (`runtime.slice_mask`), a boolean mask along the first axis."""
    bounds = [b if b is not None else ast.Constant(None) for b in (part.lower, part.upper,
                                                                   part.step)]
    call = ast.Call(ast.Name("__pcb_slice_mask", ast.Load()),
                    [ast.Name(target.value.id, ast.Load()), *bounds], [])
    return ast.fix_missing_locations(ast.copy_location(call, part))


def _range_continues(counter, stop, step):
    return np.where(step > 0, counter < stop, counter > stop)
