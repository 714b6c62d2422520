"""Jump threading: a jump or call into a block that only tests and branches takes the test along.

Assumes: a lowered program with allocated variables. Guarantees: the same results
in fewer VM steps (and sometimes fewer blocks). A block ``B`` is *threadable* when
its instructions write only TEMPORARY variables (so running them anywhere else
changes nothing any other block can see), there are at most `MAX_THREADED` of
them, and it ends in a branch or a goto. A block ``P`` that ends in ``goto B`` or in a call of ``B``
(``push_goto B``) gets a copy of ``B``'s instructions and ``B``'s terminator: a
branch after a call becomes a conditional call (`PushGotoOp` with
``cond_var``). Every thread that ran ``P`` and then ``B`` now runs ``P`` alone,
so each such pair costs the batch one step instead of two.

Why it pays: a recursive function usually starts with its base-case test
(``if n <= 2``). Unthreaded, every call is a step that runs the caller's block,
then a step that runs the test, and the test's step is a separate VM step for
all lanes waiting there (Fibonacci: a third of all steps). ``B`` stays in the
program while anything still reaches it (the outermost call, a branch's edge);
one that nothing reaches is dropped unless it is a function's entry, so function
grouping (block order) does not move.

Example::

    fib.endif1:  t = n - 1; n = copy(t); push_goto fib.entry (return to fib.endif1:1)
    fib.entry:   c = n <= 2; branch c then fib.then1 else fib.endif1
  becomes
    fib.endif1:  t = n - 1; n = copy(t); c = n <= 2;
                 push_branch c then fib.then1 else fib.endif1 (return to fib.endif1:1)

Not threaded: sync points (`pcbatch.sync` must stop every thread there), blocks
with pops or calls, and a block into itself.
"""

from __future__ import annotations

import dataclasses

from pcbatch.ir.nodes import (
    Block,
    BranchOp,
    ControlFlowGraph,
    GotoOp,
    PrimOp,
    PushGotoOp,
    is_sync_label,
    writes,
)
from pcbatch.ir.types import VariableAllocation

#: the most instructions a threaded block may have (each is copied into every jump to it)
MAX_THREADED = 4


def run(program, ctx=None):
    graph = program.graph
    blocks = tuple(_threaded(program, block, graph) for block in graph.blocks)
    return program.replace(graph=ControlFlowGraph(_reachable(program, blocks)))


def _reachable(program, blocks: tuple) -> tuple:
    """``blocks`` less those no jump reaches any more (a loop test every edge now
    carries). Function entries stay: their labels say where each function starts."""
    by_label = {b.label: b for b in blocks}
    seen, todo = set(), [blocks[0].label]
    while todo:
        label = todo.pop()
        if label not in seen:
            seen.add(label)
            todo.extend(by_label[label].successors)
    keep = seen | set(program.entries.values())
    return tuple(b for b in blocks if b.label in keep)


def _threaded(program, block: Block, graph) -> Block:
    term = block.terminator
    if isinstance(term, GotoOp) or (isinstance(term, PushGotoOp) and term.cond_var is None):
        target = graph.block(term.target)
        if target is not block and _threadable(program, target):
            return Block(
                block.label,
                block.instructions + target.instructions,
                _combined(term, target.terminator),
            )
    return block


def _threadable(program, block: Block) -> bool:
    if is_sync_label(block.label) or len(block.instructions) > MAX_THREADED:
        return False
    if not isinstance(block.terminator, (BranchOp, GotoOp)):
        return False
    temporary = VariableAllocation.TEMPORARY
    return all(
        isinstance(op, PrimOp) and all(program.alloc_of(v) == temporary for v in writes(op))
        for op in block.instructions
    )


def _combined(jump, then):
    """The terminator of ``jump`` (a goto or call) followed by ``then`` (a goto or branch)."""
    loc = then.loc
    if isinstance(jump, GotoOp):
        return then
    if isinstance(then, GotoOp):
        return dataclasses.replace(jump, target=then.target, loc=loc)
    return dataclasses.replace(
        jump,
        target=then.true_target,
        cond_var=then.cond_var,
        false_target=then.false_target,
        loc=loc,
    )
