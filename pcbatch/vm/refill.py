"""Refill: N independent inputs through B lanes, a finished lane taking the next input at once.

``execute(program, args, width=B)`` runs main on every one of the N inputs in
``args`` (each argument with a leading dimension N, or a per-example value that
every input shares) using ``min(B, N)`` lanes. Lane ``b`` starts on input ``b``;
when its thread halts, inside the same run loop, its results are written to row
``i`` of an ``[N, ...]`` output buffer (``i`` the input it ran), and the lane
starts the next pending input: that input's values in main's parameter
registers, every stack emptied, the program counter at main's entry. Free lanes
start together, once ``group`` of them are free (or as many as inputs remain):
a thread started alone would run main's first blocks with one active lane. Results
come back in input order and equal a plain batched call's: each thread runs
exactly the instructions it would run alone, only the lane it runs in changes.

Inputs start in input order, or by decreasing ``priority`` (`start_order`): when
thread lengths are heavy-tailed, a long input started last keeps the run going
with every other lane idle, and starting the longest first (an estimate is
enough) avoids that tail.

Nothing here depends on the scheduling policy: a policy numbers the blocks and
the VM always runs the lowest-numbered block holding a thread, whichever input
that thread is running.

On NumPy the feeder works between block executions (`machine._loop`'s
``after_block`` hook). On staged backends the pending inputs, a next-input
cursor, each lane's input index and the output buffers are part of the
``while_loop`` state (`StagedRefill`), and the refill is a conditional step
after each block.
"""

from __future__ import annotations

import numpy as np

from pcbatch.backends.numpy import NumpyBackend, NumpyLanes, StackFull, StackVariable
from pcbatch.ir.nodes import HaltOp, IndirectGotoOp, Program
from pcbatch.ir.types import VariableAllocation, flatten, map_pattern
from pcbatch.vm import machine

_NO_INPUT = -1


def check_width(width, option: str = "width") -> int:
    """``width`` as a positive int, or a ValueError saying what is wrong."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(f"map({option}=...) takes a positive number of lanes, got {width!r}")
    return int(width)


def group_size(group, lanes: int) -> int:
    """How many free lanes a refill waits for: ``group``, or by default a tenth of the
    lanes. A thread started alone runs main's first blocks alone (its lane the only one
    active there), so starting threads together keeps lane utilization up, at a small
    cost in occupancy."""
    if group is None:
        return max(1, lanes // 10)
    return min(check_width(group, "group"), lanes)


def start_order(priority, count: int, function: str) -> np.ndarray | None:
    """The order in which the inputs start: by decreasing ``priority``, ties in input
    order; None (input order) without one. ``priority`` must be known on the host:
    one real number per input, none of them NaN."""
    if priority is None:
        return None
    usage = f"{function}.map(priority=...) takes one real number per input"
    try:
        values = np.asarray(priority)
    except Exception as e:  # a traced value (inside jax.jit or tf.function) has no host value
        known = f"{usage}, known before the run"
        raise TypeError(f"{known}; got {type(priority).__name__}: {e}") from None
    if values.dtype.kind not in "biuf":
        raise TypeError(f"{usage}; got an array of dtype {values.dtype}")
    if values.shape != (count,):
        raise ValueError(f"{usage}: shape ({count},) for {count} inputs, got {values.shape}")
    values = values.astype(np.float64)
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        raise ValueError(f"{usage}; input {int(nan[0])} has NaN")
    return np.argsort(-values, kind="stable")


def execute(
    program: Program,
    args,
    *,
    width: int,
    group: int | None = None,
    priority=None,
    backend=None,
    max_stack_depth: int = machine.DEFAULT_MAX_STACK_DEPTH,
    max_steps: int | None = None,
    block_code_cache: dict | None = None,
):
    """Runs main on each of the N inputs in ``args`` through ``min(width, N)`` lanes.

    Args are as for `machine.execute`; the leading dimension of ``args`` is the
    number of inputs, not of lanes. ``max_steps`` bounds the VM steps of the whole
    run. Pending inputs start once ``group`` lanes are free (see `group_size`), or
    as many as remain, in the order of ``priority`` (see `start_order`). Returns
    main's results for every input, in input order.
    """
    backend = backend or NumpyBackend()
    width = check_width(width)
    group = group_size(group, width)
    if len(args) != len(program.vars_in):
        raise TypeError(f"{program.main}() takes {len(program.vars_in)} arguments, got {len(args)}")
    count = machine.batch_size_of(program, args)
    order = start_order(priority, count, program.main)
    options = dict(backend=backend, max_stack_depth=max_stack_depth, max_steps=max_steps)
    if count == 0:
        return _no_results(program, backend)
    if getattr(backend, "staged", False):
        return _execute_staged(program, args, count, order, width, group, block_code_cache, options)
    order = np.arange(count) if order is None else order
    return _execute_numpy(program, args, order, min(width, count), group, **options)


def _execute_staged(program, args, count, order, width, group, cache, options):
    """A staged run sees the inputs already in starting order (the order is data, so a
    new one does not recompile) and its results are put back in input order."""
    from pcbatch.vm import staged

    backend = options["backend"]
    if order is not None:
        args = _rows(program, args, count, order.astype(np.int32), backend.take)
    results = staged.execute(program, args, cache=cache, refill=(width, group), **options)
    if order is None:
        return results
    inverse = np.argsort(order).astype(np.int32)
    return map_pattern(lambda leaf: backend.take(leaf, inverse), results)


def _rows(program: Program, args, count: int, index: np.ndarray, take) -> list:
    """Each argument's rows ``index`` (an argument every input shares stays as it is)."""

    def pick(t, leaf):
        batched = machine.leads_with_batch(leaf, t) and np.shape(leaf)[0] == count
        return take(leaf, index) if batched else leaf

    return [
        map_pattern(pick, program.var_types[name].tensors, arg)
        for name, arg in zip(program.vars_in, args)
    ]


def _execute_numpy(program, args, order, lanes, group, *, backend, max_stack_depth, max_steps):
    inputs = machine.broadcast_inputs(program, args)
    first = [map_pattern(lambda leaf: leaf[order[:lanes]], arg) for arg in inputs]
    run = machine.start(program, first, backend, lanes, max_stack_depth)
    feeder = _Feeder(run, inputs, order, group)
    runners = [machine._block_runner(program, b, backend) for b in program.graph]
    try:
        machine._loop(run, runners, max_steps, feeder.after_block)
    except StackFull as full:
        members = feeder.lane_input[full.rows]
        raise machine._overflow_error(
            run, full, inputs, max_stack_depth, True, members=members[members >= 0]
        ) from None
    results = tuple(feeder.outputs)
    return results[0] if len(results) == 1 else results


def _no_results(program: Program, backend):
    """Main's results for zero inputs: arrays with a leading dimension 0."""
    zeros = backend.zeros if getattr(backend, "staged", False) else np.zeros
    results = tuple(
        map_pattern(lambda t: zeros((0, *t.shape), t.dtype), program.var_types[name].tensors)
        for name in program.vars_out
    )
    return results[0] if len(results) == 1 else results


def _halting_blocks(program: Program) -> frozenset:
    """Indices of the blocks after which a thread may have halted (main's return, a halt)."""
    return frozenset(
        i
        for i, block in enumerate(program.graph.blocks)
        if isinstance(block.terminator, (IndirectGotoOp, HaltOp))
    )


class _Feeder:
    """NumPy: collects finished threads' results and starts pending inputs in their lanes."""

    def __init__(self, run, inputs: list, order: np.ndarray, group: int):
        count = len(order)
        self.run, self.inputs, self.count, self.group = run, inputs, count, group
        self.order = order  # the inputs in the order they start
        self.lane_input = order[: run.batch_size].copy()  # each lane's input, or _NO_INPUT
        self.cursor = run.batch_size  # how many inputs have started
        self.halt = len(run.program.graph)
        self.may_halt = _halting_blocks(run.program)
        types = run.program.var_types
        self.outputs = [
            map_pattern(lambda t: np.zeros((count, *t.shape), t.dtype), types[name].tensors)
            for name in run.program.vars_out
        ]

    def after_block(self, block: int) -> None:
        if block not in self.may_halt:
            return
        run = self.run
        pc = run.pc.read(run.backend.all_lanes(run.batch_size))
        halted = pc == self.halt
        done = np.flatnonzero(halted & (self.lane_input != _NO_INPUT))
        if not len(done):
            return
        self._collect(done)
        free = np.flatnonzero(halted)
        pending = self.count - self.cursor
        if pending and len(free) >= min(self.group, pending):
            self._start(free)

    def _collect(self, done: np.ndarray) -> None:
        lanes = NumpyLanes(done, len(done), self.run.batch_size)
        rows = self.lane_input[done]
        for out, name in zip(self.outputs, self.run.program.vars_out):
            for buffer, var in zip(flatten(out), flatten(self.run.variables[name])):
                buffer[rows] = var.read(lanes)
        self.lane_input[done] = _NO_INPUT

    def _start(self, free: np.ndarray) -> None:
        run = self.run
        take = free[: self.count - self.cursor]
        new = self.order[self.cursor : self.cursor + len(take)]
        self.cursor += len(take)
        self.lane_input[take] = new
        lanes = NumpyLanes(take, len(take), run.batch_size)
        for var in (v for pattern in run.variables.values() for v in flatten(pattern)):
            if isinstance(var, StackVariable):
                var.depth[take] = 0  # a halted thread's stacks are empty; make sure
        for name, arg in zip(run.program.vars_in, self.inputs):
            if run.program.alloc_of(name) == VariableAllocation.NULL:
                continue
            leaves = zip(flatten(run.variables[name]), flatten(arg), flatten(
                run.program.var_types[name].tensors))
            for var, leaf, t in leaves:
                var.update(run.backend.place(leaf[new], lanes, t), lanes)
        run.pc.depth[take] = 0
        run.pc.update(run.backend.place(self.halt, lanes, machine.PC_TYPE), lanes)
        run.pc.push(run.backend.place(0, lanes, machine.PC_TYPE), lanes)


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
        pc = state["pc"]
        state["pc"] = dict(
            pc, top=ops.where(take, 0, pc["top"]), depth=ops.where(take, 1, pc["depth"])
        )
        return state

    def outputs(self, final: dict) -> list:
        out = final["refill"]["out"]
        types = self.m.program.var_types
        return [
            _unflatten(types[name].tensors, [buffer[: self.count] for buffer in buffers])
            for buffers, name in zip(out, self.m.program.vars_out)
        ]


def _unflatten(pattern, values):
    from pcbatch.vm.staged import _unflatten as unflatten

    return unflatten(pattern, values)
