"""Stackless execution: the batched interpreter that inherits recursion from Python.

Runs a *typed structured* program over a batch without any stacks: each call
of a batched function is a Python call that runs the callee for exactly the
threads that reached that call site, with their own local storage. Threads in
one function activation still wait for each other block by block (lowest
block first), so loops and branches batch as in the stack machine, but two
threads only share a call if they reach it in the same activation: less
batching, no stack maintenance. Recursion depth is bounded by Python's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pcbatch import profiling
from pcbatch.backends.numpy import NumpyBackend, NumpyLanes
from pcbatch.errors import PcbatchError, add_note, where
from pcbatch.ir.nodes import BranchOp, FunctionCallOp, GotoOp, PrimOp, Program, ReturnOp
from pcbatch.ir.types import is_pattern_node, map_pattern

_BACKEND = NumpyBackend()


def _scatter(rows):
    def store(storage, value):
        storage[rows] = value

    return store


class _Activation:
    """One call of one function over ``size`` threads: storage for its variables."""

    def __init__(self, program: Program, size: int):
        self.program = program
        self.size = size
        self.values: dict = {}

    def read(self, name: str, rows):
        if name not in self.values:
            raise PcbatchError(f"variable {name!r} read before any thread wrote it")
        return map_pattern(lambda a: a if rows is None else a[rows], self.values[name])

    def write(self, name: str, value, lanes: NumpyLanes, op) -> None:
        var_type = self.program.var_types[name]
        if name not in self.values:
            self.values[name] = map_pattern(
                lambda t: np.zeros((self.size, *t.shape), dtype=t.dtype), var_type.tensors
            )
        batched = isinstance(op, PrimOp) and op.per_example
        placed = map_pattern(
            lambda t, v: _BACKEND.place(v, lanes, t, batched), var_type.tensors, value
        )

        if lanes.index is None:
            # Replace rather than overwrite: a full-width read of this variable
            # may still be an input of the same parallel assignment (a, b = b, a).
            self.values[name] = map_pattern(np.array, placed)
        else:
            map_pattern(_scatter(lanes.index), self.values[name], placed)

    def bind(self, names, values, lanes, op) -> None:
        if is_pattern_node(names):
            if not is_pattern_node(values) or len(values) != len(names):
                raise PcbatchError(f"result of {op!r}{where(op.loc)} does not unpack")
            for n, v in zip(names, values):
                self.bind(n, v, lanes, op)
        else:
            self.write(names, values, lanes, op)


def _call(program: Program, name: str, args: Sequence, size: int, prof) -> tuple:
    fn = program.function(name)
    frame = _Activation(program, size)
    everyone = NumpyLanes(None, size, size)
    for param, value in zip(fn.vars_in, args):
        frame.write(param, value, everyone, None)
    blocks = fn.graph.blocks
    done = len(blocks)
    pc = np.zeros(size, dtype=np.int64)
    while size:
        current = int(pc.min())
        if current == done:
            break
        rows = np.flatnonzero(pc == current)
        lanes = NumpyLanes(None if len(rows) == size else rows, len(rows), size)
        if prof is not None:
            prof.record_step(blocks[current].label, int(np.count_nonzero(pc < done)), size)
        _run_block(program, frame, blocks[current], lanes, prof)
        pc[rows] = _next_pc(fn, frame, blocks[current].terminator, lanes, done)
    return tuple(frame.read(v, None) for v in fn.vars_out)


def _run_block(program, frame: _Activation, block, lanes: NumpyLanes, prof) -> None:
    for op in block.instructions:
        inputs = [frame.read(v, lanes.index) for v in op.vars_in]
        if isinstance(op, FunctionCallOp):
            results = _call(program, op.function, inputs, lanes.count, prof)
            for names, value in zip(op.vars_out, results):
                frame.bind(names, value, lanes, op)
            continue
        if not isinstance(op, PrimOp):
            raise PcbatchError(f"{type(op).__name__} cannot run stackless")
        if op.is_copy:
            outputs = inputs[0] if len(inputs) == 1 else tuple(inputs)
        else:
            if prof is not None:
                prof.record_primitive(op.label, lanes.count, frame.size)
            try:
                outputs = op.batched_function(_BACKEND)(*inputs)
            except Exception as e:
                add_note(e, f"in pcbatch primitive {op.label!r}{where(op.loc)}")
                raise
        frame.bind(op.vars_out, outputs, lanes, op)


def _next_pc(fn, frame: _Activation, term, lanes: NumpyLanes, done: int):
    index = fn.graph.index
    if isinstance(term, BranchOp):
        cond = frame.read(term.cond_var, lanes.index)
        return np.where(cond != 0, index(term.true_target), index(term.false_target))
    if isinstance(term, GotoOp):
        return index(term.target)
    if isinstance(term, ReturnOp):
        return done
    raise PcbatchError(f"{type(term).__name__} cannot end a structured block")


def execute(program: Program, args: Sequence, *, batch_size: int):
    """Runs a typed structured program over ``batch_size`` threads.

    ``args`` are already broadcast to a leading batch dimension of ``batch_size``.
    """
    prof = profiling.current()
    if prof is not None:
        prof.runs += 1
    try:
        results = _call(program, program.main, args, batch_size, prof)
    except RecursionError:
        raise PcbatchError(
            f"{program.main}(): stackless execution recursed deeper than Python allows; "
            "run with stackless=False (the stack machine) instead"
        ) from None
    return results[0] if len(results) == 1 else results
