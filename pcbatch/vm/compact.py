"""Compaction: a block run on its active rows only, gathered into a smaller bucket.

The staged VM runs every block full width under a mask, so a block with 3 of
1,000 threads at it costs what 1,000 cost. With compaction on (a backend's
``compaction`` option), each block chooses per step between

- full width, under the mask (as without compaction), and
- one of a few *buckets* of ``k`` lanes (``k`` below the batch width): when at
  most ``k`` threads are at the block, their row numbers are gathered
  (the backend's ``active_rows``: on JAX padded with the out-of-range row
  ``batch``, dropped on the way back; on TensorFlow with inactive rows, written
  back unchanged), the tops and stack depths of the registers the block touches
  are gathered at those rows, the block's own code runs at width ``k``, and what
  it changed is scattered back into those rows only.

Stacks are not gathered: a narrow leaf keeps the full stack and the row numbers
(``"rows"``), and `StagedMachine.push`/`pop` index the stack through them, so
a push or pop touches the same stack rows either way.

Results are identical to full width: the block's code sees the active rows'
values, and inactive rows are neither read (their results are masked) nor
written. The choice is made inside the block's branch of the dispatch.

Buckets are fixed at trace time (each costs one more trace and compilation of
every block that calls a primitive); `pcbatch.backends.compaction.buckets` picks
them from the option.
"""

from __future__ import annotations

import copy
import dataclasses

from pcbatch.ir.nodes import PopOp, reads
from pcbatch.ir.types import flatten


def narrow_machine(machine, width: int):
    """``machine`` re-laid-out for ``width`` lanes: the blocks traced on it run narrow."""
    narrow = copy.copy(machine)
    narrow.layout = dataclasses.replace(machine.layout, batch_size=width)
    return narrow


class Compaction:
    """Wraps each block of a staged machine so that it may run on a bucket of lanes."""

    def __init__(self, machine, widths: list[int], make_block):
        """``make_block(machine, index)``: the staged machine's block ``index``, traced
        on ``machine`` (here, a narrow copy of it)."""
        self.m = machine
        self.widths = widths
        narrow = [narrow_machine(machine, k) for k in widths]
        self.narrow_blocks = [[make_block(n, i) for i in range(machine.halt)] for n in narrow]

    def wrap(self, index: int, block):
        """``block`` (state -> state) choosing its width per step from its active count.

        A block that calls no primitive (only copies, pushes, pops and jumps) stays full
        width: narrow, it would save masked selects and pay as much in gathers and
        scatters, plus its compilation per bucket.
        """
        if all(f is None for f in getattr(block, "functions", [None])):
            return block
        ops, widths = self.m.ops, self.widths
        narrow = [self._narrow(blocks[index], j) for j, blocks in enumerate(self.narrow_blocks)]

        def run(state):
            active = ops.count(ops.equal(state["pc"]["top"], index))
            # Branch j runs when widths[j-1] < active <= widths[j]; the last one is full width.
            choice = sum(ops.as_index(active > k) for k in widths)
            return ops.switch(choice, [*narrow, block], state)

        return run

    def _narrow(self, block, bucket: int):
        """``block`` run on the first ``widths[bucket]`` active rows (all of them, when
        this bucket is chosen)."""
        m = self.m
        keys = touched(m, block.block)

        def run(state):
            mask = m.ops.equal(state["pc"]["top"], block.index)
            rows = m.ops.active_rows(mask, self.widths[bucket])
            before = gather(m, state, rows, keys)
            state = scatter(m, state, before, block(before), rows)
            if "compacted" in state:  # profiling
                state["compacted"] = m.ops.add_at(state["compacted"], bucket, 1)
            return state

        return run


def touched(m, block) -> list:
    """The register keys ``block`` reads or writes: only those are gathered here, and
    only those ride through the block's loop in TensorFlow's dispatch
    (`pcbatch.vm.staged._Registers`)."""
    names = set()
    for op in block.instructions:
        if isinstance(op, PopOp):
            names.update(op.vars)
        else:
            names.update(flatten(op.vars_in))
            names.update(flatten(op.vars_out))
    names.update(reads(block.terminator))  # a branch's or a threaded call's condition
    return sorted(k for name in names for k, _ in m.layout.leaves.get(name, ()))


def gather(m, state: dict, rows, keys) -> dict:
    """The registers ``keys`` and the program counter of the threads in ``rows``
    (padding rows: halted, never active)."""
    ops = m.ops
    narrow = dict(state, vars={k: _gather_leaf(ops, state["vars"][k], rows) for k in keys})
    pc = _gather_leaf(ops, state["pc"], rows)
    valid = rows < m.layout.batch_size
    pc["top"] = ops.where(valid, pc["top"], ops.full_pc(_width(rows), m.halt))
    narrow["pc"] = pc
    return narrow


def _width(rows) -> int:
    return int(rows.shape[0])


def _gather_leaf(ops, leaf: dict, rows) -> dict:
    out = dict(leaf, top=ops.take_rows(leaf["top"], rows))
    if "stack" in leaf:
        out["depth"] = ops.take_rows(leaf["depth"], rows)
        out["rows"] = rows  # the stack stays whole: push and pop index it through these
    return out


def scatter(m, state: dict, before: dict, after: dict, rows) -> dict:
    """``state`` with what the narrow run changed (``before`` -> ``after``) written back
    into ``rows``; what it left alone keeps its identity."""
    ops = m.ops
    out = dict(state)
    out["vars"] = dict(state["vars"])
    for k, narrow in before["vars"].items():
        out["vars"][k] = _scatter_leaf(ops, state["vars"][k], narrow, after["vars"][k], rows)
    out["pc"] = _scatter_leaf(ops, state["pc"], before["pc"], after["pc"], rows)
    for key, value in after.items():
        if key not in ("vars", "pc"):
            out[key] = value  # flags and per-block counts: the same at any width
    return out


def _scatter_leaf(ops, leaf: dict, before: dict, after: dict, rows) -> dict:
    out = dict(leaf)
    for key in ("top", "depth"):
        if key in leaf and after[key] is not before[key]:
            out[key] = ops.put_rows(leaf[key], rows, after[key])
    if "stack" in leaf:
        out["stack"] = after["stack"]  # written in place at the right rows, if at all
    return out
