"""Branches decided by shapes: ``if v.ndim == 2:`` goes the same way for every example.

A variable holds one shape and one dtype for the whole program, so a test that reads
per-example values only through their shapes or dtypes (``v.ndim``, ``v.shape[0]``,
``len(v)``, ``np.ndim(v)``, ``v.dtype.kind == "f"``, ``np.issubdtype(v.dtype, np.integer)``;
the frontend marks it, `pcbatch.frontend.to_ir`) has one value for every example of a
call. Type inference decides it as soon as the shapes it reads are known, and types
only the side Python runs: the other may not even run on these shapes
(``v.trace()`` of a vector). `fold` then drops that side from the program, so no
backend compiles it.

A decision is True or False, `UNDECIDED` while the shapes it reads are not known yet
(neither side is reachable so far), or `BOTH` where the test cannot be computed on
shapes alone (it raises on a dummy example, as ``len(x)`` of a number does: the
branch stays, and the program raises Python's error at run time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from pcbatch.ir.nodes import Block, BranchOp, ControlFlowGraph, GotoOp, PrimOp, successors, writes
from pcbatch.ir.types import Type, is_weak, map_pattern

#: the attribute the frontend sets on a test's primitive function
MARK = "decided_by_shapes"

UNDECIDED = None
BOTH = "both"


def shape_test(block: Block) -> PrimOp | None:
    """The primitive computing ``block``'s branch condition, if the frontend marked it as
    reading shapes only."""
    terminator = block.terminator
    if not isinstance(terminator, BranchOp):
        return None
    for op in reversed(block.instructions):
        if terminator.cond_var in writes(op):
            marked = isinstance(op, PrimOp) and getattr(op.function, MARK, False)
            return op if marked else None
    return None


def decide(op: PrimOp, types: dict):
    """The test's value for every example, given the variables' types so far."""
    if any(v not in types for v in op.vars_in):
        return UNDECIDED
    try:
        dummies = [_example_of(types[v]) for v in op.vars_in]
    except ValueError:  # a shape not known when compiling
        return BOTH
    try:
        return bool(op.function(*dummies))
    except AttributeError as error:
        if any(isinstance(d, (int, float, bool)) for d in dummies):
            # ``k.dtype`` of a Python number: a batch holds it as an array, which has one
            raise _python_number_attribute(op, error) from error
        return BOTH
    except Exception:  # noqa: BLE001 - Python's own error is raised when the test runs
        return BOTH


def _python_number_attribute(op: PrimOp, error: AttributeError) -> Exception:
    from pcbatch.errors import TypeInferenceError, where

    return TypeInferenceError(
        f"{error}{where(op.loc)}: the value is a Python number in each example (a literal, "
        "a range() counter, float(x) or int(x), arithmetic on those), which has no dtype "
        "or shape in Python. Test a NumPy value instead (np.asarray(k).dtype, or start "
        "from np.int64(0))"
    )


def _example_of(t: Type):
    """Zeros of one example's shape and dtype: a shape test reads nothing else. A weak
    value is a Python number in each example, as here: ``k.dtype`` of a Python int
    raises (AttributeError: the branch stays, and raises so when it runs)."""

    def zeros(leaf):
        if leaf.shape is None or any(d is None for d in leaf.shape):
            raise ValueError("a shape not known when compiling")
        if is_weak(leaf) and leaf.shape == ():
            return np.zeros((), dtype=np.dtype(leaf.dtype)).item()
        return np.zeros(leaf.shape, dtype=np.dtype(leaf.dtype))

    return map_pattern(zeros, t.tensors)


def taken(block: Block, decision) -> tuple:
    """The labels control may go to from ``block`` under ``decision`` (its test's)."""
    if decision is UNDECIDED:
        return ()
    terminator = block.terminator
    if decision is BOTH:
        return successors(terminator)
    return (terminator.true_target if decision else terminator.false_target,)


def reachable(graph: ControlFlowGraph, successors_of: Callable[[Block], Iterable[str]]) -> list:
    """The blocks reachable from the entry, in the graph's order."""
    seen, todo = set(), [graph.entry]
    while todo:
        label = todo.pop()
        if label not in seen:
            seen.add(label)
            todo.extend(successors_of(graph.block(label)))
    return [block for block in graph if block.label in seen]


def fold(block: Block, decision) -> Block:
    """``block`` with a decided branch made a jump to the side taken."""
    if decision is UNDECIDED or decision is BOTH:
        return block
    (target,) = taken(block, decision)
    return dataclasses.replace(block, terminator=GotoOp(target, block.terminator.loc))
