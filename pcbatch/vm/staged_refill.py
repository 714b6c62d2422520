"""Refill on the staged machine: pending inputs and output buffers in the loop state.

The staged counterpart of `pcbatch.vm.refill`'s feeder: the pending inputs, a
next-input cursor, each lane's input index and the output buffers are part of the
``while_loop`` state, and the refill is a conditional step after each block
(`StagedRefill.after_step`). Results equal the eager refill's and a plain call's.
"""

from __future__ import annotations

from pcbatch.ir.types import flatten, map_pattern, unflatten


class StagedRefill:
    """The refill of a staged machine: its loop state and the step that refills lanes.

    State (under ``state["refill"]``): ``inputs`` (main's parameters for every input,
    leading dimension N, or 1 for a value every input shares), ``cursor`` (the next
    pending input), ``lane_input`` (per lane, the input it runs; N when none), and
    ``out`` (per result leaf, an ``[N + lanes, ...]`` buffer: row ``i < N`` is input
    ``i``'s result, and lane ``b`` writes row ``N + b`` when it has nothing to write,
    so every scatter has distinct in-range rows on every backend).
    """

    def __init__(self, machine_, count: int, group: int):
        self.m, self.count, self.group = machine_, count, group

    def first_inputs(self, inputs: list) -> list:
        """The inputs the lanes start with: the first ``lanes`` rows."""
        lanes = self.m.layout.batch_size
        cut = lambda leaf: leaf if leaf.shape[0] == 1 else leaf[:lanes]
        return [map_pattern(cut, value) for value in inputs]

    def initial(self, inputs: list) -> dict:
        ops, layout = self.m.ops, self.m.layout
        lanes = layout.batch_size
        pending = {}
        for name, value in zip(self.m.program.vars_in, inputs):
            for (key, _), leaf in zip(layout.leaves.get(name, ()), flatten(value)):
                pending[key] = leaf
        out = [
            [ops.zeros((self.count + lanes, *t.shape), t.dtype) for _, t in layout.leaves[name]]
            for name in self.m.program.vars_out
        ]
        return {
            "inputs": pending,
            "cursor": ops.scalar_int(lanes),
            "lane_input": ops.arange(lanes),
            "out": out,
        }

    def after_step(self, state: dict) -> dict:
        """Stores the results of threads that halted in this step; refills free lanes once
        ``group`` of them (or as many as there are pending inputs) are free."""
        ops, count = self.m.ops, self.count
        r = state["refill"]
        done = ops.equal(state["pc"]["top"], self.m.halt) & (r["lane_input"] < count)
        # Outside any conditional, so XLA scatters into the [N, ...] buffers in place
        # (a conditional branch that writes a buffer copies it).
        out = self._collect(state, done)
        r = dict(r, out=out, lane_input=ops.where(done, count, r["lane_input"]))
        state = dict(state, refill=r)
        pending = count - r["cursor"]
        free = ops.count(ops.equal(state["pc"]["top"], self.m.halt))
        start = ops.any(done) & (pending > 0) & (free >= ops.minimum(pending, self.group))
        index = ops.where(start, ops.scalar_int(1), ops.scalar_int(0))
        return ops.switch(index, [lambda s: s, self._refill], state)

    def _collect(self, state: dict, done) -> list:
        ops, layout, count = self.m.ops, self.m.layout, self.count
        spare = count + ops.arange(layout.batch_size)
        rows = ops.where(done, state["refill"]["lane_input"], spare)
        return [
            [
                ops.scatter(buffer, rows, state["vars"][key]["top"])
                for buffer, (key, _) in zip(buffers, layout.leaves[name])
            ]
            for buffers, name in zip(state["refill"]["out"], self.m.program.vars_out)
        ]

    def _refill(self, state: dict) -> dict:
        ops, layout, count = self.m.ops, self.m.layout, self.count
        lanes = layout.batch_size
        r = dict(state["refill"])
        free = ops.equal(state["pc"]["top"], self.m.halt)
        new = r["cursor"] + ops.cumulative_count(free) - 1
        take = free & (new < count)
        r["lane_input"] = ops.where(take, new, r["lane_input"])
        r["cursor"] = ops.minimum(r["cursor"] + ops.count(free), count)
        state = dict(state, refill=r, vars=dict(state["vars"]))
        source = ops.minimum(new, count - 1)
        for key, t in (kt for keys in layout.leaves.values() for kt in keys):
            leaf = state["vars"][key]
            if key in r["inputs"]:
                pending = r["inputs"][key]
                picked = pending if pending.shape[0] == 1 else ops.take(pending, source)
                top = ops.where(take, ops.place(picked, lanes, t, True), leaf["top"])
                leaf = dict(leaf, top=top)
            if key in layout.full:
                leaf = dict(leaf, depth=ops.where(take, 0, leaf["depth"]))
            state["vars"][key] = leaf
        pc = dict(state["pc"], top=ops.where(take, 0, state["pc"]["top"]))
        if "depth" in pc:  # a program without calls has no program-counter stack
            pc["depth"] = ops.where(take, 1, pc["depth"])
        state["pc"] = pc
        return state

    def outputs(self, final: dict) -> list:
        out = final["refill"]["out"]
        types = self.m.program.var_types
        return [
            unflatten(types[name].tensors, [buffer[: self.count] for buffer in buffers])
            for buffers, name in zip(out, self.m.program.vars_out)
        ]
