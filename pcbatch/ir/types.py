"""Types of VM variables, allocation kinds, and helpers for nested patterns.

A *pattern* is either a leaf or a (possibly nested) ``tuple``/``list`` of
patterns. Variables hold patterns of tensors; ``PrimOp.vars_out`` is a pattern
of variable names; a ``Type`` wraps a pattern of ``TensorType`` leaves.

Shapes in ``TensorType`` never include the batch dimension.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


class TensorType(NamedTuple):
    """The dtype and per-example shape (batch dimension excluded) of a tensor."""

    dtype: Any
    shape: tuple

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{np.dtype(self.dtype).name}[{dims}]"


class Type(NamedTuple):
    """The type of a VM variable: a pattern of `TensorType` leaves."""

    tensors: Any

    def __repr__(self) -> str:
        return format_pattern(self.tensors, repr)


class VariableAllocation(enum.IntEnum):
    """How the VM stores a variable, from cheapest to most expensive.

    NULL: never read, so never stored; writes are dropped.
    TEMPORARY: lives within one basic block; never crosses a block boundary.
    REGISTER: one value per thread, kept across blocks, never saved.
    FULL: a register plus a per-thread stack, because it is live across a
      call that may overwrite it.
    """

    NULL = 0
    TEMPORARY = 1
    REGISTER = 2
    FULL = 3


def is_pattern_node(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and not isinstance(x, TensorType)


def map_pattern(fn: Callable, *patterns: Any) -> Any:
    """Applies ``fn`` leafwise to parallel patterns, keeping the first's structure."""
    first = patterns[0]
    if is_pattern_node(first):
        for other in patterns[1:]:
            if not is_pattern_node(other) or len(other) != len(first):
                raise ValueError(f"pattern structures differ: {first!r} vs {other!r}")
        return rebuild(first, [map_pattern(fn, *items) for items in zip(*patterns)])
    return fn(*patterns)


def rebuild(like: Any, items: list) -> Any:
    """A tuple, list or namedtuple of the same kind as ``like`` holding ``items``."""
    if hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def flatten(pattern: Any) -> list:
    """The leaves of ``pattern``, depth first, left to right."""
    if is_pattern_node(pattern):
        return [leaf for item in pattern for leaf in flatten(item)]
    return [pattern]


def same_structure(a: Any, b: Any) -> bool:
    if is_pattern_node(a) != is_pattern_node(b):
        return False
    if not is_pattern_node(a):
        return True
    return len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))


def format_pattern(pattern: Any, leaf_format: Callable[[Any], str] = str) -> str:
    if is_pattern_node(pattern):
        inner = ", ".join(format_pattern(p, leaf_format) for p in pattern)
        return f"({inner},)" if len(pattern) == 1 else f"({inner})"
    return leaf_format(pattern)
