"""Python's ``UnboundLocalError``, thread by thread.

Python lets a local be first assigned inside a branch or a loop, and raises
``UnboundLocalError`` when a read finds it unassigned (``for i in range(n): last = i``
then ``return last`` with ``n == 0``). The batched program keeps one register per
variable for every thread, so such a thread would silently read a zero.

This rewrite keeps, for each user variable that some read may find unassigned
(definite assignment, `pcbatch.analysis.assignment`), a per-thread flag: cleared when
the function starts, set by every assignment, and checked before each read that is
not already known to follow an assignment. A check whose threads are not all assigned
fails the run with the ``UnboundLocalError`` Python would raise, at the user's line
(`UnboundGuard`). Variables every read of which follows an assignment cost nothing.

Example (``last`` may be unbound at the return)::

    entry:  $bound.last = False ...
    body:   last = i * 2; $bound.last = True
    end:    $ok = unbound_guard[last]($bound.last); __ret0 = copy(last)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcbatch.analysis.assignment import assigned_at_entry
from pcbatch.errors import lane_check_failed, where
from pcbatch.ir.nodes import (
    Block,
    ControlFlowGraph,
    Function,
    GotoOp,
    PrimOp,
    SourceLoc,
    reads,
    writes,
)
from pcbatch.ir.types import TensorType, Type


class UnboundGuard:
    """A guard primitive: ``ok`` per thread, true where the variable was assigned.

    Machines recognize guards (`is_guard`): where a guard's result is false in some
    thread, the run fails with `error()` located at the guard's line.
    """

    is_guard = True
    result_type = Type(TensorType(np.dtype(bool), ()))  # type inference need not run it

    def __init__(self, variable: str, loc: SourceLoc | None):
        self.variable = variable
        self.loc = loc
        self.__name__ = f"unbound_guard[{variable}]"

    def __call__(self, assigned):
        """On eager backends: raises where some thread's flag is false."""
        if not np.all(assigned):
            raise self.error()
        return assigned

    @staticmethod
    def faulting(assigned):
        """The threads that fail the guard (staged machines stop them and raise `error`
        after the run: `pcbatch.vm.staged.faulted_at`)."""
        return np.logical_not(assigned)

    def for_backend(self, backend):
        """Staged backends cannot raise inside their loop: there the flag passes through,
        and the machine stops the threads `faulting` names (`pcbatch.vm.staged`)."""
        if getattr(backend, "staged", False):
            return backend.adapt(lambda assigned: assigned)
        return None

    def error(self) -> UnboundLocalError:
        return lane_check_failed(UnboundLocalError(
            f"cannot access local variable {self.variable!r} where it is not associated "
            f"with a value{where(self.loc)}: some batch members never assigned it on the "
            "path they took (as Python would say for them); assign it before the branch "
            "or loop"
        ))


def is_guard(op) -> bool:
    return isinstance(op, PrimOp) and getattr(op.function, "is_guard", False)


def _user_variable(fn: Function, name: str) -> str | None:
    """The Python name of ``name`` when it is one of the user's locals, else None."""
    prefix = fn.name + "."
    if not name.startswith(prefix):
        return None
    local = name[len(prefix) :]
    return local if local.isidentifier() and not local.startswith("__") else None


def _constant(value):
    array = np.asarray(value)
    return lambda: array


def guard(fn: Function) -> Function:
    """``fn`` with a per-thread assignment flag and guards for its maybe-unbound locals."""
    flags = {
        var: f"{fn.name}.$bound.{local}"
        for var in sorted(fn.maybe_unbound)
        if (local := _user_variable(fn, var)) is not None
    }
    if not flags:
        return fn
    before = assigned_at_entry(fn)
    blocks = [_guarded_block(fn, block, flags, before[block.label]) for block in fn.graph]
    entry = blocks[0]
    clear = tuple(
        PrimOp((), flag, _constant(False), frozenset(), fn.loc, "False") for flag in flags.values()
    )
    if any(fn.graph.entry in b.successors for b in fn.graph):
        # The entry is a loop's head: clear the flags in a block of their own before it.
        start = Block(f"{fn.name}.$unbound_start", clear, GotoOp(entry.label, fn.loc))
        blocks.insert(0, start)
    else:
        blocks[0] = dataclasses.replace(entry, instructions=clear + entry.instructions)
    return dataclasses.replace(fn, graph=ControlFlowGraph(tuple(blocks)))


def _guarded_block(fn: Function, block: Block, flags: dict, assigned_before) -> Block:
    assigned = set(assigned_before)
    out = []
    for op in block.instructions:
        for var in reads(op):
            if var in flags and var not in assigned:
                local = _user_variable(fn, var)
                check = UnboundGuard(local, op.loc)
                ok = f"{flags[var]}.ok"
                out.append(PrimOp((flags[var],), ok, check, frozenset(), op.loc, check.__name__))
                assigned.add(var)  # a thread that passed the guard has it assigned
        out.append(op)
        for var in writes(op):
            assigned.add(var)
            if var in flags:
                out.append(PrimOp((), flags[var], _constant(True), frozenset(), op.loc, "True"))
    return dataclasses.replace(block, instructions=tuple(out))
