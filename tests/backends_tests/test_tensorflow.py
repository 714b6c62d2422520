"""TensorFlow specifics: XLA compilation, tf.function composition, flags checked after a run."""

from __future__ import annotations

import traceback

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


@pytest.mark.parametrize("method", ["call", "map"])
def test_autograph_calls_pcbatch_as_written(monkeypatch, method):
    """A user's tf.function converts the Python it calls (AutoGraph) unless told not
    to: converted, pcbatch's compiler and machine took 13 s to trace Fibonacci x100."""
    from pcbatch.vm import runner

    callers = []
    run = runner.run

    def spy(*args, **kwargs):
        # The caller is pcbatch's own code, or (converted) a file AutoGraph generated.
        callers.append(traceback.extract_stack()[-2].filename)
        return run(*args, **kwargs)

    monkeypatch.setattr(runner, "run", spy)
    backend = TensorFlowBackend(jit_compile=False)

    @tf.function  # autograph=True, the default
    def doubled(x):
        if method == "map":
            return 2 * collatz.map(x, width=2, backend=backend)
        return 2 * collatz(x, backend=backend)

    np.testing.assert_array_equal(doubled(tf.constant([6, 7, 27])).numpy(), [16, 32, 222])
    assert callers == [pcbatch.api.__file__]


@pytest.mark.parametrize("jit_compile", [True, False])
def test_code_may_close_over_variables_and_tensors(jit_compile):
    """Per-example code that reads a tf.Variable or an eager tensor from outside traces
    (a plain graph cannot capture them), and a later call sees the variable's new value."""
    scale, limit = tf.Variable(3.0), tf.constant(10.0)
    context = pcbatch.Context()

    @context.batch
    def grow(x):
        while x < limit:
            x = x * scale
        return x

    backend = TensorFlowBackend(jit_compile=jit_compile)
    x = tf.constant([1.0, 2.0, 11.0])
    np.testing.assert_array_equal(np.asarray(grow(x, backend=backend)), [27.0, 18.0, 11.0])
    scale.assign(2.0)
    np.testing.assert_array_equal(np.asarray(grow(x, backend=backend)), [16.0, 16.0, 11.0])


def test_a_batch_size_unknown_while_tracing_is_named():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
    def doubled(x):
        return 2 * collatz(x)

    # AutoGraph re-raises it as itself, not as its StagingError.
    with pytest.raises(pcbatch.BatchSizeError, match=r"collatz\(\): argument 'x'.*input_sig"):
        doubled(tf.constant([6, 7], tf.int64))


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


ctx = pcbatch.Context()


@ctx.batch
def scaled_or_stacked(x):
    y = x * 3 - 1  # elementwise on per-example scalars: runs on the batch's vector
    if y > 5:
        return np.stack([y, x]).max()  # a stack: mapped over the examples
    return np.maximum(y, 0)


def _elementwise(function, *args):
    from pcbatch.backends.tensorflow import _ElementwiseCheck

    return _ElementwiseCheck(TensorFlowBackend().adapt(function))(args)


def test_only_elementwise_work_on_values_of_one_shape_skips_the_vectorized_map():
    vector, rows = tf.constant([1, 2, 3]), tf.ones([3, 2])
    assert _elementwise(lambda x: np.maximum(x * 3 - 1, 0), vector)
    assert _elementwise(lambda x, y: (x < y, np.where(x > 0, x, y)), vector, vector)
    assert not _elementwise(lambda x: np.stack([x, x]).max(), vector)
    assert not _elementwise(lambda x: x + np.arange(2), vector)  # results are not scalars
    # per-example vectors of one shape: elementwise work on them, nothing else
    assert _elementwise(lambda x: (np.signbit(x), np.copysign(1.0, x), x * 2), rows)
    assert _elementwise(lambda x: x + np.arange(2.0), rows)  # the constant has their shape
    assert not _elementwise(lambda x: x.sum(), rows)
    assert not _elementwise(lambda x: x * x.shape[0], rows)  # the batch's trace differs
    assert not _elementwise(lambda x, y: x * y, rows, tf.ones([3]))  # shapes differ


@pytest.mark.parametrize("jit_compile", [True, False])
def test_elementwise_and_vectorized_primitives_agree_with_dry_run(jit_compile, monkeypatch):
    real, uses = tf.vectorized_map, []
    monkeypatch.setattr(tf, "vectorized_map", lambda *a, **k: uses.append(1) or real(*a, **k))
    x = np.array([0, 1, 2, 5, -4, 9], np.int32)
    got = scaled_or_stacked(x, backend=TensorFlowBackend(jit_compile=jit_compile))
    np.testing.assert_array_equal(np.asarray(got), scaled_or_stacked(x, dry_run=True))
    assert uses  # the stack's primitive still maps over the examples


@pytest.mark.parametrize("dispatch", ["loops", "switch"])
def test_both_xla_dispatches_match_numpy(dispatch):
    backend = TensorFlowBackend(jit_compile=True, dispatch=dispatch)
    n = np.array([3, 9, 1, 12, 0])
    np.testing.assert_array_equal(np.asarray(fib(n, backend=backend)), fib(n))
    m = np.arange(23)
    np.testing.assert_array_equal(
        np.asarray(is_even(m, backend=backend, max_stack_depth=2)), m % 2 == 0
    )
    starts = np.array([6, 7, 27, 1])
    np.testing.assert_array_equal(
        np.asarray(collatz(starts, backend=backend)), collatz(starts)
    )


def test_flat_dispatch_compiles_inside_a_users_xla_function_on_constants():
    # A constant that reaches a row of loops unchanged made tf2xla fail ("Cannot find
    # body function ..._const_0") on programs of three blocks or more, as is_even is.
    backend = TensorFlowBackend(jit_compile=True)

    @tf.function(jit_compile=True, autograph=False)
    def evens_of_constants():
        return is_even(tf.constant([3, 4, 5]), backend=backend, max_stack_depth=2)

    @tf.function(jit_compile=True, autograph=False)
    def evens(x):
        return is_even(x, backend=backend, max_stack_depth=2)

    np.testing.assert_array_equal(evens_of_constants().numpy(), [False, True, False])
    np.testing.assert_array_equal(evens(tf.range(6)).numpy(), np.arange(6) % 2 == 0)


def test_the_anchor_leaves_nothing_for_xla_to_run():
    """The anchor is an empty random draw: XLA folds its test, so no kernel reads the
    generator's state (a scalar draw was inlined into a kernel per constant of the
    initial state, each repeating the generator)."""
    backend = TensorFlowBackend()
    np.asarray(is_even(np.arange(6), backend=backend, max_stack_depth=2))
    (entry,) = backend.compile_cache.values()
    inputs = [tf.convert_to_tensor(np.arange(6))]
    compiler_ir = entry.function.traced.experimental_get_compiler_ir
    hlo = compiler_ir(*entry.arguments(inputs))(stage="optimized_hlo")
    readers = [line for line in hlo.splitlines() if "(%rng" in line or ", %rng" in line]
    assert not readers, readers


def test_unknown_dispatch_is_rejected():
    with pytest.raises(ValueError, match="dispatch='tree'"):
        TensorFlowBackend(dispatch="tree")


def test_profile_counts_and_step_limit_with_the_entry_run_before_the_loop():
    # Fibonacci's and Collatz's entries run once, before the staged loop: still one step
    # and one block execution each, as on NumPy.
    from pcbatch.vm import policy

    backend = TensorFlowBackend(jit_compile=True)
    n = np.array([6, 7, 8, 7])
    with pcbatch.profile() as tf_prof:
        fib(n, backend=backend)
    with pcbatch.profile() as numpy_prof:
        fib(n)
    assert tf_prof.block_executions == numpy_prof.block_executions
    assert tf_prof.primitive_counts == numpy_prof.primitive_counts
    program = fib.context.lowered_for_args(fib.name, (n,), backend)
    assert policy.entry_runs_once(program)
    starts = np.array([6, 1])
    with pcbatch.profile() as steps:
        collatz(starts)
    needed = steps.block_executions
    assert collatz(starts, backend=backend, max_steps=needed).numpy().tolist() == [8, 0]
    for too_few in (1, needed - 1):
        with pytest.raises(pcbatch.StepLimitError):
            collatz(starts, backend=backend, max_steps=too_few)


def test_two_threads_compile_on_one_backend_at_once():
    # The anchor of `jit` lives per thread while a program is traced.
    from concurrent.futures import ThreadPoolExecutor

    backend = TensorFlowBackend(jit_compile=True)
    sizes = [5, 6, 7, 8]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda k: is_even(np.arange(k), backend=backend,
                                               max_stack_depth=2), sizes))
    for k, result in zip(sizes, runs):
        np.testing.assert_array_equal(np.asarray(result), np.arange(k) % 2 == 0)


def test_integer_powers_past_the_bit_width_wrap_as_numpys_under_xla():
    """XLA's integer power reads the exponent's low six bits (``2 ** 3000000`` was 1, NumPy
    wraps it to 0); TensorFlow's own kernel, without XLA, wraps as NumPy's."""
    from tests.semantics import outsider_src

    n = np.array([0, 1, 2, 9])
    batched = pcbatch.Context().batch(outsider_src.integer_power_past_the_bit_width)
    want = batched(n, dry_run=True)
    for jit_compile in (True, False):
        got = batched(n, backend=TensorFlowBackend(jit_compile=jit_compile))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)
