"""Running a structured program on a batch: signature, compilation cache, dispatch.

``run(program, args)`` infers the argument signature (every argument has a
leading batch dimension; 0-d values are per-example scalars that broadcast),
compiles the program for it once (cached per signature and backend), and runs
it on the stack machine or, with ``stackless=True``, the stackless interpreter.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import BatchSizeError
from pcbatch.ir.nodes import Program
from pcbatch.ir.types import (
    TensorType,
    Type,
    WeakTensorType,
    flatten,
    is_python_scalar,
    is_weak,
    map_pattern,
    type_key,
)
from pcbatch.passes import infer_types, pipeline
from pcbatch.vm import dispatch
from pcbatch.vm import stackless as stackless_vm
from pcbatch.vm.failures import DEFAULT_MAX_STACK_DEPTH
from pcbatch.vm.inputs import batch_size_of, broadcast_inputs, local_name


def signature_of(args: Sequence, backend=None, weak: Sequence | None = None) -> list:
    """The `Type` of each argument, batch dimension removed (0-d values have none).

    A Python ``bool``/``int``/``float``/``complex`` argument is the same Python number
    in every example, which NumPy 2 treats as weak (NEP 50): ``float32_x * 2`` stays
    float32. Its type is a `WeakTensorType`, so the program computes as Python would.
    ``weak`` flags those leaves where ``args`` were already made arrays (`weak_flags`).
    """
    backend = backend or NumpyBackend()
    weak = weak if weak is not None else weak_flags(args)

    def leaf_type(x, is_weak_leaf) -> TensorType:
        t = backend.type_of(x)
        kind = WeakTensorType if is_weak_leaf else TensorType
        return kind(np.dtype(t.dtype), tuple(t.shape[1:]) if len(t.shape) else ())

    return [Type(map_pattern(leaf_type, arg, flags)) for arg, flags in zip(args, weak)]


def weak_flags(args: Sequence) -> list:
    """Per argument, a pattern of bools: which leaves are Python numbers (weak)."""
    return [map_pattern(is_python_scalar, a) for a in args]


def check_known_shapes(program: Program, args: Sequence) -> None:
    """Raises `BatchSizeError`, naming the argument, where a shape is not fully known (a
    symbolic tensor in a `tf.function` traced for any batch size): the batched program
    is compiled for known shapes."""
    for name, arg in zip(program.vars_in, args):
        for leaf in flatten(arg):
            shape = getattr(leaf, "shape", ())
            try:
                dims = tuple(shape)
            except (TypeError, ValueError):  # a shape of unknown rank
                dims = (None,)
            if any(d is None for d in dims):
                raise BatchSizeError(
                    f"{program.main}(): argument {local_name(name)!r} has shape "
                    f"{shape}, with a dimension unknown while tracing; pcbatch compiles for "
                    "known shapes. In a tf.function, give an input_signature with every "
                    "dimension known, or none (then it traces once per shape); in a TF1 "
                    "graph, a placeholder whose shape is fully known"
                )


def check_narrowing(program: Program, args: Sequence, backend) -> None:
    """Lets ``backend`` refuse or warn about arguments it would narrow (JAX without
    ``jax_enable_x64``: `JaxBackend.check_narrowing`)."""
    check = getattr(backend, "check_narrowing", None)
    if check is None:
        return
    for name, arg in zip(program.vars_in, args):
        for leaf in flatten(arg):
            check(program.main, local_name(name), leaf)


def check_count(function: str, option: str, value, alternative: str = "") -> int:
    """``value`` as a non-negative int, or a TypeError or ValueError naming ``option``."""
    wanted = f"{function}(): {option} takes a non-negative int"
    wanted += f" {alternative}" if alternative else ""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{wanted}, got {value!r} of type {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{wanted}, got {value!r}")
    return int(value)


def _as_array(value):
    """Arrays of any library stay as they are (JAX arrays stay on their device)."""
    return value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)


def normalize_signature(sig) -> tuple:
    """``sig`` as a tuple of `Type`s with NumPy dtypes and tuple shapes (a cache key)."""

    def leaf(t: TensorType) -> TensorType:
        kind = WeakTensorType if is_weak(t) else TensorType
        return kind(np.dtype(t.dtype), tuple(t.shape))

    return tuple(Type(map_pattern(leaf, infer_types.as_type(t).tensors)) for t in sig)


class CompileCache:
    """Lowered (or typed, for stackless) programs keyed by signature and backend.

    Safe to share between threads: each key is compiled once, by the first thread
    that asks for it, while the others asking for that key wait for its result.
    """

    def __init__(self) -> None:
        self._entries: dict = {}
        self._compiling: dict = {}  # key -> the lock held while that key compiles
        self._lock = threading.Lock()

    def get(self, program: Program, sig, backend, *, lowered: bool, schedule=None) -> Program:
        sig = normalize_signature(sig)
        # A weak type compares equal to the strong one of its dtype: the key tells them apart.
        weakness = tuple(type_key(t) for t in sig)
        key = (id(program), sig, weakness, type(backend).__name__, lowered, schedule)
        hit = self._lookup(key, program)
        if hit is not None:
            return hit
        with self._lock:
            key_lock = self._compiling.setdefault(key, threading.Lock())
        with key_lock:
            hit = self._lookup(key, program)
            if hit is not None:
                return hit
            if lowered:
                compiled = pipeline.compile_program(program, sig, backend, schedule=schedule)
            else:
                compiled = pipeline.compile_program(
                    program, sig, backend, stop_after="infer_types"
                )
            with self._lock:
                self._entries[key] = (program, compiled)
                self._compiling.pop(key, None)
        return compiled

    def _lookup(self, key, program: Program) -> Program | None:
        # An id can be reused by a new program once the old one is freed: check it.
        with self._lock:
            hit = self._entries.get(key)
        return hit[1] if hit is not None and hit[0] is program else None


_DEFAULT_CACHE = CompileCache()


def run(
    program: Program,
    args: Sequence,
    *,
    backend=None,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    stackless: bool = False,
    max_steps: int | None = None,
    cache: CompileCache | None = None,
    block_code_cache: dict | None = None,
    schedule: str | None = None,
    width: int | None = None,
    group: int | None = None,
    priority=None,
    return_status: bool = False,
):
    """Runs ``program``'s main over the batch ``args``; returns main's results, batched.

    ``schedule`` names the block-ordering policy (`passes.order_blocks`); the
    stackless interpreter has its own order and ignores it. With ``width``, the
    leading dimension of ``args`` counts independent inputs that run through
    ``width`` lanes, free lanes refilled in groups of ``group``, inputs started in
    decreasing ``priority`` (`vm.refill`).

    With ``return_status``: (results, status), status one `pcbatch.LaneStatus` per
    batch member, and no error for a member whose recursion overflowed or that
    max_steps stopped (its results are fill values: `pcbatch.vm.staged.poison`).
    """
    backend = backend or NumpyBackend()
    cache = cache or _DEFAULT_CACHE
    max_stack_depth = check_count(program.main, "max_stack_depth", max_stack_depth)
    if max_steps is not None:
        max_steps = check_count(program.main, "max_steps", max_steps, "or None")
    weak = weak_flags(args)
    args = [map_pattern(_as_array, a) for a in args]
    check_known_shapes(program, args)
    check_narrowing(program, args, backend)
    if return_status and (width is not None or stackless):
        raise ValueError(
            f"{program.main}(): return_status=True is for a plain call on the stack "
            "machine; drop it, or call without .map() and stackless=True"
        )
    sig = signature_of(args, backend, weak)
    if not stackless:
        lowered = cache.get(program, sig, backend, lowered=True, schedule=schedule)
        return dispatch.execute(
            lowered,
            args,
            backend=backend,
            max_stack_depth=max_stack_depth,
            max_steps=max_steps,
            block_code_cache=block_code_cache,
            width=width,
            group=group,
            priority=priority,
            return_status=return_status,
        )
    if width is not None:
        raise ValueError(
            f"{program.main}.map() runs on the stack machine only; drop stackless=True"
        )
    typed = cache.get(program, sig, backend, lowered=False)
    inputs = broadcast_inputs(typed, args)
    return stackless_vm.execute(typed, inputs, batch_size=batch_size_of(typed, args))
