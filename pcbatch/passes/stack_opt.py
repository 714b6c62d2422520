"""Pop-push fusion: drop a restore that the next save would undo.

Assumes: a lowered program. Guarantees: the same results with fewer stack
operations. When one block pops (restores) ``v`` after a call and later saves
``v`` again before the next call, and nothing in between or after reads ``v``
(and nothing in between writes it), the restored value is never observed: the
saved copy stays on the stack untouched until the second call's pop. Both
operations go.

Example::

    r:1:  x = copy(fib.__ret0); pop(fib.n); t = n - 2 ...; fib.n = copy(fib.n) [push]; ...
  becomes, when ``t`` is computed from a copy taken before the first call,
    r:1:  x = copy(fib.__ret0); ...
"""

from __future__ import annotations

import dataclasses

from pcbatch.ir.nodes import ControlFlowGraph, PopOp, PrimOp, copy_op, reads, writes


def _is_save(op) -> bool:
    return (
        isinstance(op, PrimOp)
        and op.is_copy
        and not op.skip_push_mask
        and tuple(op.vars_in) == tuple(_flat_out(op))
    )


def _flat_out(op) -> tuple:
    return tuple(writes(op))


def _fusable(ops, pop_at: int, save_at: int, var: str) -> bool:
    between = ops[pop_at + 1 : save_at]
    if any(var in reads(op) or var in writes(op) for op in between):
        return False
    return not any(var in reads(op) for op in ops[save_at + 1 :])


def _fuse_block(ops: list) -> list:
    for pop_at, pop in enumerate(ops):
        if not isinstance(pop, PopOp):
            continue
        save_at = next((j for j in range(pop_at + 1, len(ops)) if _is_save(ops[j])), None)
        if save_at is None:
            continue
        saved = ops[save_at].vars_in
        fused = {v for v in pop.vars if v in saved and _fusable(ops, pop_at, save_at, v)}
        if not fused:
            continue
        kept_pops = tuple(v for v in pop.vars if v not in fused)
        kept_saves = tuple(v for v in saved if v not in fused)
        ops[pop_at] = dataclasses.replace(pop, vars=kept_pops) if kept_pops else None
        ops[save_at] = (
            copy_op(kept_saves, kept_saves, push=True, loc=ops[save_at].loc) if kept_saves else None
        )
    return [op for op in ops if op is not None]


def run(program, ctx=None):
    """Fuses pop/push pairs inside every block of a lowered program."""
    blocks = []
    for block in program.graph:
        ops = _fuse_block(list(block.instructions))
        blocks.append(dataclasses.replace(block, instructions=tuple(ops)))
    return program.replace(graph=ControlFlowGraph(tuple(blocks)))
