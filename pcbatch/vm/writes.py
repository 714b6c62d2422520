"""Which registers the instructions of a lowered block write (and touch).

The staged machine's write ports (`pcbatch.vm.ports`) and hoisted writes
(`pcbatch.vm.hoist`) both plan from this, so they agree on what a block writes.
"""

from __future__ import annotations

from pcbatch.ir import setitem
from pcbatch.ir.nodes import PopOp, Program
from pcbatch.ir.types import VariableAllocation, flatten

POP, SET_ITEM, VALUE = "pop", "set_item", "value"


def register_writes(program: Program, block):
    """``(position, name, kind)`` for each register an instruction of ``block`` writes:
    ``POP`` (a pop restores it), ``SET_ITEM`` (an item assignment into its storage) or
    ``VALUE`` (a primitive's result is bound to it). Temporaries are not registers."""
    for position, op in enumerate(block.instructions):
        if isinstance(op, PopOp):
            for name in op.vars:
                yield position, name, POP
        elif setitem.is_in_place(op, program):
            yield position, op.vars_out, SET_ITEM
        else:
            for name in flatten(op.vars_out):
                if program.alloc_of(name) not in (
                    VariableAllocation.NULL,
                    VariableAllocation.TEMPORARY,
                ):
                    yield position, name, VALUE


def touches(op, name: str, reads: bool) -> bool:
    """Whether ``op`` writes, pops or pushes ``name`` (or, with ``reads``, reads it)."""
    if isinstance(op, PopOp):
        return name in op.vars
    return name in flatten(op.vars_out) or (reads and name in flatten(op.vars_in))
