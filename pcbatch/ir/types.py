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


class WeakTensorType(TensorType):
    """The type of a value that is a Python scalar in each example (NEP 50's "weak" scalar).

    A literal (``acc = 0``), a ``range`` counter, or Python arithmetic on such values:
    per example they are Python ``int``/``float``/``bool``/``complex``, which take the
    dtype of the array they meet (``uint8_x + i`` stays uint8, ``float32_x + 0`` float32).
    The dtype is where the batch stores them (the kind's default: int64, float64, ...).
    A subclass with no fields of its own, so it unpacks into ``(dtype, shape)`` like any
    `TensorType`; note that it compares equal to the strong type of the same dtype and
    shape, so code that must tell them apart uses `type_key`.
    """

    def __repr__(self) -> str:
        return "weak " + super().__repr__()


def is_weak(t: Any) -> bool:
    return isinstance(t, WeakTensorType)


def is_python_scalar(x: Any) -> bool:
    """A Python bool, int, float or complex (not a NumPy scalar, which subclasses some)."""
    return type(x) in (bool, int, float, complex)


def python_scalar_of(dtype: Any) -> Any:
    """A Python scalar of ``dtype``'s kind: what NumPy treats as weak in promotion."""
    kind = np.dtype(dtype).kind
    return {"b": True, "i": 1, "u": 1, "f": 1.0, "c": 1j}.get(kind, 1)


def merge_weak_dtypes(a: TensorType, b: TensorType) -> tuple:
    """The dtype (and weakness) of a variable with definitions of types ``a`` and ``b``.

    Two strong dtypes promote as NumPy promotes them; a weak one takes the strong one's
    dtype where NumPy 2 would convert it so (``0`` beside float32: float32), and the
    default of a higher kind otherwise (``2.5`` beside int32: float64); two weak ones
    stay weak (an int and a float: a float).
    """
    if is_weak(a) and is_weak(b):
        return np.result_type(a.dtype, b.dtype), True
    if is_weak(a) or is_weak(b):
        weak, strong = (a, b) if is_weak(a) else (b, a)
        return np.result_type(strong.dtype, python_scalar_of(weak.dtype)), False
    return None, False


def type_key(pattern: Any) -> Any:
    """A hashable key of a type pattern that tells weak leaves from strong ones."""
    if isinstance(pattern, Type):
        pattern = pattern.tensors
    if is_pattern_node(pattern):
        return tuple(type_key(p) for p in pattern)
    return (is_weak(pattern), np.dtype(pattern.dtype).str, tuple(pattern.shape))


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


def unflatten(pattern: Any, values: list) -> Any:
    """``values`` (leaves, as `flatten` lists them) in the shape of ``pattern``."""
    iterator = iter(values)

    def build(p):
        if is_pattern_node(p):
            return rebuild(p, [build(x) for x in p])
        return next(iterator)

    return build(pattern)


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
