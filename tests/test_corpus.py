"""Differential tests: every corpus program, batched, equals running each example alone.

The ground truth is the reference interpreter run per example
(`pcbatch.vm.reference.run_batch`); corpus entries with a plain-Python
``reference`` also check the reference interpreter itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch.ir.types import flatten
from pcbatch.passes import infer_types
from pcbatch.vm import reference, runner
from tests.programs.corpus import CORPUS, CORPUS_BY_NAME

BATCH_SIZES = (1, 2, 37)


def _assert_same(actual, expected):
    for a, e in zip(flatten(actual), flatten(expected), strict=True):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(a, e, rtol=1e-12, atol=0)
        else:
            np.testing.assert_array_equal(a, e)


def _ground_truth(program, args):
    typed = infer_types.run(program, pcbatch.NumpyBackend(), runner.signature_of(args))
    return reference.run_batch(typed, args)


@pytest.mark.parametrize("batch_size", BATCH_SIZES)
@pytest.mark.parametrize("stackless", [False, True], ids=["stack", "stackless"])
@pytest.mark.parametrize("entry", CORPUS, ids=lambda p: p.name)
def test_batched_equals_per_example(entry, stackless, batch_size):
    rng = np.random.RandomState(batch_size)
    program = entry.build()
    args = entry.make_args(rng, batch_size)
    expected = _ground_truth(program, args)
    actual = runner.run(program, args, stackless=stackless, max_stack_depth=entry.max_stack_depth)
    _assert_same(actual, expected)


@pytest.mark.parametrize("entry", CORPUS, ids=lambda p: p.name)
def test_batched_equals_per_example_on_torch(entry):
    """The eager machine on torch tensors gives the reference's values and dtypes."""
    torch = pytest.importorskip("torch")
    from pcbatch.backends.torch import TorchBackend

    args = entry.make_args(np.random.RandomState(37), 37)
    expected = _ground_truth(entry.build(), args)
    actual = runner.run(
        entry.build(), args, backend=TorchBackend(), max_stack_depth=entry.max_stack_depth
    )
    for a, e in zip(flatten(actual), flatten(expected), strict=True):
        assert isinstance(a, torch.Tensor) and a.numpy().dtype == np.asarray(e).dtype
    _assert_same(actual, expected)


@pytest.mark.parametrize("entry", [p for p in CORPUS if p.reference], ids=lambda p: p.name)
def test_reference_interpreter_matches_plain_python(entry):
    rng = np.random.RandomState(0)
    args = entry.make_args(rng, 5)
    expected = _ground_truth(entry.build(), args)
    for i in range(5):
        one = entry.reference(*(a[i] for a in args))
        _assert_same(
            [np.asarray(x) for x in flatten(one)],
            [np.asarray(x)[i] for x in flatten(expected)],
        )


def test_fibonacci_batches_its_additions():
    program = CORPUS_BY_NAME["fib"].build()
    with pcbatch.profile() as prof:
        result = runner.run(program, [np.array([6, 7, 8, 7])])
    np.testing.assert_array_equal(result, [8, 13, 21, 13])
    assert prof.primitive_counts["add"] <= 21
    assert prof.block_executions > 0 and 0 < prof.lane_utilization <= 1
    assert 0 < prof.occupancy <= 1


def test_tail_calls_run_in_constant_stack():
    program = CORPUS_BY_NAME["tail_sum"].build()
    n = np.array([0, 1, 50, 500])
    result = runner.run(program, [n], max_stack_depth=1)
    np.testing.assert_array_equal(result, n * (n + 1) // 2)


def test_stack_overflow_names_function_and_suggests_depth():
    program = CORPUS_BY_NAME["fib"].build()
    with pytest.raises(pcbatch.StackOverflowError) as info:
        runner.run(program, [np.array([3, 12, 5])], max_stack_depth=4)
    err = info.value
    assert err.function == "fib"
    assert "'fib'" in str(err) and "max_stack_depth=4" in str(err)
    assert err.suggested_depth is not None
    # The suggestion really suffices.
    result = runner.run(program, [np.array([3, 12, 5])], max_stack_depth=err.suggested_depth)
    np.testing.assert_array_equal(result, [2, 144, 5])
