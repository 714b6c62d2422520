"""The global and closure values a compiled Context read, to notice when they change.

A Context compiles its functions once: the primitives' lambdas are evaluated in a copy
of the functions' globals and closures, plain helpers' globals are read when a
primitive first runs (JAX and TensorFlow bake them into the traced program as
constants), and type inference depends on all of them. Python reads a global anew at
every call, so when one changes the compiled program must be rebuilt: `Snapshot`
records, when a Context compiles, every global and closure value its batched functions
(and the plain functions they reach) can read, and `Snapshot.changed` compares them
with the current values at each call, cheaply (a dict lookup and an identity test per
name, a few microseconds for a program such as NUTS).

What counts as a change (what is rebuilt for):
  * a global or closure variable rebound to another object (``SCALE = 3.0``,
    ``nonlocal`` rebinding, ``mod.SCALE = 3.0`` for ``mod.SCALE`` read through a
    module), except rebinding to an equal Python or NumPy scalar of the same type;
  * a NumPy array of at most `SMALL_ARRAY` elements changed in place.
Not noticed: a larger array changed in place, and attributes or items of other
objects (``config.scale``, ``table["k"]``) changed in place. Those are read at compile
(trace) time on JAX and TensorFlow: rebind the variable instead, or pass the value
as an argument.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

import numpy as np

#: arrays up to this many elements are copied at compile time and compared at each call
SMALL_ARRAY = 4096

#: libraries whose functions and modules are not followed (their globals are theirs)
_LIBRARIES = frozenset(
    {"numpy", "jax", "jaxlib", "tensorflow", "keras", "scipy", "ml_dtypes", "pcbatch"}
)

_MISSING = object()


class Snapshot:
    """Values of the names the functions given (and the plain functions they reach) read."""

    def __init__(self, functions: Iterable[Any]) -> None:
        # (namespace kind, where, name, value, a small array's bytes)
        self._entries: list = []
        self._seen: set = set()
        for function in functions:
            self._follow_function(function)

    def changed(self) -> str | None:
        """The first name whose value changed since the snapshot (for messages), or None."""
        for kind, where, name, old, old_copy in self._entries:
            new = _read(kind, where, name)
            if new is old:
                if old_copy is not None and _contents(new) != old_copy:
                    return name
                continue
            if not _equal_scalars(old, new):
                return name
        return None

    # -- recording -------------------------------------------------------------
    def _record(self, kind: str, where: Any, name: str) -> Any:
        value = _read(kind, where, name)
        small = (
            isinstance(value, np.ndarray)
            and value.size <= SMALL_ARRAY
            and value.dtype.kind in "biufc"
        )
        self._entries.append((kind, where, name, value, _contents(value) if small else None))
        return value

    def _follow_function(self, function: Any) -> None:
        function = getattr(function, "python_function", function)  # a batched function
        if not isinstance(function, types.FunctionType) or id(function) in self._seen:
            return
        self._seen.add(id(function))
        names = names_read(function.__code__)
        namespace = function.__globals__
        for name in names:
            if name in namespace:
                self._follow_value(self._record("global", namespace, name), names)
        for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
            self._follow_value(self._record("cell", cell, name), names)

    def _follow_value(self, value: Any, names: frozenset) -> None:
        """A user's module: its attributes the code may read; a user's function: its names;
        a library's function: its closure (where a wrapper keeps the user's function)."""
        if _from_library(value):
            if isinstance(value, types.FunctionType) and id(value) not in self._seen:
                self._seen.add(id(value))
                for name, cell in zip(value.__code__.co_freevars, value.__closure__ or ()):
                    self._follow_value(self._record("cell", cell, name), frozenset())
            return
        if isinstance(value, types.ModuleType):
            if id(value) in self._seen:
                return
            self._seen.add(id(value))
            for name in names:
                if name in value.__dict__:
                    self._follow_value(self._record("global", value.__dict__, name), names)
            return
        self._follow_function(value)


def _read(kind: str, where: Any, name: str) -> Any:
    if kind == "cell":
        try:
            return where.cell_contents
        except ValueError:  # an empty cell
            return _MISSING
    return where.get(name, _MISSING)


def names_read(code: types.CodeType) -> frozenset:
    """Global and attribute names ``code`` and its nested lambdas and comprehensions use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_read(const)
    return frozenset(names)


def _from_library(value: Any) -> bool:
    if isinstance(value, types.ModuleType):
        module = value.__name__
    elif isinstance(value, types.FunctionType):
        module = value.__module__ or ""
    else:
        return True  # not a function or module: nothing to follow
    root = module.partition(".")[0]
    return root in _LIBRARIES or root in sys.stdlib_module_names


def _equal_scalars(old: Any, new: Any) -> bool:
    """Equal Python or NumPy scalars of one type (NaN equals NaN): nothing to rebuild."""
    scalar = (bool, int, float, complex, str, bytes, np.generic)
    if type(old) is not type(new) or not isinstance(old, scalar):
        return False
    if old == new:
        return True
    return old != old and new != new  # both NaN


def _contents(array: np.ndarray) -> tuple:
    """What an in-place change alters: shape and bytes (0.2 us for 100 elements; NumPy's
    array_equal takes 5 us)."""
    return array.shape, array.tobytes()
