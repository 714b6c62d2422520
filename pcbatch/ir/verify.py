"""The IR verifier: checks the invariants every pass assumes and guarantees.

Contract: ``verify(program)`` returns None for a well-formed program and
otherwise raises `VerificationError` whose message names the function, the
block and the instruction (printed, with its source location when known).
It never changes the program.

Structured programs (``functions`` set) must have:

* a ``main`` function, unique function names, ``program.vars_in/vars_out``
  equal to main's;
* only `PrimOp`/`FunctionCallOp` in a block's instructions, and a `ReturnOp`,
  `BranchOp` or `GotoOp` terminator whose targets are in the same function;
* calls to existing functions with as many arguments and results as the
  callee has parameters and result variables;
* definite assignment: each read sees a value on every path from the entry
  (parameters are assigned on entry), and a `ReturnOp` sees all of the
  function's ``vars_out`` assigned;
* once ``var_types`` is set, in every function that main can reach by calls
  (type inference reaches no others): a type for every variable read or
  written, and a single-tensor, shape-``()`` type for each branch condition.

Lowered programs (``graph`` set, ``functions == ()``) must have straight-line
ops (`PrimOp`, `PopOp`) and lowered terminators (`BranchOp`, `GotoOp`,
`PushGotoOp`, `IndirectGotoOp`, `HaltOp`) with existing targets (``entries``
included), a type and an allocation for every variable read, and FULL
allocation for popped variables.

Definite assignment is `pcbatch.analysis.assignment`, on the shared dataflow solver.
"""

from __future__ import annotations

from typing import Any

from pcbatch.analysis.assignment import assigned_at_entry
from pcbatch.errors import VerificationError, where
from pcbatch.ir.nodes import (
    Block,
    BranchOp,
    ControlFlowGraph,
    Function,
    FunctionCallOp,
    GotoOp,
    HaltOp,
    IndirectGotoOp,
    PopOp,
    PrimOp,
    Program,
    PushGotoOp,
    ReturnOp,
    reads,
    successors,
    writes,
)
from pcbatch.ir.printer import format_instruction
from pcbatch.ir.types import TensorType, VariableAllocation, flatten

_STRUCTURED_OPS = (PrimOp, FunctionCallOp)
_STRUCTURED_TERMINATORS = (ReturnOp, BranchOp, GotoOp)
_LOWERED_OPS = (PrimOp, PopOp)
_LOWERED_TERMINATORS = (BranchOp, GotoOp, PushGotoOp, IndirectGotoOp, HaltOp)


class _Site:
    """Where a check runs, so every error message says the same things."""

    def __init__(
        self,
        program: Program,
        function: str | None = None,
        block: Block | None = None,
        typed: bool = False,
    ):
        self.program = program
        self.function = function
        self.block = block
        self.typed = typed

    def fail(self, message: str, op: Any = None, index: int | None = None) -> None:
        parts = []
        if self.function is not None:
            parts.append(f"function {self.function!r}")
        if self.block is not None:
            parts.append(f"block {self.block.label!r}")
        if op is not None:
            what = "terminator" if index is None else f"instruction {index}"
            text = format_instruction(op, self.program)
            parts.append(f"{what} `{text}`{where(getattr(op, 'loc', None))}")
        prefix = ", ".join(parts) or "program"
        raise VerificationError(f"{prefix}: {message}")


def verify(program: Program) -> None:
    """Checks ``program``; raises `VerificationError` describing the first problem."""
    if program.lowered:
        _verify_lowered(program)
    else:
        _verify_structured(program)


# ---------------------------------------------------------------------------
# Structured programs


def _verify_structured(program: Program) -> None:
    site = _Site(program, None, None)
    names = [fn.name for fn in program.functions]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        site.fail(f"duplicate function names: {', '.join(duplicates)}")
    functions = {fn.name: fn for fn in program.functions}
    main = functions.get(program.main)
    if main is None:
        site.fail(f"main function {program.main!r} does not exist (have: {', '.join(names)})")
    if tuple(program.vars_in) != tuple(main.vars_in):
        site.fail(f"program vars_in {program.vars_in} differ from main's {main.vars_in}")
    if tuple(program.vars_out) != tuple(main.vars_out):
        site.fail(f"program vars_out {program.vars_out} differ from main's {main.vars_out}")
    called = _called_from(main, functions)
    for fn in program.functions:
        # Type inference only reaches functions that main can call, so only
        # those are held to having types.
        typed = bool(program.var_types) and fn.name in called
        _verify_function(program, fn, functions, typed)


def _called_from(main: Function, functions: dict) -> set:
    seen, stack = set(), [main.name]
    while stack:
        name = stack.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for block in functions[name].graph:
            stack.extend(op.function for op in block.instructions if isinstance(op, FunctionCallOp))
    return seen


def _verify_function(program: Program, fn: Function, functions: dict, typed: bool) -> None:
    if len(fn.graph) == 0:
        _Site(program, fn.name, None).fail("the function has no blocks")
    for block in fn.graph:
        site = _Site(program, fn.name, block, typed)
        for i, op in enumerate(block.instructions):
            if not isinstance(op, _STRUCTURED_OPS):
                site.fail(f"{type(op).__name__} is not allowed in a structured program", op, i)
            _check_op(site, op, i, functions)
        _check_terminator(site, block.terminator, fn.graph, _STRUCTURED_TERMINATORS)
    _check_definite_assignment(program, fn)


def _check_op(site: _Site, op: Any, index: int, functions: dict) -> None:
    outs = list(writes(op))
    if not all(isinstance(v, str) for v in list(reads(op)) + outs):
        site.fail("variable names must be strings", op, index)
    if len(set(outs)) != len(outs):
        site.fail("writes a variable twice", op, index)
    if isinstance(op, PrimOp) and not set(op.skip_push_mask) <= set(outs):
        extra = sorted(set(op.skip_push_mask) - set(outs))
        site.fail(f"skip_push_mask names variables it does not write: {extra}", op, index)
    if isinstance(op, FunctionCallOp):
        callee = functions.get(op.function)
        if callee is None:
            site.fail(f"calls unknown function {op.function!r}", op, index)
        if len(op.vars_in) != len(callee.vars_in):
            site.fail(
                f"passes {len(op.vars_in)} arguments to {callee.name!r}, "
                f"which takes {len(callee.vars_in)}",
                op,
                index,
            )
        if len(op.vars_out) != len(callee.vars_out):
            site.fail(
                f"binds {len(op.vars_out)} results of {callee.name!r}, "
                f"which returns {len(callee.vars_out)}",
                op,
                index,
            )
    _check_types_of(site, list(reads(op)) + outs, op, index)


def _check_terminator(site: _Site, terminator: Any, graph: ControlFlowGraph, allowed) -> None:
    if terminator is None:
        site.fail("the block has no terminator")
    if not isinstance(terminator, allowed):
        kind = "a lowered" if site.program.lowered else "a structured"
        site.fail(f"{type(terminator).__name__} cannot end a block of {kind} program", terminator)
    # A PushGotoOp's return target counts too: it must name a block of this graph.
    for target in successors(terminator):
        if target not in graph:
            site.fail(f"jumps to unknown block {target!r}", terminator)
    if reads(terminator):  # a branch's or a threaded call's condition
        _check_condition(site, terminator)


def _check_condition(site: _Site, branch) -> None:
    types = site.program.var_types
    if not site.typed:
        return
    _check_types_of(site, [branch.cond_var], branch, None)
    tensors = types[branch.cond_var].tensors
    if not isinstance(tensors, TensorType) or tuple(tensors.shape) != ():
        site.fail(
            f"branch condition {branch.cond_var!r} has type {types[branch.cond_var]!r}; "
            "it must be a single tensor of shape ()",
            branch,
        )


def _check_types_of(site: _Site, names, op, index) -> None:
    if not site.typed:
        return
    for name in names:
        if name not in site.program.var_types:
            site.fail(f"variable {name!r} has no type", op, index)


def _check_definite_assignment(program: Program, fn: Function) -> None:
    graph = fn.graph
    before = assigned_at_entry(fn, assumed=fn.maybe_unbound)
    for block in graph:
        site = _Site(program, fn.name, block)
        assigned = set(before[block.label])
        for i, op in enumerate(block.instructions):
            _require_assigned(site, assigned, reads(op), op, i)
            assigned.update(writes(op))
        terminator = block.terminator
        _require_assigned(site, assigned, reads(terminator), terminator, None)
        if isinstance(terminator, ReturnOp):
            missing = [v for v in fn.vars_out if v not in assigned]
            if missing:
                site.fail(
                    f"returns before result variable(s) {missing} are assigned on every path",
                    terminator,
                )


def _require_assigned(site: _Site, assigned: set, names, op, index) -> None:
    for name in names:
        if name not in assigned:
            site.fail(f"reads {name!r} before it is assigned on every path", op, index)


# ---------------------------------------------------------------------------
# Lowered programs


def _verify_lowered(program: Program) -> None:
    site = _Site(program, None, None)
    if program.functions:
        site.fail("a lowered program must have functions == ()")
    if len(program.graph) == 0:
        site.fail("the lowered graph has no blocks")
    for name, label in program.entries.items():
        if label not in program.graph:
            site.fail(f"the entry of function {name!r} is unknown block {label!r}")
    for block in program.graph:
        block_site = _Site(program, None, block, typed=bool(program.var_types))
        for i, op in enumerate(block.instructions):
            if not isinstance(op, _LOWERED_OPS):
                block_site.fail(f"{type(op).__name__} is not allowed in a lowered program", op, i)
            _check_lowered_op(block_site, op, i)
        _check_terminator(block_site, block.terminator, program.graph, _LOWERED_TERMINATORS)
        _check_stored(block_site, reads(block.terminator), block.terminator, None)


def _check_lowered_op(site: _Site, op: Any, index: int) -> None:
    if isinstance(op, PopOp):
        for name in op.vars:
            alloc = site.program.var_alloc.get(name)
            if alloc != VariableAllocation.FULL:
                shown = "none" if alloc is None else VariableAllocation(alloc).name
                site.fail(f"pops {name!r}, whose allocation is {shown}, not FULL", op, index)
        return
    outs = list(flatten(op.vars_out))
    if len(set(outs)) != len(outs):
        site.fail("writes a variable twice", op, index)
    _check_stored(site, reads(op), op, index)


def _check_stored(site: _Site, names, op, index) -> None:
    program = site.program
    for name in names:
        # An untyped lowered program (compiled without a signature) is for reading only.
        if program.var_types and name not in program.var_types:
            site.fail(f"variable {name!r} is read but has no type", op, index)
        if name not in program.var_alloc:
            site.fail(f"variable {name!r} is read but has no allocation", op, index)
