"""Runtime failures (stack overflow, step limit) are never silent: eager calls raise,
traced calls raise when the run executes or report a per-lane status, and the lanes
that did not fail keep their right results (docs/semantics/failures.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.semantics.failures_src import (
    collatz,
    collatz_plain,
    fib,
    fib_pair,
    fib_plain,
    halved,
)

N = np.array([3, 11, 5])  # fib(11) needs 10 levels of stack, the others at most 4
DEPTH = 6


def _poison_of(dtype):
    dtype = np.dtype(dtype)
    return np.iinfo(dtype).min if dtype.kind == "i" else np.nan


@backends.backend_param
def test_eager_overflow_raises_naming_function_and_depth(backend_name):
    backend = backends.backend(backend_name)
    with pytest.raises(pcbatch.StackOverflowError, match=r"'fib' exceeded max_stack_depth=6"):
        fib(N, backend=backend, max_stack_depth=DEPTH)


@backends.backend_param
def test_eager_step_limit_raises(backend_name):
    backend = backends.backend(backend_name)
    with pytest.raises(pcbatch.StepLimitError, match=r"collatz\(\) did not finish in max_steps"):
        collatz(np.array([6, 27]), backend=backend, max_steps=40)


@pytest.mark.parametrize("backend_name", backends.COMPILED_NAMES)
def test_under_most_threads_a_runaway_lane_keeps_the_others_waiting(backend_name):
    """Documented (docs/semantics/failures.md): the status says so, nothing is wrong."""
    backend = backends.backend(backend_name)
    _, status = collatz(np.array([6, 77031]), backend=backend, max_steps=250,
                        return_status=True)
    # A sweep (JAX's choice on a GPU) runs every block at each step: nobody waits.
    sweeps = getattr(backend, "step_choice", None) == "sweep"
    assert np.asarray(status).tolist() == ([0, 2] if sweeps else [2, 2])


@backends.backend_param
def test_return_status_reports_the_overflowed_lane_and_keeps_the_others(backend_name):
    backend = backends.backend(backend_name)
    result, status = fib(N, backend=backend, max_stack_depth=DEPTH, return_status=True)
    result, status = np.asarray(result), np.asarray(status)
    assert status.tolist() == [pcbatch.LaneStatus.OK, pcbatch.LaneStatus.STACK_OVERFLOW, 0]
    assert result[0] == fib_plain(3) and result[2] == fib_plain(5)
    assert result[1] == _poison_of(result.dtype)


@backends.backend_param
def test_float_results_of_failed_lanes_are_nan(backend_name):
    backend = backends.backend(backend_name)
    x, n = np.array([8.0, 8.0, 8.0]), np.array([2, 20, 3])
    result, status = halved(x, n, backend=backend, max_stack_depth=DEPTH, return_status=True)
    result = np.asarray(result)
    assert np.asarray(status).tolist() == [0, 1, 0]
    assert result[0] == 2.0 and result[2] == 1.0 and np.isnan(result[1])


@backends.backend_param
def test_every_result_of_a_failed_lane_is_filled(backend_name):
    backend = backends.backend(backend_name)
    (ints, floats), status = fib_pair(N, backend=backend, max_stack_depth=DEPTH,
                                      return_status=True)
    ints, floats = np.asarray(ints), np.asarray(floats)
    assert np.asarray(status).tolist() == [0, 1, 0]
    assert ints[[0, 2]].tolist() == [2, 5] and floats[[0, 2]].tolist() == [1.0, 2.5]
    assert ints[1] == _poison_of(ints.dtype) and np.isnan(floats[1])


@backends.backend_param
def test_return_status_reports_the_step_limit(backend_name):
    # max_steps bounds the whole run, and which lanes finish within it depends on the
    # schedule: under the default most_threads, a thread past the loop waits there for
    # threads still looping (to run the rest together), so with a runaway lane no lane
    # finishes; lowest_pc runs a block as soon as a thread is there.
    backend = backends.backend(backend_name)
    starts = np.array([6, 77031])  # 8 and 350 iterations
    result, status = collatz(
        starts, backend=backend, max_steps=250, schedule="lowest_pc", return_status=True
    )
    assert np.asarray(status).tolist() == [pcbatch.LaneStatus.OK, pcbatch.LaneStatus.STEP_LIMIT]
    assert np.asarray(result)[0] == collatz_plain(6)


@backends.backend_param
def test_return_status_is_all_ok_when_nothing_fails(backend_name):
    backend = backends.backend(backend_name)
    result, status = fib(N, backend=backend, max_stack_depth=12, return_status=True)
    assert np.asarray(status).tolist() == [0, 0, 0]
    np.testing.assert_array_equal(np.asarray(result), [fib_plain(int(n)) for n in N])


# -- inside the user's jax.jit -------------------------------------------------------


def _jax():
    jax = pytest.importorskip("jax")
    backends.backend("jax")  # x64 on, as in the rest of the suite
    return jax


def test_overflow_inside_jax_jit_raises_when_the_run_executes():
    jax = _jax()
    run = jax.jit(lambda n: fib(n, max_stack_depth=DEPTH))
    with pytest.raises(Exception, match=r"StackOverflowError: recursion in 'fib' exceeded "
                       r"max_stack_depth=6 \(batch member\(s\) 1\)") as info:
        np.asarray(run(jax.numpy.asarray(N)))
    # jax.errors.JaxRuntimeError: XlaRuntimeError's alias before JAX 0.7, a class since
    assert isinstance(info.value, jax.errors.JaxRuntimeError)


def test_step_limit_inside_jax_jit_raises_when_the_run_executes():
    jax = _jax()
    run = jax.jit(lambda x: collatz(x, max_steps=40))
    with pytest.raises(Exception, match=r"StepLimitError: collatz\(\) did not finish"):
        np.asarray(run(jax.numpy.asarray([6, 27])))


def test_jax_jit_with_return_status_keeps_the_other_lanes():
    jax = _jax()
    run = jax.jit(lambda n: fib(n, max_stack_depth=DEPTH, return_status=True))
    result, status = run(jax.numpy.asarray(N))
    assert np.asarray(status).tolist() == [0, 1, 0]
    result = np.asarray(result)
    assert result[[0, 2]].tolist() == [fib_plain(3), fib_plain(5)]
    assert result[1] == _poison_of(result.dtype)


def test_jax_jit_without_failure_runs_as_before():
    jax = _jax()
    run = jax.jit(lambda n: fib(n, max_stack_depth=12) * 2)
    np.testing.assert_array_equal(np.asarray(run(jax.numpy.asarray(N))), [4, 178, 10])


# -- inside the user's tf.function -----------------------------------------------------


def _tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize("inner_xla", [False, True])
def test_overflow_inside_a_graph_tf_function_raises_when_it_runs(inner_xla):
    tf = _tf()
    from pcbatch.backends.tensorflow import TensorFlowBackend

    backend = TensorFlowBackend(jit_compile=inner_xla)
    run = tf.function(lambda n: fib(n, backend=backend, max_stack_depth=DEPTH),
                      jit_compile=False)
    with pytest.raises(tf.errors.OpError, match=r"StackOverflowError: recursion in 'fib' "
                       r"exceeded max_stack_depth=6"):
        run(tf.constant(N))
    run_steps = tf.function(lambda x: collatz(x, backend=backend, max_steps=40),
                            jit_compile=False)
    with pytest.raises(tf.errors.OpError, match=r"StepLimitError: collatz\(\) did not finish"):
        run_steps(tf.constant([6, 27]))


def test_safety_checks_off_skips_the_raise_but_still_fills_failed_lanes():
    tf = _tf()
    from pcbatch.backends.tensorflow import TensorFlowBackend

    backend = TensorFlowBackend(jit_compile=False, safety_checks=False)
    run = tf.function(lambda n: fib(n, backend=backend, max_stack_depth=DEPTH))
    result = run(tf.constant(N)).numpy()
    assert result.tolist() == [2, _poison_of(result.dtype), 5]


def test_a_call_that_may_fail_inside_an_xla_tf_function_needs_return_status():
    tf = _tf()
    run = tf.function(lambda n: fib(n, max_stack_depth=DEPTH), jit_compile=True)
    where = r"fib at .*failures_src.py:\d+"
    with pytest.raises(pcbatch.UncheckedFailureError, match=where + r".*return_status=True"):
        run(tf.constant(N))


@pytest.mark.parametrize("jit_compile", [True, False])
def test_tf_function_with_return_status_keeps_the_other_lanes(jit_compile):
    tf = _tf()
    run = tf.function(lambda n: fib(n, max_stack_depth=DEPTH, return_status=True),
                      jit_compile=jit_compile)
    result, status = run(tf.constant(N))
    assert status.numpy().tolist() == [0, 1, 0]
    result = result.numpy()
    assert result[[0, 2]].tolist() == [fib_plain(3), fib_plain(5)]
    assert result[1] == _poison_of(result.dtype)


def test_a_call_that_cannot_fail_inside_an_xla_tf_function_needs_nothing():
    tf = _tf()
    run = tf.function(lambda x: collatz(x), jit_compile=True)  # no calls, no max_steps
    assert run(tf.constant([6, 27])).numpy().tolist() == [collatz_plain(6), collatz_plain(27)]


@backends.backend_param
def test_overflow_in_map_raises_after_the_other_lanes_ran(backend_name):
    backend = backends.backend(backend_name)
    inputs = np.array([3, 4, 11, 5, 2, 6])
    with pytest.raises(pcbatch.StackOverflowError, match=r"'fib' exceeded max_stack_depth=6"):
        fib.map(inputs, width=2, group=1, max_stack_depth=DEPTH, backend=backend)


def test_return_status_is_refused_with_map():
    with pytest.raises(ValueError, match="return_status=True"):
        fib.map(N, width=2, return_status=True)


# -- 64-bit inputs on JAX without x64 ---------------------------------------------------

X64_OFF = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import jax
    assert not jax.config.jax_enable_x64
    import pcbatch
    from tests.semantics.failures_src import collatz
    backend = pcbatch.JaxBackend()

    def expect(error, call, words):
        try:
            call()
        except error as e:
            assert all(w in str(e) for w in words), str(e)
        else:
            raise AssertionError(f"no {error.__name__}")

    # Values past int32 / float32 are refused, naming the argument.
    expect(OverflowError, lambda: collatz(np.array([27, 2**40]), backend=backend),
           ["collatz()", "'x'", "int64", "jax_enable_x64"])
    expect(OverflowError, lambda: collatz(np.int64(2**33), backend=backend), ["'x'"])
    expect(OverflowError, lambda: collatz(np.array([1e300]), backend=backend),
           ["'x'", "float64"])
    # Values that fit run narrowed, with one warning per function, argument and dtype.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert np.asarray(collatz(np.array([27, 6]), backend=backend)).tolist() == [111, 8]
        collatz(np.array([7, 9]), backend=backend)
        collatz(np.array([7, 9], np.int32), backend=backend)
    narrowing = [w for w in caught if issubclass(w.category, pcbatch.NarrowingWarning)]
    assert len(narrowing) == 1, [str(w.message) for w in caught]
    assert "jax_enable_x64" in str(narrowing[0].message)
    assert narrowing[0].filename == "<string>"  # the warning points at the call
    # An intermediate overflow cannot be seen up front: max_steps bounds the run.
    _, status = collatz(np.array([113383, 6], np.int32), backend=backend, max_steps=5000,
                        schedule="lowest_pc", return_status=True)
    assert np.asarray(status).tolist() == [2, 0], status
    print("ok")
    """
)


def test_jax_without_x64_refuses_values_that_do_not_fit_and_warns_on_narrowing():
    pytest.importorskip("jax")
    done = subprocess.run(
        [sys.executable, "-c", X64_OFF], capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "JAX_ENABLE_X64": "0", "JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
