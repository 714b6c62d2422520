"""The JAX backend: the whole batched program as one ``jax.jit``-compiled computation.

The VM's loop is a ``lax.while_loop`` and its block dispatch a ``lax.switch``
(see ``pcbatch/vm/staged.py``); pushes and pops scatter into the active rows of a
stack with ``.at[...].set(mode="drop")``, so XLA updates the loop-carried
buffers in place instead of copying a whole stack per step (the trap of a
vmapped ``while_loop``, jax#13522). Primitives written for one example are
vectorized with ``jax.vmap``.

``JaxBackend(mesh=..., axis=...)`` splits the batch over the devices of a
``jax.sharding.Mesh``, every device running its own VM on its share of the threads
(``pcbatch/backends/jax_sharding.py``; docs/scale-out.md).

Dtypes follow JAX's configuration: without ``jax_enable_x64``, int64 and
float64 arguments run as int32 and float32. A NumPy argument whose values do not
survive that narrowing raises `OverflowError` naming it; a 64-bit array that does is
narrowed with a `pcbatch.NarrowingWarning` (once per function, argument and dtype),
as values computed from it may still overflow 32 bits (`check_narrowing`).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pcbatch.backends import base, numpy_dispatch
from pcbatch.backends import compaction as compaction_option
from pcbatch.backends.compile_cache import ProgramCache
from pcbatch.backends.jax_sharding import BatchSharding
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import NarrowingWarning
from pcbatch.ir.setitem import align
from pcbatch.ir.types import TensorType, Type, map_pattern

__all__ = ["JaxBackend"]


def _canonical(dtype) -> np.dtype:
    return np.dtype(jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


#: (function, argument, dtype) already warned about narrowing (`check_narrowing`)
_WARNED_NARROWING: set = set()


def _fits(values: np.ndarray, narrow: np.dtype) -> bool:
    """Whether every value of ``values`` is the same after a cast to ``narrow``."""
    if values.size == 0:
        return True
    if narrow.kind in "iu":
        info = np.iinfo(narrow)
        return bool(values.min() >= info.min and values.max() <= info.max)
    with np.errstate(over="ignore"):  # an overflow is the answer sought, not a warning
        narrowed = values.astype(narrow)
    return bool(np.all(np.isfinite(narrowed) == np.isfinite(values)))


def _user_stacklevel() -> int:
    """The ``stacklevel`` of `warnings.warn`, called by its caller, that names the first
    frame outside pcbatch: the user's call."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


#: How a VM step picks its block (``JaxBackend(block_choice=...)``): "loops", a tree of
#: loops that run at most once (`base.guarded_switch`), so nothing passed through is
#: copied; "flat", one row of such loops; "switch", one ``lax.switch``, whose outputs XLA
#: gives buffers of their own (copies), but which is one device-side choice; "sweep",
#: no choice: every block in turn, each on the threads at it (`StagedMachine.sweep`).
#: On a GPU each loop's predicate and each switch's index is read back on the host, a
#: round trip that costs more than most blocks' work: there the sweep, which reads
#: nothing back within a step, ran loops 1.4-6x and NUTS 4x faster than the tree (H200,
#: benchmarks/README.md); on a CPU the tree wins (NUTS 30x, Fibonacci 2.7x).
BLOCK_CHOICES = (None, "loops", "flat", "switch", "sweep")

#: None's meaning, by the platform the computation runs on (`JaxBackend.step_choice`)
_DEFAULT_CHOICE = {"gpu": "sweep", "cuda": "sweep", "rocm": "sweep"}

#: The "loops" tree's branching: a node tests ``TREE_FAN_OUT`` predicates. Four halves
#: the loops XLA compiles (NUTS, 38 blocks: 58 against 73; a step tests as many
#: predicates either way), but measured warm, side by side, Fibonacci's steps took 30%
#: longer at 100 lanes and 9% at 1,000 (2026-11-26), so the tree stays binary.
TREE_FAN_OUT = 2


class JaxBackend:
    """Runs batched programs as one jitted XLA computation (CPU, GPU or TPU).

    Args:
      mesh: a ``jax.sharding.Mesh`` to split every call's batch over (None: one
        device, JAX's default). Each device runs its own VM and scheduler on its
        share of the threads, with no communication until the loop ends.
      axis: the mesh axis (or tuple of axes) the batch is split along; may be left
        out for a mesh with one axis.
      gather: return results replicated on every device (and every process)
        instead of sharded along ``axis``.
      compaction: ``None`` (default): every block runs full width under a mask.
        ``"auto"`` or a sequence of bucket widths: a block with at most ``k`` active
        threads runs on those threads' rows only, gathered into ``k`` lanes
        (`pcbatch.vm.compact`; same results, one more trace of each block per bucket).
      block_choice: how each VM step runs its block (`BLOCK_CHOICES`; same results):
        None (default) is "sweep" on a GPU, where a step runs every block in turn on
        the threads at it and reads nothing back on the host, and "loops" elsewhere,
        where a step runs the one block the schedule chose. Under "sweep",
        ``max_steps`` still counts the blocks that ran, but no thread waits for others
        (``schedule=`` orders nothing).
    """

    name = "jax"
    gathers_active_rows = False
    staged = True
    index_dtype = np.dtype(np.int32)

    def __init__(
        self, mesh=None, axis=None, gather: bool = False, compaction=None, block_choice=None
    ):
        if mesh is None and (axis is not None or gather):
            raise ValueError("axis= and gather= shard the batch over a mesh: pass mesh= too")
        compaction_option.check_option(compaction)
        if block_choice not in BLOCK_CHOICES:
            raise ValueError(
                f"JaxBackend(block_choice=...) takes one of {BLOCK_CHOICES}, got {block_choice!r}"
            )
        self.compaction = compaction
        self.block_choice = block_choice
        self.sharding = None if mesh is None else BatchSharding(mesh, axis, gather)
        self._types = NumpyBackend()
        self.compile_cache = ProgramCache()
        self.traces = 0  # how many times a program was traced (tests count retraces)

    def check_narrowing(self, function: str, argument: str, value) -> None:
        """Without ``jax_enable_x64`` JAX runs an int64 (float64) array as int32
        (float32). A NumPy ``value`` that changes in that cast raises `OverflowError`
        naming ``argument``; one that fits is narrowed with a `NarrowingWarning` if it is
        an array (not a per-example number): values computed from it may still overflow
        32 bits (Collatz from 159487 passes 2**31 and, wrapped around, never ends)."""
        if not isinstance(value, (np.ndarray, np.generic)):
            return  # a JAX array (already narrowed, by the user) or a tensor
        wide = np.dtype(value.dtype)
        narrow = _canonical(wide)
        if narrow == wide or wide.kind not in "iuf":
            return
        advice = (
            'enable 64-bit JAX (jax.config.update("jax_enable_x64", True), before any '
            f"JAX array is made) or pass {narrow.name} values"
        )
        if not _fits(np.asarray(value), narrow):
            raise OverflowError(
                f"{function}(): argument {argument!r} holds {wide.name} values that "
                f"{narrow.name} cannot hold, and JAX runs it as {narrow.name} "
                f"(jax_enable_x64 is off); {advice}"
            )
        key = (function, argument, wide.name)
        if np.ndim(value) and key not in _WARNED_NARROWING:
            _WARNED_NARROWING.add(key)
            warnings.warn(
                f"{function}(): argument {argument!r} is {wide.name} and runs as "
                f"{narrow.name} on JAX (jax_enable_x64 is off): its values fit, but "
                f"values computed from them that pass {narrow.name}'s range wrap around "
                "(or lose precision) unlike NumPy, and a loop waiting for a value may "
                f"then never end (max_steps= bounds any run). To compute in {wide.name}, "
                f"{advice.split(' or pass')[0]}",
                NarrowingWarning,
                stacklevel=_user_stacklevel(),
            )

    # -- types ------------------------------------------------------------------
    def type_of(self, t, preferred_dtype=None) -> TensorType:
        dtype = preferred_dtype if preferred_dtype is not None and np.ndim(t) == 0 else None
        dtype = dtype or getattr(t, "dtype", None) or np.asarray(t).dtype
        return TensorType(_canonical(dtype), tuple(np.shape(t)))

    def run_on_dummies(self, primitive_callable: Callable, input_types: Sequence[Type], fill=1):
        """The primitive's outputs' shapes and dtypes, traced abstractly (``jax.eval_shape``)."""
        specs = [
            map_pattern(lambda t: jax.ShapeDtypeStruct(t.shape, _canonical(t.dtype)), t.tensors)
            for t in input_types
        ]
        return jax.eval_shape(primitive_callable, *specs)

    def merge_dtypes(self, dt1, dt2):
        merged = self._types.merge_dtypes(dt1, dt2)
        return None if merged is None else _canonical(merged)

    def merge_shapes(self, s1, s2):
        return self._types.merge_shapes(s1, s2)

    def adapt(self, function: Callable) -> Callable:
        """A batched primitive written with NumPy, run on JAX arrays (``np.f`` -> ``jnp.f``)."""
        return numpy_dispatch.adapt(function, "jax.numpy")

    def vectorize(self, function: Callable) -> Callable:
        """``function`` written for one example, mapped over the batch with ``jax.vmap``."""
        function = self.adapt(function)
        mapped = jax.vmap(function)

        def batched(*args):
            if not args:  # a constant: a batch of one, broadcast by the VM
                return map_pattern(lambda v: jnp.asarray(v)[None], function())
            return mapped(*args)

        return batched

    # -- staged VM operations ----------------------------------------------------
    def zeros(self, shape, dtype):
        return jnp.zeros(shape, _canonical(dtype))

    def full_pc(self, size: int, value: int):
        return jnp.full((size,), value, self.index_dtype)

    def full_mask(self, size: int):
        return jnp.ones((size,), bool)

    def false(self):
        return jnp.asarray(False)

    def scalar_int(self, value: int):
        return jnp.asarray(value, self.index_dtype)

    def scalar_float(self, value: float):
        return jnp.asarray(value, jnp.float32)

    def float(self, x):
        return x.astype(jnp.float32)

    def count(self, mask):
        return jnp.sum(mask, dtype=self.index_dtype)

    def add_at(self, counts, index: int, amount):
        return counts.at[index].add(amount)

    def where(self, mask, if_true, if_false):
        mask = jnp.asarray(mask)
        if_true, if_false = jnp.asarray(if_true), jnp.asarray(if_false)
        rank = max(if_true.ndim, if_false.ndim)
        if mask.ndim and rank > mask.ndim:
            mask = mask.reshape(mask.shape + (1,) * (rank - mask.ndim))
        return jnp.where(mask, if_true, if_false)

    def truth(self, value):
        value = jnp.asarray(value)
        return value if value.dtype == bool else value != 0

    def any(self, x):
        return jnp.any(x)

    def equal(self, a, b):
        return jnp.equal(a, b)

    def not_equal(self, a, b):
        return jnp.not_equal(a, b)

    def minimum(self, a, b):
        return jnp.minimum(a, b)

    def maximum(self, a, b):
        return jnp.maximum(a, b)

    def reduce_min(self, x):
        return jnp.min(x)

    def bincount(self, x, length: int):
        """Per value in ``[0, length)``, how many entries of ``x`` hold it (others: none);
        small, as a product with a one-hot table (`base.ONE_HOT_MAX`)."""
        if x.size * length <= base.ONE_HOT_MAX:
            onehot = (x[:, None] == jnp.arange(length, dtype=x.dtype)).astype(jnp.int32)
            return jnp.ones(x.shape, jnp.int32) @ onehot
        return jnp.bincount(x, length=length).astype(self.index_dtype)

    def argmax(self, x):
        return jnp.argmax(x).astype(self.index_dtype)

    def any_from(self, mask, matrix):
        """Per column j: whether some row i has ``mask[i]`` and ``matrix[i, j]``."""
        return jnp.matmul(mask.astype(jnp.int32), jnp.asarray(matrix, jnp.int32)) > 0

    def scatter_rows(self, stack, depth, values, rows=None):
        """``stack[depth[b], rows[b]] = values[b]`` (``rows``: all, in order, if None);
        entries whose depth or row is out of range are skipped."""
        values = values.astype(stack.dtype)
        if rows is None and stack.size <= base.SELECT_WRITE_MAX:  # one kernel, not three
            trailing = (1,) * (stack.ndim - 2)
            hit = jnp.arange(stack.shape[0]).reshape((-1, 1, *trailing)) == depth.reshape(
                (1, -1, *trailing)
            )
            return jnp.where(hit, values[None], stack)
        rows = jnp.arange(stack.shape[1]) if rows is None else rows
        return stack.at[depth, rows].set(values, mode="drop")

    # -- compaction (`pcbatch.vm.compact`) ----------------------------------------
    def active_rows(self, mask, width: int):
        """The first ``width`` set rows of ``mask``, padded with ``len(mask)``."""
        (rows,) = jnp.nonzero(mask, size=width, fill_value=mask.shape[0])
        return rows.astype(self.index_dtype)

    def take_rows(self, array, rows):
        """``array[rows]``; out-of-range rows read the last row (their values unused)."""
        return jnp.take(array, rows, axis=0, mode="clip")

    def put_rows(self, array, rows, values):
        """``array[rows] = values``; out-of-range rows are dropped."""
        return array.at[rows].set(values.astype(array.dtype), mode="drop")

    def as_index(self, flag):
        return jnp.asarray(flag, self.index_dtype)

    def take(self, array, index):
        """``array[index]`` along the first axis (``index`` in range)."""
        return jnp.take(array, index, axis=0)

    def scatter(self, buffer, index, values):
        """``buffer[index[b]] = values[b]`` for distinct, in-range ``index``."""
        return buffer.at[index].set(values.astype(buffer.dtype))

    def cumulative_count(self, mask):
        """Per row, how many rows up to and including it are set."""
        return jnp.cumsum(mask, dtype=self.index_dtype)

    def gather_rows(self, stack, depth, rows=None):
        """``stack[depth[b], rows[b]]`` (``rows``: all, in order, if None), clipped."""
        rows = jnp.arange(stack.shape[1]) if rows is None else jnp.clip(rows, 0, stack.shape[1] - 1)
        return stack[jnp.clip(depth, 0, stack.shape[0] - 1), rows]

    def arange(self, size: int):
        return jnp.arange(size, dtype=self.index_dtype)

    def set_items(self, setitem, target, value, indices, mask):
        """``target[rows, *index] = value`` for the threads in ``mask`` (all if None)."""
        size = target.shape[0]
        rows = jnp.arange(size)
        if mask is not None:
            rows = jnp.where(mask, rows, size)  # out of range: dropped
        dims = target.shape[1:]
        # An index out of bounds writes into its own thread's row at most (past the end:
        # dropped), and that thread fails `SetItem.faulting` and stops.
        wrap = lambda i, axis: jnp.where(i < 0, i + dims[axis], i)
        key = setitem.key(rows, [jnp.asarray(i) for i in indices], wrap)
        value = align(jnp.asarray(value).astype(target.dtype), setitem.rest_rank(target.ndim))
        return target.at[key].set(value, mode="drop")

    def place(self, value, batch_size: int, type_: TensorType, leading_batch: bool):
        """``value`` cast to ``type_`` and broadcast to ``[batch, *shape]``."""
        array = jnp.asarray(value)
        if leading_batch:
            missing = len(type_.shape) - (array.ndim - 1)
            if missing > 0:
                array = array.reshape(array.shape[:1] + (1,) * missing + array.shape[1:])
        if array.dtype != _canonical(type_.dtype):
            array = array.astype(_canonical(type_.dtype))
        return jnp.broadcast_to(array, (batch_size, *type_.shape))

    def while_loop(self, cond, body, state):
        return lax.while_loop(cond, body, state)

    @property
    def step_choice(self) -> str:
        """``block_choice``, or where it is None the platform's: "sweep" on a GPU,
        "loops" elsewhere (`BLOCK_CHOICES`); the platform of the mesh's devices, of a
        ``jax.default_device`` in force, or JAX's default. Read at every trace."""
        if self.block_choice is not None:
            return self.block_choice
        # where the computation runs: the mesh's devices, a `jax.default_device(...)`
        # in force (a Device or a platform name), or JAX's default platform
        device = getattr(jax.config, "jax_default_device", None)
        if self.sharding is not None:
            platform = self.sharding.mesh.devices.flat[0].platform
        elif device is not None:
            platform = getattr(device, "platform", str(device))
        else:
            platform = jax.default_backend()
        return _DEFAULT_CHOICE.get(platform, "loops")

    def switch(self, index, branches, state, offset: int = 0):
        """Runs ``branches[index - offset]`` on ``state``, as ``step_choice`` says; a
        "sweep" chooses VM steps only (`StagedMachine.sweep`): other choices within a
        step (refill, compaction) are made by the tree of loops."""
        choice = self.step_choice
        if choice == "switch":
            return lax.switch(index - offset if offset else index, branches, state)
        fan_out = len(branches) if choice == "flat" else TREE_FAN_OUT
        return base.guarded_switch(self, index, branches, state, fan_out=fan_out, offset=offset)

    def jit(self, function: Callable) -> Callable:
        return jax.jit(function)

    def from_host(self, tree):
        """NumPy arrays as JAX arrays, made eagerly even while a caller's function traces.

        Copied with ``jax.device_put``, which narrows dtypes as ``jnp.asarray`` does (64
        bits without ``jax_enable_x64``) but compiles nothing: ``jnp.asarray`` compiled a
        conversion per dtype, 0.1 CPU s of a first call (Collatz: a quarter of it)."""
        with jax.ensure_compile_time_eval():
            return jax.tree_util.tree_map(jax.device_put, tree)

    def to_host(self, value) -> Any:
        return np.asarray(value)

    def fail_on_read(self, values, pc, raise_failures: Callable, function: str):
        """``values``, from a run traced into a caller's computation, whose failed lanes
        (`pcbatch.vm.staged.lane_status`) raise when that computation runs: a host
        callback of ``pc`` calls ``raise_failures``, which raises pcbatch's own error;
        JAX reports it as a ``JaxRuntimeError`` whose message ends with that error.
        ``jax.debug.callback`` is kept by the compiler though nothing reads it."""
        jax.debug.callback(raise_failures, pc)
        return values

    def is_tracing(self, values) -> bool:
        return any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(values))

    def asarray(self, value, dtype=None):
        return jnp.asarray(value, None if dtype is None else _canonical(dtype))
