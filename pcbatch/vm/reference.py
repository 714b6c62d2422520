"""The reference interpreter: what a structured program *means*, one example at a time.

Contract: ``run(program, args)`` executes a structured program on a single
example in plain Python, and ``run_batch`` runs it on every example of a
batch separately and stacks the results. Every batched execution strategy
(the VM on any backend, stackless or not) must agree with ``run_batch``.

Semantics:

* Each function call gets a fresh environment (recursion is Python recursion),
  binding the callee's parameters to the argument values; a `ReturnOp` hands
  back the current values of the function's ``vars_out``.
* A variable holds a pattern of arrays of shape ``[1, *type.shape]`` (a batch
  of one) with the dtype of its `Type` in ``program.var_types``. A
  primitive's results are broadcast to that shape and cast to that dtype,
  leaf by leaf; calls bind results the same way.
* Blocks run in order from the entry; a `BranchOp` takes the true edge when
  its (single-element) condition is truthy.
* ``max_steps`` bounds the number of blocks executed over the whole run;
  exceeding it raises `StepLimitError` naming the function and block.
  Exceptions raised by primitives propagate unchanged.

Programs without ``var_types`` run *untyped*: values are kept as primitives
return them, a result whose leading dimension is not 1 gaining the batch axis.
That mode serves programs written before type inference; it is not the
defining semantics (a length-1 vector is ambiguous with a batch of one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pcbatch.errors import BatchSizeError, PcbatchError, where
from pcbatch.ir.nodes import (
    BranchOp,
    FunctionCallOp,
    GotoOp,
    PrimOp,
    Program,
    ReturnOp,
)
from pcbatch.ir.types import flatten, is_pattern_node, map_pattern

__all__ = ["Interpreter", "InterpreterError", "StepLimitError", "run", "run_batch"]


class InterpreterError(PcbatchError, RuntimeError):
    """The program did something undefined (read an unassigned variable, ...)."""


class StepLimitError(InterpreterError):
    """The run executed more than ``max_steps`` blocks."""


class Interpreter:
    """Runs one example; keeps counters a caller may inspect afterwards.

    Attributes:
      steps: blocks executed so far.
      max_depth: the deepest call nesting seen (main alone is depth 1).
    """

    def __init__(self, program: Program, *, max_steps: int = 1_000_000):
        if program.lowered:
            raise ValueError("the reference interpreter runs structured programs only")
        self.program = program
        self.max_steps = max_steps
        self.typed = bool(program.var_types)
        self.functions = {fn.name: fn for fn in program.functions}
        self.steps = 0
        self.max_depth = 0
        self._depth = 0

    # -- values ------------------------------------------------------------------
    def place(self, var: str, value: Any) -> Any:
        """``value`` (batch of one, or broadcastable to it) stored as ``var`` holds it."""
        if not self.typed:
            return map_pattern(_as_batch_of_one, value)
        var_type = self.program.var_types.get(var)
        if var_type is None:
            raise InterpreterError(f"variable {var!r} has no type in program.var_types")
        try:
            return map_pattern(_broadcast_leaf, var_type.tensors, value)
        except ValueError as e:
            raise InterpreterError(f"cannot store {_describe(value)} in {var!r}: {e}") from None

    def _assign(self, env: dict, vars_out: Any, value: Any) -> None:
        if not is_pattern_node(vars_out):
            env[vars_out] = self.place(vars_out, value)
            return
        if not is_pattern_node(value) or len(value) != len(vars_out):
            raise InterpreterError(
                f"result {_describe(value)} does not match output pattern {vars_out!r}"
            )
        for name, item in zip(vars_out, value):
            self._assign(env, name, item)

    # -- execution -----------------------------------------------------------------
    def call_main(self, args: Sequence[Any]) -> tuple:
        """Runs main on per-example ``args``; returns its outputs (batch of one each)."""
        main = self.functions[self.program.main]
        if len(args) != len(main.vars_in):
            raise TypeError(f"{main.name} takes {len(main.vars_in)} arguments, got {len(args)}")
        batched = [map_pattern(lambda a: np.asarray(a)[np.newaxis], a) for a in args]
        return self.call(main.name, batched)

    def call(self, name: str, args: Sequence[Any]) -> tuple:
        """Calls function ``name`` on batched (batch of one) argument values."""
        fn = self.functions[name]
        env = {var: self.place(var, value) for var, value in zip(fn.vars_in, args)}
        self._depth += 1
        self.max_depth = max(self.max_depth, self._depth)
        try:
            self._run_body(fn, env)
        finally:
            self._depth -= 1
        return tuple(self._read(env, var, fn.name, "its return") for var in fn.vars_out)

    def _run_body(self, fn, env: dict) -> None:
        label = fn.graph.entry
        while True:
            self.steps += 1
            if self.steps > self.max_steps:
                raise StepLimitError(
                    f"more than {self.max_steps} blocks executed; stopped in function "
                    f"{fn.name!r} at block {label!r}"
                )
            block = fn.graph.block(label)
            for op in block.instructions:
                self._execute(op, env, fn.name)
            label = self._next(block.terminator, env, fn.name)
            if label is None:
                return

    def _execute(self, op: Any, env: dict, fname: str) -> None:
        inputs = [self._read(env, v, fname, op) for v in op.vars_in]
        if isinstance(op, PrimOp):
            self._assign(env, op.vars_out, _call_primitive(op, inputs))
        elif isinstance(op, FunctionCallOp):
            results = self.call(op.function, inputs)
            for var, value in zip(op.vars_out, results):
                env[var] = self.place(var, value)
        else:
            raise InterpreterError(f"{fname}: cannot interpret {type(op).__name__}")

    def _next(self, terminator: Any, env: dict, fname: str):
        if isinstance(terminator, GotoOp):
            return terminator.target
        if isinstance(terminator, BranchOp):
            cond = self._read(env, terminator.cond_var, fname, terminator)
            return terminator.true_target if _truth(cond) else terminator.false_target
        if isinstance(terminator, ReturnOp):
            return None
        raise InterpreterError(f"{fname}: cannot interpret terminator {terminator!r}")

    @staticmethod
    def _read(env: dict, var: str, fname: str, op: Any) -> Any:
        try:
            return env[var]
        except KeyError:
            loc = where(getattr(op, "loc", None))
            raise InterpreterError(
                f"{fname}: variable {var!r} is read{loc} before it is assigned"
            ) from None


def _broadcast_leaf(tensor_type, value) -> np.ndarray:
    shape = (1, *tensor_type.shape)
    return np.broadcast_to(np.asarray(value), shape).astype(tensor_type.dtype)


def _as_batch_of_one(value) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim == 0 or array.shape[0] != 1:
        array = array[np.newaxis]
    return array.copy()


def _truth(cond: Any) -> bool:
    array = np.asarray(cond)
    if array.size != 1:
        raise InterpreterError(f"branch condition must hold one value, got shape {array.shape}")
    return bool(array.reshape(()))


def _describe(value: Any) -> str:
    if is_pattern_node(value):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    array = np.asarray(value)
    return f"{array.dtype}{list(array.shape)}"


def _strip_batch(value: Any) -> Any:
    return map_pattern(lambda a: a[0], value)


def run(program: Program, args: Sequence[Any], *, max_steps: int = 1_000_000) -> Any:
    """Runs ``program`` on one example.

    Args:
      program: a structured program, normally with ``var_types``.
      args: one value (pattern) per parameter of main, without a batch dimension.
      max_steps: the most blocks to execute before giving up.

    Returns:
      Main's single output, or a tuple of its outputs, without the batch dimension.

    Raises:
      StepLimitError: more than ``max_steps`` blocks ran.
      InterpreterError: the program read an unassigned variable or stored a
        value its type cannot hold.
    """
    results = Interpreter(program, max_steps=max_steps).call_main(args)
    stripped = tuple(_strip_batch(r) for r in results)
    return stripped[0] if len(stripped) == 1 else stripped


def batch_size_of(args: Sequence[Any]) -> int:
    """The batch size that ``args`` agree on (leading dimensions of 1 and scalars broadcast)."""
    sizes = {np.shape(leaf)[0] for a in args for leaf in flatten(a) if np.ndim(leaf) > 0}
    sizes.discard(1)
    if len(sizes) > 1:
        raise BatchSizeError(f"arguments disagree on the batch size: {sorted(sizes)}")
    return sizes.pop() if sizes else 1


def _slice(leaf: Any, i: int) -> Any:
    array = np.asarray(leaf)
    if array.ndim == 0:
        return array
    return array[0] if array.shape[0] == 1 else array[i]


def run_batch(program: Program, args: Sequence[Any], *, max_steps: int = 1_000_000) -> Any:
    """Runs every example of a batch alone and stacks the results: the ground truth.

    Args:
      program: as for `run`.
      args: one batched value (pattern) per parameter of main; leaves with a
        leading dimension of 1, and scalars, are shared by every example.
      max_steps: the step limit of each example's run.

    Returns:
      Like `run`, with every leaf stacked along a new leading axis.
    """
    n = batch_size_of(args)
    per_example = []
    for i in range(n):
        example = [map_pattern(lambda leaf, i=i: _slice(leaf, i), a) for a in args]
        per_example.append(run(program, example, max_steps=max_steps))
    return map_pattern(lambda *leaves: np.stack(leaves), *per_example)


def _call_primitive(op: PrimOp, inputs: list):
    """A primitive on one example: per-example functions see values without the batch dim."""
    if not op.per_example:
        return op.function(*inputs)
    unbatched = [map_pattern(lambda a: np.asarray(a)[0], x) for x in inputs]
    result = op.function(*unbatched)
    return map_pattern(lambda r: np.asarray(r)[None], result)
