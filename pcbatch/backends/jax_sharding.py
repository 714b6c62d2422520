"""One batched call spread over a device mesh: every shard runs its own VM.

Contract. With ``JaxBackend(mesh=mesh, axis=name)`` the batch of a call is split
over the devices along ``name`` (``D`` of them) in equal blocks of ``ceil(B / D)``
threads; the last blocks are padded with threads that start halted, so they never
run a block. Inside ``jax.shard_map`` each device runs the whole staged VM
(``pcbatch/vm/staged.py``) on its block alone: its own loop, its own scheduler (the
lowest program counter of *its* threads), its own stacks. Nothing crosses devices
while the loop runs; a device whose threads have all halted leaves its loop early.

After the loop the outputs lose their padding and come back sharded over the mesh
(``gather=False``, when ``B`` is a multiple of ``D``; otherwise XLA picks their
layout) or replicated on every device (``gather=True``). The per-shard flags and
counters are combined once, after the run: stack overflow on any shard, the step
limit hit by any thread, counts summed over shards, and the block executions of
each shard kept apart (``shard_steps``: the figure that bounds the wall time).

Arguments with a leading batch dimension are sharded; per-example values (no
batch dimension, or a batch of 1) are replicated. Under ``jax.distributed`` every
process makes the same call with the same host arguments and gets the same
(gathered) result; with ``gather=False`` each process holds its devices' shards.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

#: per-shard results of the staged run combined by other rules than a sum
_SPECIAL = ("pc",)


class BatchSharding:
    """Where the batch goes: a mesh, the mesh axis (or axes) the batch is split over."""

    def __init__(self, mesh: Mesh, axis: str | tuple | None = None, gather: bool = False):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
        names = tuple(mesh.axis_names)
        if axis is None:
            if len(names) != 1:
                raise ValueError(
                    f"the mesh has axes {names}: name the one to split the batch over (axis=...)"
                )
            axis = names[0]
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        missing = [a for a in axes if a not in names]
        if missing:
            raise ValueError(f"axis {missing[0]!r} is not an axis of the mesh {names}")
        # Auto axes: shard_map and slicing as in classic pjit. On an Explicit mesh
        # (jax.make_mesh's default) every array's sharding is part of its type, and
        # dropping the padding of an uneven batch would be a type error.
        self.mesh = Mesh(mesh.devices, names, axis_types=(AxisType.Auto,) * len(names))
        self.axis = axes[0] if len(axes) == 1 else axes
        self.devices = math.prod(mesh.shape[a] for a in axes)
        self.gather = bool(gather)

    def shard_size(self, batch: int) -> int:
        """Threads per shard: the batch rounded up to a multiple of the device count."""
        return -(-batch // self.devices)

    def key(self) -> tuple:
        """What a compiled sharded run depends on besides the program and its inputs."""
        return (self.mesh, self.axis, self.gather)

    def build(
        self, traced: Callable, batch: int, shard_size: int, refill: bool = False
    ) -> ShardedRun:
        """The sharded run of ``traced`` (``(inputs, live) -> (outputs, info)``).

        With ``refill``, ``batch`` counts pending inputs and each device refills its
        lanes from its own share of them (padding inputs, copies of the last, run too:
        a lane has no way to start halted mid-run; their results are dropped).
        """
        mesh, axis, batch_spec = self.mesh, self.axis, P(self.axis)
        padded = shard_size * self.devices

        def per_shard(inputs):
            first = lax.axis_index(axis) * shard_size
            live = first + jnp.arange(shard_size) < batch  # padding threads start halted
            outputs, info = traced(inputs, None if refill else live)
            return outputs, jax.tree_util.tree_map(lambda v: v[None], info)

        def run(inputs):
            specs = jax.tree_util.tree_map(lambda x: _spec(x, batch, batch_spec), inputs)
            inputs = jax.tree_util.tree_map(lambda x: _pad(x, batch, padded), inputs)
            # check_vma=False: the VM's loop state mixes per-shard values with constants
            # it creates, and every lax.cond would otherwise need them cast to "varying".
            outputs, info = jax.shard_map(
                per_shard,
                mesh=mesh,
                in_specs=(specs,),
                out_specs=(batch_spec, batch_spec),
                check_vma=False,
            )(inputs)
            outputs = jax.tree_util.tree_map(lambda x: x[:batch], outputs)
            return outputs, combine(info, batch)

        replicated = NamedSharding(mesh, P())
        if self.gather:
            layout = replicated
        elif batch % self.devices == 0:
            layout = NamedSharding(mesh, batch_spec)
        else:  # jax arrays cannot be sharded unevenly
            layout = None
        return ShardedRun(jax.jit(run, out_shardings=(layout, replicated)), mesh)


class ShardedRun:
    """The jitted sharded run; arrays committed to devices outside the mesh are moved in
    first (jit refuses arguments that live on other devices than its computation)."""

    def __init__(self, jitted, mesh: Mesh):
        self.jitted = jitted
        self.devices = set(mesh.devices.flat)
        self.replicated = NamedSharding(mesh, P())

    def __call__(self, inputs):
        return self.jitted(jax.tree_util.tree_map(self._onto_mesh, inputs))

    def lower(self, inputs):
        return self.jitted.lower(jax.tree_util.tree_map(self._onto_mesh, inputs))

    def _onto_mesh(self, x):
        concrete = isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
        if concrete and x.committed and x.sharding.device_set != self.devices:
            return jax.device_put(x, self.replicated)
        return x


def _is_batched(x, batch: int) -> bool:
    return batch > 1 and np.ndim(x) > 0 and x.shape[0] == batch


def _spec(x, batch: int, batch_spec: P) -> P:
    return batch_spec if _is_batched(x, batch) else P()


def _pad(x, batch: int, padded: int):
    """A batched leaf grown to ``padded`` rows (copies of its last row: any values would
    do, the padding threads never run, but real ones keep every primitive finite)."""
    if not _is_batched(x, batch) or padded == batch:
        return x
    widths = [(0, padded - batch)] + [(0, 0)] * (np.ndim(x) - 1)
    return jnp.pad(x, widths, mode="edge")


def combine(info: dict, batch: int) -> dict:
    """The per-shard results (leading axis: shard) as one run's, plus ``shard_steps``."""
    combined = {"pc": info["pc"].reshape(-1)[:batch]}
    if "steps" in info:  # counted for a profile or a step limit
        combined["shard_steps"] = info["steps"]
    for key, value in info.items():
        if key not in _SPECIAL:
            combined[key] = jnp.sum(value, axis=0, dtype=value.dtype)
    return combined
