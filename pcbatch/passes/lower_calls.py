"""Lowering: structured functions become one flat graph for the stack machine.

Assumes: an allocated structured program (calls carry ``saves``). Guarantees:
a lowered program (``functions == ()``, ``graph`` set, main's entry first if
main's function comes first) in which

- a call ``y = f(a, b)`` that saves ``s`` becomes, in the calling block,
  ``s = copy(s) [push]; f.x, f.y = copy(a, b); push_goto(ret, f.entry)`` and a
  new block ``ret: y = copy(f.__ret0); pop(s); <rest of the block>``. The
  argument move is one parallel copy, so ``gcd(b, a)`` and ``x = f(x)`` are
  correct without temporaries;
- a tail call moves its arguments and jumps: ``goto f.entry``;
- ``return`` becomes ``indirect_goto`` (pop the program-counter stack);
- the program's own assignments update in place (``skip_push_mask`` = all
  outputs): in structured IR an assignment is just an assignment, and only the
  compiler's saves push.

``program.entries`` maps each function to its entry label, so the VM can name
the function whose recursion overflows a stack.
"""

from __future__ import annotations

import dataclasses

from pcbatch.ir.nodes import (
    Block,
    ControlFlowGraph,
    FunctionCallOp,
    GotoOp,
    IndirectGotoOp,
    PopOp,
    PrimOp,
    PushGotoOp,
    ReturnOp,
    copy_op,
    writes,
)
from pcbatch.passes import allocate


def _argument_move(call: FunctionCallOp, callee, invariant=frozenset()) -> list:
    # An invariant parameter passed on as itself is already in place. (Only those: a
    # parameter a call may have clobbered must still be read here, so that the
    # restore before it is kept.)
    pairs = [
        (src, dst)
        for src, dst in zip(call.vars_in, callee.vars_in)
        if not (src == dst and dst in invariant)
    ]
    if not pairs:
        return []
    return [copy_op([s for s, _ in pairs], [d for _, d in pairs], loc=call.loc)]


def _result_move(call: FunctionCallOp, callee) -> list:
    pairs = [(src, dst) for src, dst in zip(callee.vars_out, call.vars_out) if src != dst]
    if not pairs:
        return []
    return [copy_op([s for s, _ in pairs], [d for _, d in pairs], loc=call.loc)]


def _lower_block(program, block: Block, invariant=frozenset()) -> list:
    lowered = []
    label, ops = block.label, []
    for op in block.instructions:
        if isinstance(op, PrimOp):
            # A program's own assignments overwrite in place; only saves push.
            ops.append(dataclasses.replace(op, skip_push_mask=frozenset(writes(op))))
            continue
        callee = program.function(op.function)
        if op.saves:
            ops.append(copy_op(op.saves, op.saves, push=True, loc=op.loc))
        ops.extend(_argument_move(op, callee, invariant))
        if op.tail:
            lowered.append(Block(label, tuple(ops), GotoOp(callee.graph.entry, op.loc)))
            return lowered
        return_label = f"{block.label}:{len(lowered) + 1}"
        lowered.append(
            Block(label, tuple(ops), PushGotoOp(return_label, callee.graph.entry, op.loc))
        )
        label, ops = return_label, _result_move(op, callee)
        if op.saves:
            ops.append(PopOp(tuple(op.saves), op.loc))
    terminator = block.terminator
    if isinstance(terminator, ReturnOp):
        terminator = IndirectGotoOp(terminator.loc)
    lowered.append(Block(label, tuple(ops), terminator))
    return lowered


def run(program, ctx=None):
    """Flattens every function into one graph of stack-machine blocks."""
    main = program.function(program.main)
    ordered = [main] + [fn for fn in program.functions if fn.name != program.main]
    clobbers = allocate.may_write(program)
    blocks = []
    for fn in ordered:
        invariant = allocate.invariant_parameters(fn, clobbers)
        for block in fn.graph:
            blocks.extend(_lower_block(program, block, invariant))
    entries = {fn.name: fn.graph.entry for fn in ordered}
    return program.replace(
        functions=(),
        graph=ControlFlowGraph(tuple(blocks)),
        entries=entries,
    )
