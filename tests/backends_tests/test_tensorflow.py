"""TensorFlow specifics: XLA compilation, tf.function composition, flags checked after a run."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch

tf = pytest.importorskip("tensorflow")

from pcbatch.backends.tensorflow import TensorFlowBackend  # noqa: E402
from pcbatch.examples import collatz, fib, is_even  # noqa: E402


def test_xla_compiled_run_matches_numpy():
    backend = TensorFlowBackend(jit_compile=True)
    n = np.array([3, 9, 1, 12])
    np.testing.assert_array_equal(np.asarray(fib(n, backend=backend)), fib(n))
    m = np.arange(40)
    np.testing.assert_array_equal(
        np.asarray(is_even(m, backend=backend, max_stack_depth=2)), m % 2 == 0
    )


def test_tensors_choose_the_tensorflow_backend_and_no_retrace():
    result = collatz(tf.constant([6, 7, 27]))
    assert isinstance(result, tf.Tensor)
    np.testing.assert_array_equal(result.numpy(), [8, 16, 111])
    backend = TensorFlowBackend(jit_compile=False)
    collatz(np.array([6, 7]), backend=backend)
    traces = backend.traces
    collatz(np.array([9, 10]), backend=backend)
    assert backend.traces == traces


def test_callable_inside_tf_function():
    @tf.function
    def doubled(x):
        return 2 * collatz(x)

    np.testing.assert_array_equal(doubled(tf.constant([6, 7])).numpy(), [16, 32])


def test_stack_overflow_is_detected_after_the_run():
    with pytest.raises(pcbatch.StackOverflowError, match="'fib'"):
        fib(np.array([3, 20]), backend=TensorFlowBackend(jit_compile=False), max_stack_depth=6)


def test_block_code_cache_and_safety_checks():
    backend = TensorFlowBackend(jit_compile=False)
    cache = {}
    collatz(np.array([6, 7]), backend=backend, block_code_cache=cache)
    assert cache  # the compiled program lives in the caller's dict
    traces = backend.traces
    collatz(np.array([9, 10]), backend=backend, block_code_cache=cache)
    assert backend.traces == traces
    unchecked = TensorFlowBackend(safety_checks=False, jit_compile=False)
    fib(np.array([3, 20]), backend=unchecked, max_stack_depth=6)  # no error: raw speed


def test_numpy_arrays_after_tensors_of_the_same_signature_do_not_retrace():
    """The compile cache keys on shape and dtype, not on the kind of array passed."""
    backend = TensorFlowBackend(jit_compile=False)
    collatz(tf.constant([6, 7], tf.int64), backend=backend)
    traces = backend.traces
    got = collatz(np.array([9, 10], np.int64), backend=backend)
    np.testing.assert_array_equal(np.asarray(got), collatz(np.array([9, 10])))
    collatz(tf.constant([3, 4], tf.int64), backend=backend)
    assert backend.traces == traces
