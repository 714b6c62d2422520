"""Allocation: decide how the VM stores each variable, and what each call saves.

Assumes: a typed structured program (tail calls already marked). Guarantees:
``program.var_alloc`` gives every variable a `VariableAllocation`, and every
non-tail `FunctionCallOp` lists in ``saves`` the caller's variables that are
live across it *and* that the callee may overwrite (directly or through the
functions it calls). Only those variables get a stack (FULL):

- NULL: never read (writes are dropped);
- TEMPORARY: never live across a block boundary or a call;
- REGISTER: everything else that no call needs to save;
- FULL: saved by some call.

Example: in ``fib(n)``, ``n`` is live across ``fib(n - 1)`` and the callee
writes ``fib.n``, so ``n`` is saved there and is FULL; a variable read only
after a call to a function that cannot reach ``fib`` stays a REGISTER. A
parameter every recursive call passes on unchanged is not saved by those calls
(`invariant_parameters`).
"""

from __future__ import annotations

import dataclasses

from pcbatch.analysis.assignment import all_variables
from pcbatch.analysis.liveness import block_liveness, live_after_instructions
from pcbatch.ir.nodes import Block, ControlFlowGraph, FunctionCallOp, Program, reads, writes
from pcbatch.ir.types import VariableAllocation, flatten


def may_write(program: Program) -> dict:
    """For each function, the variables a call to it may overwrite (transitively)."""
    direct, callees = {}, {}
    for fn in program.functions:
        written = set(fn.vars_in) | set(fn.vars_out)
        called = set()
        for block in fn.graph:
            for op in block.instructions:
                written.update(writes(op))
                if isinstance(op, FunctionCallOp):
                    called.add(op.function)
        direct[fn.name], callees[fn.name] = written, called
    result = {name: set(w) for name, w in direct.items()}
    changed = True
    while changed:
        changed = False
        for name, called in callees.items():
            before = len(result[name])
            for callee in called:
                result[name] |= result[callee]
            changed |= len(result[name]) != before
    return {name: frozenset(w) for name, w in result.items()}


def invariant_parameters(fn, clobbers) -> frozenset:
    """Parameters a call of ``fn`` from ``fn`` itself leaves as they were.

    A parameter ``x`` that ``fn`` never assigns, that every recursive call passes on
    unchanged (``f(x, n - 1)`` inside ``f(x, n)``), and that no other function
    ``fn`` calls can overwrite (none of them reaches back into ``fn``) holds the
    same value in every frame of ``fn``: a self-call need not save it (NUTS passes
    the step size, the mass matrix and its random-stream keys down every level).
    """
    candidates = set(fn.vars_in)
    for block in fn.graph:
        for op in block.instructions:
            if isinstance(op, FunctionCallOp):
                if op.function == fn.name:
                    passed = zip(fn.vars_in, op.vars_in)
                    candidates -= {x for x, arg in passed if arg != x}
                else:
                    candidates -= clobbers[op.function]
            candidates -= set(writes(op))
    return frozenset(candidates)


def _with_saves(fn, clobbers) -> tuple:
    """The function with ``saves`` filled in, and the variables that cross a boundary."""
    invariant = invariant_parameters(fn, clobbers)
    live_in, _ = block_liveness(fn)
    after = live_after_instructions(fn)
    crossing = set(fn.vars_in) | set(fn.vars_out)
    for label_live in live_in.values():
        crossing |= label_live
    blocks = []
    for block in fn.graph:
        ops = list(block.instructions)
        for i, op in enumerate(ops):
            if not isinstance(op, FunctionCallOp):
                continue
            across = after[block.label][i] - set(flatten(op.vars_out))
            crossing |= across
            if not op.tail:
                clobbered = clobbers[op.function]
                if op.function == fn.name:
                    clobbered = clobbered - invariant
                ops[i] = dataclasses.replace(op, saves=tuple(sorted(across & clobbered)))
        blocks.append(Block(block.label, tuple(ops), block.terminator))
    return dataclasses.replace(fn, graph=ControlFlowGraph(tuple(blocks))), crossing


def _read_anywhere(program: Program) -> set:
    read = set(program.vars_out)
    for fn in program.functions:
        read |= set(fn.vars_out)
        for block in fn.graph:
            read.update(reads(block.terminator))
            for op in block.instructions:
                read.update(reads(op))
    return read


def run(program: Program, ctx=None) -> Program:
    """Fills in call saves and ``var_alloc``."""
    clobbers = may_write(program)
    functions, crossing, saved = [], set(), set()
    for fn in program.functions:
        fn, fn_crossing = _with_saves(fn, clobbers)
        functions.append(fn)
        crossing |= fn_crossing
        for block in fn.graph:
            for op in block.instructions:
                if isinstance(op, FunctionCallOp):
                    saved.update(op.saves)
    read = _read_anywhere(program)
    alloc = {}
    variables = set(program.var_types)
    for fn in functions:
        variables |= all_variables(fn)
    for var in sorted(variables):
        if var not in read:
            alloc[var] = VariableAllocation.NULL
        elif var in saved:
            alloc[var] = VariableAllocation.FULL
        elif var in crossing:
            alloc[var] = VariableAllocation.REGISTER
        else:
            alloc[var] = VariableAllocation.TEMPORARY
    return program.replace(functions=tuple(functions), var_alloc=alloc)
