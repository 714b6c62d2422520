"""Hoisted writes: large registers set from values their block does not change.

A large register ("cell", `pcbatch.vm.ports`) written inside the block dispatch
needs a write port, and every branch that does not write it fills that port with
zeros at every step. For a buffer written rarely and read rarely, that fill is
most of the step: NUTS keeps its draws in ``[chains, draws, *event]`` buffers
that one block allocates and another returns, once per chain, and at 100 draws
the fill cost more than the gradient (measured: 16-26 ms per batched gradient at
100 draws against 2-3 ms at 10).

A write ``r = f(...)`` in block ``b`` *hoists* when its value depends, through
pure primitives of ``b`` and temporaries, only on registers that ``b`` never
writes: after the step those still hold their values at block entry. The write
is then made after the step instead, reading the loop state, under a two-way
conditional on "this step ran block ``b``"; inside the dispatch the block leaves
``r`` alone. A cell all of whose writes hoist leaves the ports altogether.

The conditional runs after the step's posted item assignments: reading a buffer
in a conditional *before* a scatter into it made XLA copy the buffer at every
step (measured, a 4 MB buffer: 800 against 80 us per step).
"""

from __future__ import annotations

from pcbatch.ir import setitem
from pcbatch.ir.nodes import BranchOp, PrimOp, Program
from pcbatch.ir.types import VariableAllocation, flatten
from pcbatch.vm.writes import SET_ITEM, VALUE, register_writes, touches


class HoistedWrites:
    """Which writes of large registers leave their block, and making them after a step."""

    def __init__(self, program: Program, layout, cells, posted=None):
        self.program, self.layout = program, layout
        cell_set = set(cells)
        candidates, blocked = {}, set()
        for b, block in enumerate(program.graph.blocks if cells else ()):
            for position, name, slice_ in _writes(program, b, block, posted):
                if slice_ is None:
                    blocked.add(name)
                else:
                    candidates.setdefault(name, []).append((b, position, slice_))
        self.sites: dict = {}  # block -> {(position, name): slice positions}
        self.names: dict = {}  # block -> names it writes after the step
        for name, sites in candidates.items():
            keys = {k for k, _ in layout.leaves.get(name, ())}
            if name in blocked or not keys & cell_set:
                continue
            for b, position, slice_ in sites:
                self.sites.setdefault(b, {})[(position, name)] = slice_
                self.names.setdefault(b, []).append(name)
        self.keys = {
            b: [k for name in names for k, _ in layout.leaves[name]]
            for b, names in self.names.items()
        }
        # per block: the instructions to run after the step, and the keys they read
        self.positions = {
            b: sorted({p for slice_ in at.values() for p in slice_})
            for b, at in self.sites.items()
        }
        self.reads = {b: self._reads(b, positions) for b, positions in self.positions.items()}

    def __bool__(self) -> bool:
        return bool(self.sites)

    def hoisted(self, block: int, position: int, name: str) -> bool:
        """Whether ``block`` writes ``name`` at ``position`` after the step."""
        return (position, name) in self.sites.get(block, ())

    def cell_keys(self, block: int) -> set:
        return set(self.keys.get(block, ()))

    def apply(self, machine, state: dict, block, entry_pc) -> dict:
        """After the step that ran ``block`` (threads at ``entry_pc`` before it): the
        hoisted writes of that block."""
        ops = machine.ops
        state = dict(state)
        state["vars"] = dict(state["vars"])
        for b, positions in sorted(self.positions.items()):
            keys = self.keys[b]
            needed = sorted(set(keys) | self.reads[b])
            operand = {
                "vars": {k: {"top": state["vars"][k]["top"]} for k in needed},
                "pc": {"top": entry_pc},
            }
            run = lambda s, b=b, positions=positions, keys=keys: _tops(
                machine.raw_blocks[b](s, positions), keys
            )
            values = ops.cond(block == b, run, lambda s, keys=keys: _tops(s, keys), operand)
            for key, top in zip(keys, values):
                state["vars"][key] = dict(state["vars"][key], top=top)
        return state

    def _reads(self, b: int, positions) -> set:
        """The register keys the instructions at ``positions`` of ``b`` read from state."""
        instructions = self.program.graph.blocks[b].instructions
        defined, keys = set(), set()
        for p in positions:
            op = instructions[p]
            for name in flatten(op.vars_in):
                if name not in defined:
                    keys |= {k for k, _ in self.layout.leaves.get(name, ())}
            defined |= set(flatten(op.vars_out))
        return keys


def _tops(state: dict, keys) -> list:
    return [state["vars"][k]["top"] for k in keys]


def _writes(program: Program, b: int, block, posted):
    """``(position, name, slice)`` for each register write in block ``b``: ``slice`` is the
    positions to run for the value when the write can be made after the step, or None.
    Posted item assignments are left out: they are made after the step already."""
    instructions = block.instructions
    written = {name for _, name, _ in register_writes(program, block)}
    for position, name, kind in register_writes(program, block):
        if kind == SET_ITEM and posted is not None and posted.set_item_slot(b, position):
            continue
        alone = kind == VALUE and _alone(block, position, name)
        if alone and program.alloc_of(name) == VariableAllocation.REGISTER:
            yield position, name, _slice(program, instructions, position, written)
        else:
            yield position, name, None


def _alone(block, position: int, name: str) -> bool:
    """Whether no instruction of ``block`` but the one at ``position`` touches ``name``."""
    others = (op for p, op in enumerate(block.instructions) if p != position)
    if any(touches(op, name, reads=True) for op in others):
        return False
    term = block.terminator
    return not (isinstance(term, BranchOp) and term.cond_var == name)


def _slice(program: Program, instructions, position: int, written: set):
    """The positions whose instructions compute the value written at ``position`` (in
    order), or None when it depends on something the block changes or has effects."""
    needed, todo = set(), [position]
    while todo:
        p = todo.pop()
        if p in needed:
            continue
        op = instructions[p]
        if not _pure(op, program):
            return None
        needed.add(p)
        for name in flatten(op.vars_in):
            source = _last_definition(instructions, p, name)
            if source is not None:
                if program.alloc_of(name) != VariableAllocation.TEMPORARY:
                    return None
                todo.append(source)
            elif name in written:
                return None
    return sorted(needed)


def _pure(op, program) -> bool:
    return (
        isinstance(op, PrimOp)
        and not setitem.is_in_place(op, program)
        and not getattr(op.function, "wants_mask", False)  # host callbacks
    )


def _last_definition(instructions, position: int, name: str):
    """The position of the last instruction before ``position`` that sets ``name``."""
    for p in range(position - 1, -1, -1):
        if touches(instructions[p], name, reads=False):
            return p
    return None
