"""Live-variable analysis of a structured function.

A variable is live at a point if some path from there reads it before
writing it. ``ReturnOp`` reads the function's results. Built on the generic
dataflow solver, so loops work.

Example: in ``t = n - 1; r = f(t); return r + n`` the variable ``n`` is live
across the call to ``f``; ``t`` is not.
"""

from __future__ import annotations

from pcbatch.analysis import dataflow
from pcbatch.ir.nodes import Block, Function, ReturnOp, reads, writes


def _terminator_reads(block: Block, function: Function) -> frozenset:
    if isinstance(block.terminator, ReturnOp):
        return frozenset(function.vars_out)
    return frozenset(reads(block.terminator))


def _step_back(live: frozenset, op) -> frozenset:
    """Liveness before ``op`` given liveness after it."""
    return (live - frozenset(writes(op))) | frozenset(reads(op))


def block_liveness(function: Function) -> tuple[dict, dict]:
    """``(live_in, live_out)``: dicts from block label to frozensets of names."""

    def transfer(block: Block, live_out: frozenset) -> frozenset:
        live = live_out | _terminator_reads(block, function)
        for op in reversed(block.instructions):
            live = _step_back(live, op)
        return live

    return dataflow.solve(
        function.graph,
        direction=dataflow.BACKWARD,
        boundary=frozenset(),
        initial=frozenset(),
        join=dataflow.union,
        transfer=transfer,
    )


def live_after_instructions(function: Function) -> dict:
    """For each block label, the live set after each of its instructions."""
    _, live_out = block_liveness(function)
    result = {}
    for block in function.graph:
        live = live_out[block.label] | _terminator_reads(block, function)
        after = []
        for op in reversed(block.instructions):
            after.append(live)
            live = _step_back(live, op)
        result[block.label] = list(reversed(after))
    return result
