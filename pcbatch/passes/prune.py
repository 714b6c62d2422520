"""Pruning: keep only the functions that ``main`` can reach through calls.

Assumes: a structured program. Guarantees: ``program.functions`` holds main
and everything it calls, transitively, in their original order; functions no
call reaches (say, other entry points of the same module) are dropped, so no
later pass needs types for parameters that nothing passes.
"""

from __future__ import annotations

from pcbatch.ir.nodes import FunctionCallOp, Program


def reachable(program: Program) -> set:
    seen, todo = set(), [program.main]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for block in program.function(name).graph:
            todo.extend(op.function for op in block.instructions if isinstance(op, FunctionCallOp))
    return seen


def run(program: Program, ctx=None) -> Program:
    """Drops functions unreachable from main."""
    keep = reachable(program)
    return program.replace(functions=tuple(f for f in program.functions if f.name in keep))
