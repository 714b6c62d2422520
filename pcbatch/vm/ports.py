"""Write ports: large registers leave the block dispatch as a few fresh buffers.

The staged VM dispatches a step to its block with a conditional (a tree of
two-way ``lax.cond`` on JAX). XLA gives a conditional's outputs one buffer for
all branches, so a register that one branch writes and the others pass through
is copied at every step: measured on NUTS (100 chains, 100-D), 38 copies of
``[100, 100]`` registers per step, most of the step's time.

Instead, the large registers ("cells": a register whose ``[batch, *shape]``
array has at least `MIN_ELEMENTS` elements) never leave the conditional as
such. Each cell gets a fixed *port* of its shape and dtype, chosen so that no
block writes two cells through the same port (a greedy colouring of the cells
written together). A branch returns, besides the small part of the loop
state, each port's value (the cell it wrote, or zeros) and a flag per cell
saying whether it wrote it; after the conditional, each cell takes its port's
value under a two-way conditional on that flag, which XLA does without
copying. A step then costs what its block writes, not what the program holds.

Writes made after the step instead (`pcbatch.vm.hoist`: result buffers allocated,
copied or returned from values the block keeps) need no port, nor does a cell that
no block writes inside the dispatch.

Which cells a block writes is read off its instructions (results bound to a
register, pops, item assignments made in the block); a branch that writes a
cell outside that set is a bug, and raises while tracing.
"""

from __future__ import annotations

import collections

import numpy as np

from pcbatch.ir.nodes import Program
from pcbatch.vm.hoist import HoistedWrites
from pcbatch.vm.writes import SET_ITEM, register_writes

#: registers smaller than this (elements over the batch) pass through the conditional:
#: copying them costs less than a conditional of their own
MIN_ELEMENTS = 1024


class Ports:
    """The port of each large register and the cells each block writes."""

    def __init__(self, program: Program, layout, posted):
        self.layout = layout
        types = {k: t for keys in layout.leaves.values() for k, t in keys}
        self.cells = [k for k in sorted(types) if _elements(layout, types[k]) >= MIN_ELEMENTS]
        cell_set = set(self.cells)
        self.hoisted = HoistedWrites(program, layout, self.cells, posted)
        self.writes = [
            sorted((_written(program, layout, posted, b) & cell_set) - self.hoisted.cell_keys(b))
            for b in range(len(program.graph))
        ]
        # a cell no block writes inside the dispatch (read-only, or all its writes
        # hoisted) needs no port: it keeps its value through the step
        ported = sorted({k for written in self.writes for k in written})
        self.group = {k: (types[k].shape, np.dtype(types[k].dtype).str) for k in ported}
        self.port = _colour(ported, self.writes, self.group)
        self.shapes = {self.port[k]: (types[k].shape, np.dtype(types[k].dtype)) for k in ported}

    def __bool__(self) -> bool:
        return bool(self.cells)

    def wrap(self, ops, block: int, branch):
        """``branch`` (state -> state) as state -> (state without cells, ports, flags)."""
        writes = set(self.writes[block])

        def ported(state):
            before = {k: state["vars"][k]["top"] for k in self.cells}
            after = branch(state)
            ports = {}
            for key in self.cells:
                top = after["vars"][key]["top"]
                if top is not before[key] and key not in writes:
                    raise AssertionError(f"block {block} writes {key} outside its port plan")
                if key in writes:
                    ports[self.port[key]] = top
            for port, (shape, dtype) in self.shapes.items():
                if port not in ports:
                    ports[port] = ops.zeros((self.layout.batch_size, *shape), dtype)
            flags = np.array([key in writes for key in self.cells], bool)
            return _without_cells(after, self.cells), ports, flags

        return ported

    def restore(self, ops, block, old: dict, state: dict, ports: dict, flags) -> dict:
        """The state after the step: each cell from its port where its block wrote it."""
        state = dict(state)
        state["vars"] = dict(state["vars"])
        mask = old["pc"]["top"] == block
        for i, key in enumerate(self.cells):
            top = old["vars"][key]["top"]
            if key in self.port:
                top = ops.cond_where(flags[i], mask, ports[self.port[key]], top)
            state["vars"][key] = dict(state["vars"][key], top=top)
        return state


def _elements(layout, t) -> int:
    return layout.batch_size * int(np.prod(t.shape, dtype=np.int64))


def _without_cells(state: dict, cells) -> dict:
    state = dict(state)
    state["vars"] = dict(state["vars"])
    for key in cells:
        leaf = dict(state["vars"][key])
        del leaf["top"]
        state["vars"][key] = leaf
    return state


def _written(program: Program, layout, posted, b: int) -> set:
    """The register keys whose top block ``b`` may write inside the dispatch."""
    keys = set()
    for position, name, kind in register_writes(program, program.graph.blocks[b]):
        if kind == SET_ITEM and posted.set_item_slot(b, position) is not None:
            continue  # posted: made after the block
        keys |= {k for k, _ in layout.leaves.get(name, ())}
    return keys


def _colour(cells, writes, group) -> dict:
    """Cell -> port name: cells of one shape and dtype that one block writes get
    different ports."""
    together = collections.defaultdict(set)
    for written in writes:
        for key in written:
            together[key].update(k for k in written if k != key)
    index, names = {}, {}
    for key in cells:
        taken = {index[k] for k in together[key] if k in index and group[k] == group[key]}
        index[key] = next(i for i in range(len(cells) + 1) if i not in taken)
        names.setdefault((group[key], index[key]), f"port{len(names)}")
    return {key: names[(group[key], index[key])] for key in cells}
