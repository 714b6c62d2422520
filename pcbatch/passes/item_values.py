"""A Python int stored into a narrow int array (``buf[i] = k``) converted as NumPy 2 does.

NumPy 2 raises OverflowError for ``buf[0] = 300`` with ``buf`` int8, as it does for
``buf + 300``. The machines store an item by a cast (`pcbatch.ir.setitem.SetItem`,
run in place), which wraps. So type inference puts a per-example conversion before
such an item assignment: ``value`` added to a zero of ``buf``'s dtype, which NEP 50
converts like any weak int meeting that array (`pcbatch.backends.weak`): the NumPy
machine raises at the line, a compiled one stops the examples its overflow probe flags.
Only a weak int value (a literal, a ``range`` counter, a Python int argument) and an
int target narrower than int64 (or unsigned) get one; any other item is stored as before.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcbatch.ir.nodes import PrimOp
from pcbatch.ir.setitem import SetItem
from pcbatch.ir.types import TensorType, Type, is_pattern_node, is_weak


def item_value(target, value):
    """One example's ``value`` as ``target[...] = value`` converts it (a weak int)."""
    return np.add(np.zeros((), target.dtype), value)


def needs_conversion(op, types: dict) -> bool:
    """Whether ``op`` stores a weak int into a narrow int array."""
    if not (isinstance(op, PrimOp) and isinstance(op.function, SetItem)):
        return False
    target, value = (types.get(v) for v in op.vars_in[:2])
    if target is None or value is None:
        return False
    if is_pattern_node(target.tensors) or is_pattern_node(value.tensors):
        return False
    kind = np.dtype(target.tensors.dtype)
    narrow = kind.kind == "u" or (kind.kind == "i" and kind.itemsize < 8)
    weak_int = is_weak(value.tensors) and np.dtype(value.tensors.dtype).kind in "iu"
    return narrow and weak_int


def converted(op: PrimOp, types: dict) -> tuple:
    """(the conversion op, ``op`` reading its result); records the new variable's type."""
    target, value = op.vars_in[:2]
    name = f"{value}__as_item_of_{target.split('.')[-1]}"
    t = types[target].tensors
    types[name] = Type(TensorType(t.dtype, types[value].tensors.shape))
    convert = PrimOp(
        (target, value), name, item_value, loc=op.loc, name="item_value", per_example=True
    )
    return convert, dataclasses.replace(op, vars_in=(target, name, *op.vars_in[2:]))
