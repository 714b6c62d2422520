"""One worklist solver for dataflow problems over a control-flow graph.

Every analysis (liveness, definite assignment, ...) is a lattice ``join`` plus
a per-block ``transfer`` function; the solver iterates to the fixpoint, so
loops (back edges) are handled. Facts must be values comparable with ``==``
(frozensets are the usual choice).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pcbatch.ir.nodes import ControlFlowGraph

FORWARD = "forward"
BACKWARD = "backward"


def solve(
    graph: ControlFlowGraph,
    *,
    direction: str,
    boundary: Any,
    initial: Any,
    join: Callable[[Iterable[Any]], Any],
    transfer: Callable[[Any, Any], Any],
) -> tuple[dict, dict]:
    """Solves a dataflow problem to its fixpoint.

    Args:
      graph: the blocks.
      direction: FORWARD (facts flow along edges) or BACKWARD (against them).
      boundary: the fact entering the entry block (forward) or leaving a
        block with no successors (backward).
      initial: the optimistic starting fact of every other block (the lattice
        top for a must-analysis, bottom for a may-analysis).
      join: combines the facts flowing into one block from several edges.
      transfer: ``transfer(block, fact_before) -> fact_after``, where
        "before" is the block's entry fact going forward, its exit fact going
        backward.

    Returns:
      ``(before, after)``: dicts from label to the fact at the block's entry
      and exit (in program order, whatever the direction).
    """
    if direction not in (FORWARD, BACKWARD):
        raise ValueError(f"direction must be {FORWARD!r} or {BACKWARD!r}")
    forward = direction == FORWARD
    preds = graph.predecessors()
    succs = {b.label: b.successors for b in graph}
    sources = preds if forward else succs
    sinks = succs if forward else preds
    fact_in = {b.label: initial for b in graph}
    fact_out = {b.label: initial for b in graph}
    order = [b.label for b in graph]
    if not forward:
        order.reverse()
    pending = list(order)
    queued = set(pending)
    while pending:
        label = pending.pop(0)
        queued.discard(label)
        incoming = [fact_out[s] for s in sources[label]]
        at_boundary = (forward and label == graph.entry) or (not forward and not succs[label])
        if at_boundary:
            incoming.append(boundary)
        fact_in[label] = join(incoming) if incoming else initial
        new_out = transfer(graph.block(label), fact_in[label])
        if new_out != fact_out[label]:
            fact_out[label] = new_out
            for nxt in sinks[label]:
                if nxt not in queued:
                    pending.append(nxt)
                    queued.add(nxt)
    if forward:
        return fact_in, fact_out
    return fact_out, fact_in


def union(facts: Iterable[frozenset]) -> frozenset:
    result = frozenset()
    for fact in facts:
        result |= fact
    return result


def intersection(facts: Iterable[frozenset]) -> frozenset:
    facts = list(facts)
    if not facts:
        return frozenset()
    result = facts[0]
    for fact in facts[1:]:
        result &= fact
    return result
