"""How a run fails, in the user's terms: stack overflows and step limits.

Both machines (eager and staged) stop a run whose recursion is deeper than
``max_stack_depth`` or that takes more than ``max_steps`` steps; the errors name
the user's function and where its threads wait, from the program counters (host
integers, whichever machine ran).
"""

from __future__ import annotations

import numpy as np

from pcbatch.errors import PcbatchError, where
from pcbatch.ir.nodes import Program, PushGotoOp

DEFAULT_MAX_STACK_DEPTH = 15


class StepLimitError(PcbatchError, RuntimeError):
    """A run took more VM steps than ``max_steps`` (probably a loop that never ends)."""


def step_limit_error(program: Program, pcs, max_steps: int) -> StepLimitError:
    """The error for a run stopped by ``max_steps``, naming where threads still are
    (``pcs``: every thread's program counter, on the host)."""
    pcs = np.asarray(pcs)
    halt = len(program.graph)
    waiting = sorted(set(int(p) for p in pcs[pcs < halt]))
    places = []
    for index in waiting[:5]:
        block = program.graph.blocks[index]
        loc = next((op.loc for op in block.instructions if op.loc), block.terminator.loc)
        places.append(f"{block.label}{where(loc)}")
    live = int(np.count_nonzero(pcs < halt))
    return StepLimitError(
        f"{program.main}() did not finish in max_steps={max_steps} VM steps; {live} "
        f"thread(s) still running, waiting at: {'; '.join(places)}. If the program is "
        "meant to run this long, pass a larger max_steps."
    )


def block_owners(program: Program) -> dict:
    """Block label -> the function it belongs to (blocks are contiguous per function)."""
    entry_of = {label: fn for fn, label in program.entries.items()}
    owners, current = {}, program.main
    for block in program.graph:
        current = entry_of.get(block.label, current)
        owners[block.label] = current
    return owners


def overflowing_function(program: Program, block, owners: dict) -> str:
    """The function whose recursion filled a stack in ``block``: the callee of a block
    that ends in a call (its own pushes and the program counter's are for that call)."""
    if block is None:
        return program.main
    term = block.terminator
    label = term.target if isinstance(term, PushGotoOp) else block.label
    return owners.get(label, program.main)
