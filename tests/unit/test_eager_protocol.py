"""The eager machine runs any backend that implements the backend protocol (issue 29).

`ProtocolOnly` forwards to a `NumpyBackend` exactly the attributes that
`pcbatch.backends.base.Backend` declares, and nothing else: no NumPy class, no
extra method. A program that branches on ints, loops, recurses, assigns items in
place and overflows its stack runs on it as on NumPy, so the eager machine (and
the compiler before it) needs nothing beyond the protocol.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch.backends import base


def _protocol_names(protocol) -> set:
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return names


class ProtocolOnly:
    """A backend object with only the protocol's attributes (forwarded to NumPy's)."""

    def __init__(self):
        inner = pcbatch.NumpyBackend()
        for name in _protocol_names(base.Backend):
            setattr(self, name, getattr(inner, name))


ctx = pcbatch.Context()


@ctx.batch
def depth(n):
    if n <= 0:
        return 0
    return 1 + depth(n - 1)


@ctx.batch
def collatz_and_buffer(n):
    steps = 0
    buf = np.zeros(4)
    while n != 1:
        buf[steps % 4] = n
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps, buf


def test_the_protocol_declares_the_core_the_eager_machine_uses():
    names = _protocol_names(base.Backend)
    for name in ("select", "to_host", "copy_out", "place", "lanes_at", "lanes_of",
                 "measures_stack_depth"):
        assert name in names
    assert {"assign_items", "clear_stack"} <= _protocol_names(base.Variable)


def test_a_protocol_only_backend_gives_numpys_results():
    n = np.array([1, 6, 7, 12])
    for fn, args in ((depth, (n,)), (collatz_and_buffer, (n,))):
        want = fn(*args, backend=pcbatch.NumpyBackend())
        got = fn(*args, backend=ProtocolOnly())
        for w, g in zip(pcbatch.ir.types.flatten(want), pcbatch.ir.types.flatten(got)):
            np.testing.assert_array_equal(g, w)


def test_a_protocol_only_backend_measures_the_depth_an_overflow_needs():
    with pytest.raises(pcbatch.StackOverflowError) as numpy_error:
        depth(np.array([3, 40]), backend=pcbatch.NumpyBackend(), max_stack_depth=8)
    with pytest.raises(pcbatch.StackOverflowError) as error:
        depth(np.array([3, 40]), backend=ProtocolOnly(), max_stack_depth=8)
    assert error.value.suggested_depth == numpy_error.value.suggested_depth is not None
    assert str(error.value) == str(numpy_error.value)


def test_a_protocol_only_backend_refills_lanes_as_numpy_does():
    n = np.arange(1, 30)
    want = collatz_and_buffer.map(n, width=4, group=2, backend=pcbatch.NumpyBackend())
    got = collatz_and_buffer.map(n, width=4, group=2, backend=ProtocolOnly())
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    deep = np.array([2, 30, 1, 3])
    with pytest.raises(pcbatch.StackOverflowError) as numpy_error:
        depth.map(deep, width=2, backend=pcbatch.NumpyBackend(), max_stack_depth=8)
    with pytest.raises(pcbatch.StackOverflowError) as error:
        depth.map(deep, width=2, backend=ProtocolOnly(), max_stack_depth=8)
    assert str(error.value) == str(numpy_error.value)
