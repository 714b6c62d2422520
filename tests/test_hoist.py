"""Hoisted writes (`pcbatch.vm.hoist`): large registers set from values their block
does not change are written after the step, outside the block dispatch.

The programs keep result buffers the way NUTS does: allocated once, filled by item
assignment in a loop around a recursive call, copied and returned once. With a batch
of 32 and 40 entries per thread the buffers are large registers (cells) on JAX, so
the hoisting and port plans are exercised; every backend must still equal the
per-example run (``dry_run``), and on JAX the buffers must have left the ports.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch.vm import ports
from tests.backends import assert_close, backend, backend_param, leaves, make_backend

ctx = pcbatch.Context()
LENGTH = 40


@ctx.batch
def triangle(n, acc):
    # a recursive call inside the loop: threads spread over several blocks
    return acc if n == 0 else triangle(n - 1, acc + n)


@ctx.batch
def record(x, steps):
    buf = np.zeros(LENGTH)
    scratch = np.zeros(LENGTH) + x  # would hoist, but the loop's write does not
    i = 0
    while i < steps:
        x = x + triangle(i % 5, 0)
        scratch = scratch * 0.5 + x  # rewritten in the loop from itself: a port
        buf[i] = x  # an item assignment made after the step (posted)
        i = i + 1
    doubled = buf * 2.0  # the return hoists with this: buf is not written in its block
    return doubled, scratch, buf


@ctx.batch
def reassigned(x, steps):
    # The whole buffer is set in two places, one in a loop that also reads it.
    buf = np.zeros(LENGTH)
    i = 0
    while i < steps:
        buf = buf + x
        x = x * 0.5
        i = i + 1
    return buf


def _args(seed: int, batch: int = 32):
    rng = np.random.RandomState(seed)
    return rng.randn(batch), rng.randint(0, LENGTH + 1, size=batch)


@backend_param
@pytest.mark.parametrize("fn", [record, reassigned], ids=["record", "reassigned"])
def test_equals_dry_run(backend_name, fn):
    x, steps = _args(3)
    expected = fn(x, steps, dry_run=True)
    actual = fn(x, steps, backend=backend(backend_name))
    if fn is reassigned:
        actual, expected = (actual,), (expected,)
    for a, e in zip(actual, expected, strict=True):
        assert_close(a, e, backend_name)


def _staged(fn, args):
    """The staged machine JAX built for ``fn`` on ``args`` (from its compile cache)."""
    from pcbatch.backends.jax import JaxBackend

    jax_backend = JaxBackend()
    fn(*args, backend=jax_backend)
    (entry,) = jax_backend.compile_cache.values()
    return entry[2]


def test_result_buffers_leave_the_ports():
    pytest.importorskip("jax")
    staged = _staged(record, _args(4))
    names = {name for names in staged.hoisted.names.values() for name in names}
    assert {"record.buf", "record.__ret0"} <= names  # (doubled: a temporary of the return)
    assert "record.scratch" not in names
    ported = set(staged.ports.port)
    assert "record.buf#0" not in ported and "record.__ret0#0" not in ported
    assert "record.scratch#0" in ported


def test_a_buffer_written_in_a_loop_from_itself_keeps_its_port():
    pytest.importorskip("jax")
    staged = _staged(reassigned, _args(5))
    assert "reassigned.buf#0" in staged.ports.port
    assert ports.MIN_ELEMENTS <= 32 * LENGTH


# Recursion, mutual recursion, loops with break, tuples, item assignment into buffers
# with event shapes, the NUTS-shaped tree.
EVERY_REGISTER_A_CELL = [
    "fib", "even_odd", "collatz", "hanoi", "ackermann", "nuts_trajectories",
    "running_maxima", "pascal_rows", "digit_frames", "break_continue", "tuple_unpack",
    "self_update_call", "tree_sum", "partitions",
]


@pytest.mark.parametrize("name", EVERY_REGISTER_A_CELL)
def test_corpus_with_every_register_a_cell(monkeypatch, name):
    # With the threshold at one element, every register goes through a port or a
    # hoisted write: the plans must hold on whole programs, not only on big buffers.
    pytest.importorskip("jax")
    from tests.programs.python_corpus import PY_CORPUS_BY_NAME

    monkeypatch.setattr(ports, "MIN_ELEMENTS", 1)
    entry = PY_CORPUS_BY_NAME[name]
    args = entry.make_args(np.random.RandomState(len(name)), 9)
    expected = entry.fn(*args, dry_run=True)
    actual = entry.fn(*args, backend=make_backend("jax"))  # a fresh compile cache
    for a, e in zip(leaves(actual), leaves(expected), strict=True):
        assert_close(a, e, "jax")

