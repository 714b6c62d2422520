"""A call's arguments as every machine sees them: batch size, broadcasting, names.

An argument leaf with one more dimension than its per-example type leads with the
batch dimension; one without (or with batch size 1) is a per-example value that
broadcasts to every thread. The eager machine, the staged machine, refill and the
stackless interpreter all read their inputs this way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pcbatch.errors import BatchSizeError
from pcbatch.ir.nodes import Program
from pcbatch.ir.types import flatten, map_pattern


def local_name(name: str) -> str:
    """A variable's name as the user wrote it (``"main.x"`` -> ``"x"``)."""
    return name.rsplit(".", 1)[-1]


def leads_with_batch(leaf, type_) -> bool:
    """Whether an argument ``leaf`` has a batch dimension before its per-example shape."""
    return len(np.shape(leaf)) > len(type_.shape)


def batch_size_of(program: Program, args: Sequence) -> int:
    """The common batch size; arguments without a batch dimension (or size 1) broadcast."""
    size, first = 1, None
    for name, arg in zip(program.vars_in, args):
        type_ = program.var_types[name]
        for leaf, t in zip(flatten(arg), flatten(type_.tensors)):
            if not leads_with_batch(leaf, t):
                continue  # a per-example value: broadcast to every thread
            n = int(np.shape(leaf)[0])
            if n == 1 or n == size:
                continue
            if size != 1:
                raise BatchSizeError(
                    f"{program.main}(): argument {local_name(first)!r} has batch size {size} "
                    f"but argument {local_name(name)!r} has batch size {n}; give every "
                    "argument the same batch size, or size 1 to broadcast"
                )
            size, first = n, name
        first = first or name
    return size


def broadcast_inputs(program: Program, args: Sequence) -> list:
    """Each argument as NumPy arrays with a leading batch dimension of the common size."""
    size = batch_size_of(program, args)

    def fit(t, leaf):
        leaf = np.asarray(leaf, dtype=t.dtype)
        if len(leaf.shape) == len(t.shape):
            leaf = leaf[None]
        return np.broadcast_to(leaf, (size, *t.shape))

    return [
        map_pattern(fit, program.var_types[name].tensors, arg)
        for name, arg in zip(program.vars_in, args)
    ]
