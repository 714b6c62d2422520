"""`pcbatch.host_callback`: the host sees exactly the active threads' values, on every backend."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import pcbatch
from tests import backends

ctx = pcbatch.Context()
calls: list = []


def record(x, total):
    calls.append((np.asarray(x).copy(), np.asarray(total).copy()))


switched_off = None


@ctx.batch
def countdown(x):
    total = 0
    while x > 0:
        pcbatch.host_callback(record, x, total)
        total = total + x
        x = x - 1
    return total


@ctx.batch
def countdown_quietly(x):
    total = 0
    while x > 0:
        pcbatch.host_callback(switched_off, x, total)
        total = total + x
        x = x - 1
    return total


@ctx.batch
def report_at_the_end(x):
    total = 0
    while x > 0:
        total = total + x
        x = x - 1
    pcbatch.host_callback(record, x, total)
    return total


def _reported() -> collections.Counter:
    """The (x, total) pairs the host saw, as a multiset (JAX may deliver out of order)."""
    pairs = collections.Counter()
    for x, total in calls:
        assert x.shape == total.shape and x.ndim == 1
        pairs.update(zip(x.tolist(), total.tolist()))
    return pairs


@backends.backend_param
def test_the_host_sees_each_thread_once_per_visit(backend_name):
    xs = np.array([3, 1, 0, 2, 4])
    calls.clear()
    expected = countdown(xs, dry_run=True)
    oracle = _reported()
    assert sum(oracle.values()) == int(xs.sum())  # one call per loop iteration
    calls.clear()
    result = countdown(xs, backend=backends.backend(backend_name))
    backends.assert_close(result, expected, backend_name)
    assert _reported() == oracle
    # A step reports every thread at the line at once, not one call per thread.
    assert len(calls) < sum(oracle.values())


def test_a_callback_that_is_none_compiles_to_nothing():
    xs = np.array([3, 1, 2])
    with pcbatch.profile() as quiet:
        result = countdown_quietly(xs)
    with pcbatch.profile() as loud:
        countdown(xs)
    np.testing.assert_array_equal(result, countdown(xs, dry_run=True))
    assert not any("host_callback" in label for label in quiet.primitive_counts)
    assert loud.primitive_lanes["host_callback(record)"] == 6
    assert quiet.block_executions == loud.block_executions


def test_tensorflow_under_xla_skips_the_callback_with_a_warning():
    pytest.importorskip("tensorflow")
    from pcbatch.backends.tensorflow import TensorFlowBackend

    calls.clear()
    xs = np.array([2, 1])
    with pytest.warns(pcbatch.HostCallbackWarning, match="jit_compile"):
        result = countdown(xs, backend=TensorFlowBackend(jit_compile=True))
    np.testing.assert_array_equal(np.asarray(result), countdown(xs, dry_run=True))
    calls.clear()


def test_the_callback_must_be_a_constant():
    local_ctx = pcbatch.Context()

    @local_ctx.batch
    def bad(x):
        f = record
        pcbatch.host_callback(f, x)
        return x

    with pytest.raises(pcbatch.AutobatchSyntaxError, match="global or closure"):
        bad(np.array([1, 2]))


def test_the_callback_takes_positional_values_only():
    local_ctx = pcbatch.Context()

    @local_ctx.batch
    def bad(x):
        pcbatch.host_callback(record, x=x)
        return x

    with pytest.raises(pcbatch.AutobatchSyntaxError, match="positional"):
        bad(np.array([1, 2]))


def test_a_sweep_calls_the_host_only_when_a_thread_is_at_the_callback(monkeypatch):
    """JAX's sweep (its choice on a GPU) runs every block at each step; a callback's
    block it enters only when some thread is there (a transfer to the host is dear)."""
    pytest.importorskip("jax")
    from pcbatch.backends.jax import JaxBackend

    deliveries = []
    deliver = pcbatch.callbacks.HostCallbackOp._deliver
    monkeypatch.setattr(pcbatch.callbacks.HostCallbackOp, "_deliver",
                        lambda self, mask, *v: (deliveries.append(np.asarray(mask).any()),
                                                deliver(self, mask, *v)))
    xs = np.array([3, 1, 0, 2, 12])
    expected = report_at_the_end(xs, dry_run=True)
    calls.clear()
    result = report_at_the_end(xs, backend=JaxBackend(block_choice="sweep"))
    np.testing.assert_array_equal(np.asarray(result), expected)
    assert sorted(int(t) for _, total in calls for t in total) == sorted(expected.tolist())
    # each thread reaches the line at its own step: most steps have no thread there
    assert deliveries and all(deliveries)
