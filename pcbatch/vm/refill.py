"""Refill: N independent inputs through B lanes, a finished lane taking the next input at once.

A call with ``width=B`` (``fn.map(..., width=B)``; `pcbatch.vm.dispatch.execute`)
runs main on every one of the N inputs in
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

This module holds the options every refill checks, and the eager machine's
feeder: it works between block executions (`machine.loop`'s ``after_block``
hook), through the backend protocol. On staged backends the refill is part of the
loop state (`pcbatch.vm.staged_refill`); `pcbatch.vm.dispatch` chooses between them.
"""

from __future__ import annotations

import numpy as np

from pcbatch.backends.base import StackFull
from pcbatch.ir.nodes import HaltOp, IndirectGotoOp, Program
from pcbatch.ir.types import VariableAllocation, flatten, map_pattern, unflatten
from pcbatch.vm import machine
from pcbatch.vm.inputs import broadcast_inputs, leads_with_batch

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


def rows(program: Program, args, count: int, index: np.ndarray, take) -> list:
    """Each argument's rows ``index`` (an argument every input shares stays as it is)."""

    def pick(t, leaf):
        batched = leads_with_batch(leaf, t) and np.shape(leaf)[0] == count
        return take(leaf, index) if batched else leaf

    return [
        map_pattern(pick, program.var_types[name].tensors, arg)
        for name, arg in zip(program.vars_in, args)
    ]


def execute(program, args, order, lanes, group, *, backend, max_stack_depth, max_steps):
    """Runs main on each input in ``args`` (at least one) through ``lanes`` lanes of the
    eager machine, starting them in ``order``, refilling once ``group`` lanes are free;
    main's results for every input, in input order (`pcbatch.vm.dispatch` checks the
    options and handles zero inputs)."""
    # The pending inputs wait on the host (``to_host``: a CUDA tensor has no np.asarray).
    on_host = lambda leaf: backend.to_host(leaf) if hasattr(leaf, "shape") else leaf
    inputs = broadcast_inputs(program, [map_pattern(on_host, arg) for arg in args])
    first = [map_pattern(lambda leaf: leaf[order[:lanes]], arg) for arg in inputs]
    run = machine.start(program, first, backend, lanes, max_stack_depth)
    feeder = _Feeder(run, inputs, order, group)
    runners = [machine.block_runner(program, b, backend) for b in program.graph]
    try:
        machine.loop(run, runners, max_steps, feeder.after_block)
    except StackFull as full:
        members = feeder.lane_input[full.rows]
        raise machine.overflow_error(
            run, full, inputs, max_stack_depth, True, members=members[members >= 0]
        ) from None
    # Collected on the host; a run's results are the backend's arrays (torch's, say).
    results = tuple(map_pattern(backend.copy_out, out) for out in feeder.outputs)
    return results[0] if len(results) == 1 else results


def _halting_blocks(program: Program) -> frozenset:
    """Indices of the blocks after which a thread may have halted (main's return, a halt)."""
    return frozenset(
        i
        for i, block in enumerate(program.graph.blocks)
        if isinstance(block.terminator, (IndirectGotoOp, HaltOp))
    )


class _Feeder:
    """The eager machine's refill: collects finished threads' results and starts pending
    inputs in their lanes (through the backend protocol: ``lanes_of``, ``to_host`` and
    the variables' ``clear_stack``)."""

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
        pc = run.backend.to_host(run.pc.read(run.backend.all_lanes(run.batch_size)))
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
        run = self.run
        lanes = run.backend.lanes_of(done, run.batch_size)
        rows = self.lane_input[done]
        for out, name in zip(self.outputs, run.program.vars_out):
            for buffer, var in zip(flatten(out), flatten(run.variables[name])):
                buffer[rows] = run.backend.to_host(var.read(lanes))
        self.lane_input[done] = _NO_INPUT

    def _start(self, free: np.ndarray) -> None:
        run = self.run
        take = free[: self.count - self.cursor]
        new = self.order[self.cursor : self.cursor + len(take)]
        self.cursor += len(take)
        self.lane_input[take] = new
        lanes = run.backend.lanes_of(take, run.batch_size)
        for name, pattern in run.variables.items():
            # a halted thread's stacks are empty; make sure
            run.variables[name] = map_pattern(lambda var: var.clear_stack(lanes), pattern)
        for name, arg in zip(run.program.vars_in, self.inputs):
            if run.program.alloc_of(name) == VariableAllocation.NULL:
                continue
            leaves = zip(flatten(run.variables[name]), flatten(arg), flatten(
                run.program.var_types[name].tensors))
            updated = [var.update(run.backend.place(leaf[new], lanes, t), lanes)
                       for var, leaf, t in leaves]
            run.variables[name] = unflatten(run.variables[name], updated)
        run.pc = run.pc.clear_stack(lanes)
        run.pc = run.pc.update(run.backend.place(self.halt, lanes, machine.PC_TYPE), lanes)
        run.pc = run.pc.push(run.backend.place(0, lanes, machine.PC_TYPE), lanes)
        machine.recount(run)
