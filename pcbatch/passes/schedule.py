"""Block scheduling: number the blocks so that "lowest program counter first" batches well.

Assumes: a structured program. Guarantees: the same program with main's
function first and each function's blocks in reverse postorder from its entry
(unreachable blocks dropped). The VM always runs the lowest-numbered block
that holds a thread, so a join point numbered after both arms of an ``if``
waits for the threads of both arms and runs them together, and a loop's body
comes before its exit, so threads still looping are not overtaken by those
that left.

Example: ``entry -> (then | else) -> join`` is numbered entry, then, else,
join, whatever order the builder emitted them in.
"""

from __future__ import annotations

import dataclasses

from pcbatch.ir.nodes import ControlFlowGraph, Function


def reverse_postorder(graph: ControlFlowGraph) -> list:
    seen, postorder = set(), []
    stack = [(graph.entry, iter(graph.block(graph.entry).successors))]
    seen.add(graph.entry)
    while stack:
        label, children = stack[-1]
        child = next(children, None)
        if child is None:
            postorder.append(label)
            stack.pop()
        elif child not in seen:
            seen.add(child)
            stack.append((child, iter(graph.block(child).successors)))
    return list(reversed(postorder))


def _schedule_function(fn: Function) -> Function:
    order = reverse_postorder(fn.graph)
    return dataclasses.replace(fn, graph=ControlFlowGraph(tuple(fn.graph.block(x) for x in order)))


def run(program, ctx=None):
    """Reorders functions (main first) and their blocks (reverse postorder)."""
    main = [fn for fn in program.functions if fn.name == program.main]
    rest = [fn for fn in program.functions if fn.name != program.main]
    return program.replace(functions=tuple(_schedule_function(fn) for fn in main + rest))
