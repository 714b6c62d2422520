"""Definite assignment: which variables are assigned on every path to a point.

A forward must-analysis on the generic solver: facts are sets of assigned
names, joined by intersection, starting optimistic (every variable) so loops
converge to the greatest fixpoint.
"""

from __future__ import annotations

from pcbatch.analysis import dataflow
from pcbatch.ir.nodes import Block, Function, ReturnOp, reads, writes


def all_variables(fn: Function) -> frozenset:
    names = set(fn.vars_in) | set(fn.vars_out)
    for block in fn.graph:
        names.update(reads(block.terminator))
        for op in block.instructions:
            names.update(reads(op))
            names.update(writes(op))
    return frozenset(names)


def assigned_at_entry(fn: Function, assumed: frozenset = frozenset()) -> dict:
    """Block label -> variables definitely assigned when the block starts."""

    def transfer(block: Block, assigned: frozenset) -> frozenset:
        return assigned | frozenset(v for op in block.instructions for v in writes(op))

    before, _ = dataflow.solve(
        fn.graph,
        direction=dataflow.FORWARD,
        boundary=frozenset(fn.vars_in) | assumed,
        initial=all_variables(fn),
        join=dataflow.intersection,
        transfer=transfer,
    )
    return before


def maybe_unassigned_reads(fn: Function) -> frozenset:
    """Variables read somewhere they may not have been assigned yet."""
    before = assigned_at_entry(fn)
    found = set()
    for block in fn.graph:
        assigned = set(before[block.label])
        for op in block.instructions:
            found.update(v for v in reads(op) if v not in assigned)
            assigned.update(writes(op))
        found.update(v for v in reads(block.terminator) if v not in assigned)
        if isinstance(block.terminator, ReturnOp):
            found.update(v for v in fn.vars_out if v not in assigned)
    return frozenset(found)
