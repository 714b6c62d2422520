"""A Python-embedded builder for writing structured IR programs by hand.

Contract: a `ModuleBuilder` collects functions; each is written inside
``with mb.define(...) as f`` through a `FunctionBuilder`, whose methods emit
instructions into the current basic block and open new blocks for control
flow. The result (`ModuleBuilder.module` / `ModuleBuilder.program`) is plain
immutable IR from `pcbatch.ir.nodes`:

* Names passed to a `FunctionBuilder` are *local*; they are qualified as
  ``"<function>.<local>"`` in the IR, because IR variable names are global.
* A function's results live in fixed variables ``"<function>.__ret<i>"``;
  `FunctionBuilder.return_` copies into them and ends the block with a
  `ReturnOp`.
* Every instruction carries the `SourceLoc` of the builder call in the user's
  code.
* Unreachable blocks are dropped, and empty blocks that only jump elsewhere
  are bypassed, so the graph holds just the blocks that matter. Labels are
  unique per program (``"fib.entry"``, ``"fib.then1"``, ...).

Example::

    mb = ModuleBuilder()
    fib = mb.declare("fib", params=("n",), returns=1)
    with mb.define(fib) as f:
        small = f.prim(lambda n: n <= 2, "n")
        with f.if_(small):
            f.return_(f.const(1))
        a = f.call(fib, f.prim(lambda n: n - 1, "n"))
        b = f.call(fib, f.prim(lambda n: n - 2, "n"))
        f.return_(f.prim(np.add, a, b))
    program = mb.program("fib")
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pcbatch.ir import nodes
from pcbatch.ir.nodes import (
    BranchOp,
    ControlFlowGraph,
    FunctionCallOp,
    GotoOp,
    Module,
    PrimOp,
    Program,
    ReturnOp,
    SourceLoc,
)
from pcbatch.ir.types import flatten, is_pattern_node, is_python_scalar, map_pattern

__all__ = ["FunctionBuilder", "FunctionHandle", "ModuleBuilder"]

_THIS_FILE = os.path.normcase(os.path.abspath(__file__))
_RESULT_PREFIX = "__ret"


@dataclasses.dataclass(frozen=True)
class FunctionHandle:
    """A declared function: what a call site needs to know about it."""

    name: str
    params: tuple
    returns: int


def _user_loc() -> SourceLoc:
    """The SourceLoc of the innermost frame outside this module.

    Walking out of this file (rather than a fixed depth) keeps locations right
    however the builder's own methods call each other.
    """
    frame = sys._getframe(1)
    while frame is not None and os.path.normcase(frame.f_code.co_filename) == _THIS_FILE:
        frame = frame.f_back
    if frame is None:
        return SourceLoc("<unknown>", "<unknown>", 0)
    return SourceLoc(frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno)


def _check_local(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} must be a non-empty local variable name, got {name!r}")
    if "." in name:
        raise ValueError(f"{what} {name!r}: local names may not contain '.'")
    if name.startswith(_RESULT_PREFIX):
        raise ValueError(f"{what} {name!r}: names starting with {_RESULT_PREFIX!r} are reserved")
    return name


def _constant_label(value: Any) -> str:
    # Small scalars print their value so golden IR text stays informative.
    if not is_pattern_node(value) and np.ndim(value) == 0:
        return f"const[{np.asarray(value).item()!r}]"
    return "const"


class _Draft:
    """A block under construction: mutable until the function is finished."""

    def __init__(self, label: str):
        self.label = label
        self.instructions: list = []
        self.terminator: Any = None

    @property
    def open(self) -> bool:
        return self.terminator is None


class FunctionBuilder:
    """Emits the body of one function. Obtain one from `ModuleBuilder.define`."""

    def __init__(self, module: ModuleBuilder, handle: FunctionHandle, loc: SourceLoc):
        self._module = module
        self.handle = handle
        self._loc = loc
        self._counter = 0
        self._temps = 0
        self._dead = 0
        self._drafts: dict[str, _Draft] = {}
        self._order: list[str] = []
        self._assigned: set[str] = set(handle.params)
        self._loops: list[tuple[str, str]] = []  # (continue target, break target)
        self._pending_else: tuple[_Draft, _Draft] | None = None
        self._loc_override: SourceLoc | None = None
        self.strict = True
        self._current = self._start_block(f"{handle.name}.entry")

    @contextlib.contextmanager
    def at(self, loc: SourceLoc) -> Iterator[FunctionBuilder]:
        """Attributes everything emitted inside to ``loc`` (for generated code)."""
        saved, self._loc_override = self._loc_override, loc
        try:
            yield self
        finally:
            self._loc_override = saved

    def _here(self) -> SourceLoc:
        return self._loc_override if self._loc_override is not None else _user_loc()

    # -- naming ----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def params(self) -> tuple:
        """The local names of the parameters."""
        return self.handle.params

    def qualify(self, local: str) -> str:
        """The global IR name of a local variable."""
        return f"{self.name}.{local}"

    def result_vars(self) -> tuple:
        """The qualified names of the function's result variables."""
        return tuple(f"{self.name}.{_RESULT_PREFIX}{i}" for i in range(self.handle.returns))

    def _fresh_temp(self) -> str:
        # Skips names the user already chose, so a temp never aliases a local.
        while True:
            name = f"t{self._temps}"
            self._temps += 1
            if name not in self._assigned:
                return name

    def _fresh_label(self, kind: str) -> str:
        self._counter += 1
        return f"{self.name}.{kind}{self._counter}"

    # -- blocks ------------------------------------------------------------------
    def _draft(self, label: str) -> _Draft:
        draft = self._drafts.get(label)
        if draft is None:
            draft = self._drafts[label] = _Draft(label)
        return draft

    def _start_block(self, label: str) -> _Draft:
        draft = self._draft(label)
        if label not in self._order:
            self._order.append(label)
        self._current = draft
        return draft

    def _terminate(self, terminator) -> None:
        self._current.terminator = terminator
        # Code after a jump is unreachable; it goes into a fresh block with no
        # predecessors, which `_finish` drops. (Its own counter keeps the
        # numbering of the labels that survive dense.)
        self._dead += 1
        self._start_block(f"{self.name}.dead{self._dead}")

    def _emit(self, op) -> None:
        self._pending_else = None
        self._current.instructions.append(op)

    # -- operands ----------------------------------------------------------------
    def _read(self, local: Any, loc: SourceLoc) -> str:
        _check_local(local, "input")
        if self.strict and local not in self._assigned:
            raise ValueError(
                f"{self.name}: variable {local!r} is read at {loc} but never assigned before"
            )
        return self.qualify(local)

    def _write_pattern(self, out: Any) -> Any:
        leaves = flatten(out)
        for leaf in leaves:
            _check_local(leaf, "output")
        if len(set(leaves)) != len(leaves):
            raise ValueError(f"{self.name}: output pattern {out!r} names a variable twice")
        self._assigned.update(leaves)
        return map_pattern(self.qualify, out)

    # -- straight-line code ----------------------------------------------------
    def prim(
        self,
        function: Callable,
        *inputs: str,
        out: Any = None,
        name: str = "",
        per_example: bool = False,
    ) -> Any:
        """Emits a primitive: ``out = function(*inputs)``, batched.

        Args:
          function: called with one batched array pattern per input; returns a
            pattern matching ``out``.
          *inputs: local names to pass.
          out: a local name or nested tuple pattern of names; a fresh
            temporary when omitted.
          name: the label the printer shows; defaults to ``function.__name__``.
          per_example: ``function`` is written for one example (no batch
            dimension) and each backend vectorizes it.

        Returns:
          ``out`` (the local name or pattern written).
        """
        loc = self._here()
        vars_in = tuple(self._read(x, loc) for x in inputs)
        out = self._fresh_temp() if out is None else out
        vars_out = self._write_pattern(out)
        self._emit(PrimOp(vars_in, vars_out, function, frozenset(), loc, name, per_example))
        return out

    def const(self, value: Any, *, out: str | None = None) -> Any:
        """Emits ``out = value``: a primitive with no inputs (broadcast to every thread).

        A Python ``bool``/``int``/``float``/``complex`` is typed weak, as NumPy 2 treats
        it: it takes the dtype of the arrays it meets (`pcbatch.ir.types.WeakTensorType`).
        """
        loc = self._here()
        weak = map_pattern(is_python_scalar, value)
        value = map_pattern(np.asarray, value)
        out = self._fresh_temp() if out is None else out
        vars_out = self._write_pattern(out)
        constant = lambda: value  # noqa: E731
        # Python scalars are weak (NEP 50): type inference reads this (see ir.types).
        constant.weak_results = weak
        op = PrimOp((), vars_out, constant, frozenset(), loc, _constant_label(value))
        self._emit(op)
        return out

    def copy(self, *sources: str, out: Any) -> Any:
        """Emits the parallel assignment ``out = sources`` (one name per source)."""
        loc = self._here()
        vars_in = tuple(self._read(x, loc) for x in sources)
        outs = (out,) if isinstance(out, str) else tuple(out)
        if len(outs) != len(vars_in):
            raise ValueError(f"{self.name}: copy of {len(vars_in)} values into {len(outs)} names")
        vars_out = self._write_pattern(outs)
        # A user assignment writes like any primitive (pushing where the
        # allocator decides), unlike compiler-inserted moves.
        self._emit(nodes.copy_op(vars_in, vars_out, push=True, loc=loc))
        return out

    def call(self, function: FunctionHandle | str, *args: str, out: Any = None) -> Any:
        """Emits a call; returns the local name(s) bound to the callee's results.

        Args:
          function: a handle from `ModuleBuilder.declare` or a declared name.
          *args: local names, one per callee parameter.
          out: a name (one result) or tuple of names; fresh temporaries when
            omitted.

        Returns:
          One name when the callee returns one value, else a tuple of names.
        """
        loc = self._here()
        callee = self._module._resolve(function, loc)
        if len(args) != len(callee.params):
            raise ValueError(
                f"{self.name}: call to {callee.name!r} at {loc} passes {len(args)} "
                f"arguments, but it takes {len(callee.params)}"
            )
        vars_in = tuple(self._read(x, loc) for x in args)
        if out is None:
            outs = tuple(self._fresh_temp() for _ in range(callee.returns))
        else:
            outs = (out,) if isinstance(out, str) else tuple(out)
        if len(outs) != callee.returns:
            raise ValueError(
                f"{self.name}: call to {callee.name!r} at {loc} binds {len(outs)} "
                f"results, but it returns {callee.returns}"
            )
        vars_out = self._write_pattern(outs)
        self._emit(FunctionCallOp(callee.name, vars_in, vars_out, loc))
        return outs[0] if callee.returns == 1 else outs

    # -- control flow ----------------------------------------------------------
    def return_(self, *results: str) -> None:
        """Copies ``results`` into the function's result variables and returns."""
        loc = self._here()
        if len(results) != self.handle.returns:
            raise ValueError(
                f"{self.name}: return at {loc} gives {len(results)} values, "
                f"but the function returns {self.handle.returns}"
            )
        vars_in = tuple(self._read(x, loc) for x in results)
        if vars_in:
            self._emit(nodes.copy_op(vars_in, self.result_vars(), loc=loc))
        self._pending_else = None
        self._terminate(ReturnOp(loc))

    def stop(self) -> None:
        """Ends the current path where every thread on it has failed a check (a
        ``raise``: the machine stops them, or the eager one raises): a jump to a block that
        only jumps to itself, so the path neither falls off the function's end nor joins
        the code after it. No thread runs that block."""
        loc = self._here()
        label = self._fresh_label("stopped")
        self._pending_else = None
        self._current.terminator = GotoOp(label, loc)
        self._start_block(label)
        self._terminate(GotoOp(label, loc))

    def if_(self, cond: str) -> contextlib.AbstractContextManager:
        """Opens the then-branch of ``if cond``; may be followed by `else_`."""
        loc = self._here()
        return self._if(self._read(cond, loc), loc)

    @contextlib.contextmanager
    def _if(self, cond_var: str, loc: SourceLoc) -> Iterator[FunctionBuilder]:
        n = self._counter = self._counter + 1
        then_label, else_label, join_label = (
            f"{self.name}.{kind}{n}" for kind in ("then", "else", "endif")
        )
        self._pending_else = None
        self._current.terminator = BranchOp(cond_var, then_label, else_label, loc)
        self._start_block(then_label)
        yield self
        self._close_into(join_label, loc)
        # Without an `else_`, the false edge just falls through to the join.
        else_draft = self._draft(else_label)
        else_draft.terminator = GotoOp(join_label, loc)
        join = self._start_block(join_label)
        self._pending_else = (else_draft, join)

    def else_(self) -> contextlib.AbstractContextManager:
        """Opens the else-branch of the `if_` block that directly precedes it."""
        loc = self._here()
        pending = self._pending_else
        if pending is None or pending[1] is not self._current:
            raise ValueError(f"{self.name}: else_() at {loc} must directly follow an if_ block")
        self._pending_else = None
        return self._else(pending, loc)

    @contextlib.contextmanager
    def _else(self, pending: tuple, loc: SourceLoc) -> Iterator[FunctionBuilder]:
        else_draft, join = pending
        else_draft.terminator = None
        # Keep source order: the else block prints before the join.
        self._order.remove(join.label)
        self._start_block(else_draft.label)
        yield self
        self._close_into(join.label, loc)
        self._start_block(join.label)

    def _close_into(self, label: str, loc: SourceLoc) -> None:
        if self._current.open:
            self._current.terminator = GotoOp(label, loc)

    def loop(self) -> contextlib.AbstractContextManager:
        """Opens ``while True:``; leave it with `break_`, `break_if` or `break_unless`."""
        return self._loop(self._here())

    @contextlib.contextmanager
    def _loop(self, loc: SourceLoc) -> Iterator[FunctionBuilder]:
        n = self._counter = self._counter + 1
        head, exit_ = f"{self.name}.loop{n}", f"{self.name}.endloop{n}"
        self._pending_else = None
        self._close_into(head, loc)
        self._start_block(head)
        self._loops.append((head, exit_))
        try:
            yield self
        finally:
            self._loops.pop()
        self._close_into(head, loc)
        self._pending_else = None
        self._start_block(exit_)

    def sync(self) -> None:
        """Ends the block here; what follows starts a sync block (``f.syncN``), where the
        scheduler gathers threads before running it (see ``pcbatch/vm/policy.py``)."""
        loc = self._here()
        self._counter += 1
        label = nodes.sync_label(self.name, self._counter)
        self._pending_else = None
        self._close_into(label, loc)
        self._start_block(label)

    def _innermost_loop(self, what: str, loc: SourceLoc) -> tuple[str, str]:
        if not self._loops:
            raise ValueError(f"{self.name}: {what} at {loc} is not inside a loop")
        return self._loops[-1]

    def break_(self) -> None:
        """Leaves the innermost loop."""
        loc = self._here()
        _, exit_ = self._innermost_loop("break_()", loc)
        self._pending_else = None
        self._terminate(GotoOp(exit_, loc))

    def continue_(self) -> None:
        """Jumps back to the start of the innermost loop."""
        loc = self._here()
        head, _ = self._innermost_loop("continue_()", loc)
        self._pending_else = None
        self._terminate(GotoOp(head, loc))

    def break_unless(self, cond: str) -> None:
        """Leaves the innermost loop where ``cond`` is false; goes on where true."""
        loc = self._here()
        self._conditional_break(self._read(cond, loc), loc, break_when=False)

    def break_if(self, cond: str) -> None:
        """Leaves the innermost loop where ``cond`` is true; goes on where false."""
        loc = self._here()
        self._conditional_break(self._read(cond, loc), loc, break_when=True)

    def _conditional_break(self, cond_var: str, loc: SourceLoc, break_when: bool) -> None:
        _, exit_ = self._innermost_loop("a conditional break", loc)
        stay = self._fresh_label("body")
        targets = (exit_, stay) if break_when else (stay, exit_)
        self._pending_else = None
        self._current.terminator = BranchOp(cond_var, *targets, loc)
        self._start_block(stay)

    # -- finishing -----------------------------------------------------------------
    def _finish(self) -> tuple[nodes.Function, str | None]:
        """The built Function, and an error message if the body falls off its end."""
        entry = self._order[0]
        reachable = _reachable(self._drafts, entry)
        falls_off = [lbl for lbl in self._order if lbl in reachable and self._drafts[lbl].open]
        error = None
        if falls_off:
            error = (
                f"function {self.name!r} (defined at {self._loc}) can reach the end of its "
                f"body without returning (block {falls_off[0]!r})"
            )
        blocks = _thread_and_prune(self._drafts, self._order, entry)
        graph = ControlFlowGraph(tuple(blocks))
        params = tuple(self.qualify(p) for p in self.params)
        fn = nodes.Function(self.name, params, self.result_vars(), graph, loc=self._loc)
        return fn, error


def _reachable(drafts: dict, entry: str) -> set:
    seen, stack = set(), [entry]
    while stack:
        label = stack.pop()
        if label in seen:
            continue
        seen.add(label)
        terminator = drafts[label].terminator
        if terminator is not None:
            stack.extend(nodes.successors(terminator))
    return seen


def _forwarding(drafts: dict, entry: str) -> dict:
    """Maps each label to where control really goes, skipping empty goto-only blocks."""

    def is_trampoline(label: str) -> bool:
        d = drafts[label]
        empty = not d.instructions and isinstance(d.terminator, GotoOp)
        return empty and label != entry and not nodes.is_sync_label(label)

    resolved = {}
    for label in drafts:
        seen, cur = [], label
        # Stops on a cycle of empty blocks (an empty infinite loop), keeping it.
        while is_trampoline(cur) and cur not in seen:
            seen.append(cur)
            cur = drafts[cur].terminator.target
        resolved[label] = seen[-1] if cur in seen else cur
    return resolved


def _retarget(terminator, forward: dict):
    if isinstance(terminator, BranchOp):
        return dataclasses.replace(
            terminator,
            true_target=forward[terminator.true_target],
            false_target=forward[terminator.false_target],
        )
    if isinstance(terminator, GotoOp):
        return dataclasses.replace(terminator, target=forward[terminator.target])
    return terminator


def _thread_and_prune(drafts: dict, order: list, entry: str) -> list:
    forward = _forwarding(drafts, entry)
    for d in drafts.values():
        if d.terminator is not None:
            d.terminator = _retarget(d.terminator, forward)
    live = _reachable(drafts, entry)
    ordered = order + [lbl for lbl in drafts if lbl not in order]
    return [
        nodes.Block(lbl, tuple(drafts[lbl].instructions), drafts[lbl].terminator)
        for lbl in ordered
        if lbl in live
    ]


class ModuleBuilder:
    """Collects hand-written functions into a `Module`."""

    def __init__(self) -> None:
        self._handles: dict[str, FunctionHandle] = {}
        self._defined: dict[str, tuple[nodes.Function, str | None]] = {}

    def declare(self, name: str, params: Sequence[str] = (), returns: int = 1) -> FunctionHandle:
        """Declares a function ahead of its definition, so calls (and recursion) may name it.

        Args:
          name: the function's name; also the prefix of its variables' names.
          params: local names of the parameters.
          returns: how many values the function returns.
        """
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"function name must be a non-empty string without '.', got {name!r}")
        params = tuple(_check_local(p, "parameter") for p in params)
        if len(set(params)) != len(params):
            raise ValueError(f"function {name!r} names a parameter twice: {params}")
        if not isinstance(returns, int) or returns < 0:
            raise ValueError(f"function {name!r}: returns must be a count >= 0, got {returns!r}")
        handle = FunctionHandle(name, params, returns)
        old = self._handles.get(name)
        if old is not None and old != handle:
            raise ValueError(f"function {name!r} is already declared differently: {old}")
        self._handles[name] = handle
        return handle

    def _resolve(self, function: FunctionHandle | str, loc: SourceLoc) -> FunctionHandle:
        name = function.name if isinstance(function, FunctionHandle) else function
        handle = self._handles.get(name)
        if handle is None:
            known = ", ".join(sorted(self._handles)) or "none"
            raise ValueError(
                f"call at {loc} to undeclared function {name!r} (declared: {known}); "
                "declare it first with ModuleBuilder.declare"
            )
        return handle

    def define(
        self,
        function: FunctionHandle | str,
        params: Sequence[str] | None = None,
        returns: int | None = None,
        loc: SourceLoc | None = None,
    ) -> contextlib.AbstractContextManager:
        """Opens the body of ``function``, declaring it first if needed.

        ``loc`` overrides where the function is said to be defined (for
        generated code); by default it is the caller's line.

        Yields:
          A `FunctionBuilder` for the body.
        """
        loc = loc or _user_loc()
        name = function.name if isinstance(function, FunctionHandle) else function
        handle = self._handles.get(name)
        if handle is None:
            handle = self.declare(name, params or (), 1 if returns is None else returns)
        else:
            if params is not None and tuple(params) != handle.params:
                raise ValueError(f"define({name!r}): params {tuple(params)} != {handle.params}")
            if returns is not None and returns != handle.returns:
                raise ValueError(f"define({name!r}): returns {returns} != {handle.returns}")
        if name in self._defined:
            raise ValueError(f"function {name!r} is defined twice (again at {loc})")
        return self._define(handle, loc)

    @contextlib.contextmanager
    def _define(self, handle: FunctionHandle, loc: SourceLoc) -> Iterator[FunctionBuilder]:
        builder = FunctionBuilder(self, handle, loc)
        yield builder
        self._defined[handle.name] = builder._finish()

    def module(self) -> Module:
        """The functions built so far, in declaration order.

        Raises:
          ValueError: a declared function has no body, or a body can fall off
            its end without returning.
        """
        missing = [n for n in self._handles if n not in self._defined]
        if missing:
            raise ValueError(f"functions declared but never defined: {', '.join(missing)}")
        for _, error in self._defined.values():
            if error:
                raise ValueError(error)
        return Module(tuple(self._defined[n][0] for n in self._handles))

    def program(self, main: str) -> Program:
        """``self.module().program(main)``."""
        return self.module().program(main)
