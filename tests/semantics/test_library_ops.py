"""An array library's own functions on per-example values mean what they mean per example.

Issue 25, item 7: ``x + tf.reduce_sum(x, axis=-1, keepdims=True)`` inside a batched
function failed on TensorFlow ("Expected values Dispatched(...) to be a dense tensor"),
``jnp.sum(x)`` on JAX ("not a valid JAX type"). The ground truth is the same function
run one example at a time (``dry_run=True``); each program runs on the backends where
its library's functions exist (NumPy's on all), on TensorFlow eagerly, inside a
tf.function and under XLA. Where a function cannot take the value (another library's,
``jax.lax``'s), the error names the user's line and says what to write instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.semantics import library_ops_src as src


def _batched(function):
    return pcbatch.Context().batch(function)


def _check(result, expected, backend_name):
    actual, wanted = backends.leaves(result), backends.leaves(expected)
    assert len(actual) == len(wanted)
    for a, w in zip(actual, wanted):
        backends.assert_close(np.asarray(a), np.asarray(w), backend_name)


def _differential(function, inputs, backend, backend_name, convert=lambda v: v):
    batched = _batched(function)
    expected = batched(*inputs, dry_run=True)
    result = batched(*(convert(v) for v in inputs), backend=backend)
    _check(result, expected, backend_name)


@pytest.mark.parametrize("program", sorted(src.NUMPY))
@backends.backend_param
def test_numpy_functions_per_example(program, backend_name):
    function, inputs = src.NUMPY[program]
    _differential(function, inputs, backends.backend(backend_name), backend_name)


# -- TensorFlow -----------------------------------------------------------------------


def _tf():
    if not src.TENSORFLOW:
        pytest.skip("TensorFlow is not installed")
    import tensorflow as tf

    return tf


_XLA: list = []


def _tf_backend(xla: bool):
    """The suite's graph backend, or one XLA backend for this module."""
    if not xla:
        return backends.backend("tensorflow")
    if not _XLA:
        from pcbatch.backends.tensorflow import TensorFlowBackend

        _XLA.append(TensorFlowBackend(jit_compile=True))
    return _XLA[0]


@pytest.mark.parametrize("program", sorted(src.TENSORFLOW) or ["none"])
def test_tensorflow_functions_per_example(program):
    tf = _tf()
    function, inputs = src.TENSORFLOW[program]
    _differential(
        function, inputs, backends.backend("tensorflow"), "tensorflow", tf.constant
    )


#: the issue's own example, a reduction on matrices, a branch and a loop on TF values,
#: comparisons of TF results
_COMPILED = ["sum_keepdims", "reductions", "branch", "halving", "compare"]


@pytest.mark.parametrize("program", _COMPILED)
def test_tensorflow_functions_under_xla(program):
    tf = _tf()
    function, inputs = src.TENSORFLOW[program]
    _differential(function, inputs, _tf_backend(xla=True), "tensorflow", tf.constant)


@pytest.mark.parametrize("caller_xla", [False, True])
@pytest.mark.parametrize("program", ["sum_keepdims", "branch"])
def test_tensorflow_functions_inside_a_tf_function(program, caller_xla):
    tf = _tf()
    function, inputs = src.TENSORFLOW[program]
    batched = _batched(function)
    expected = batched(*inputs, dry_run=True)
    backend = _tf_backend(xla=caller_xla)

    @tf.function(jit_compile=caller_xla, autograph=False)
    def caller(*args):
        return batched(*args, backend=backend)

    _check(caller(*(tf.constant(v) for v in inputs)), expected, "tensorflow")


def test_tensorflow_weak_float_converts_as_a_python_float():
    """One example's weak value (a literal's) is a Python float, which TensorFlow makes
    float32: so does the batched one."""
    tf = _tf()

    def scaled(x):
        k = 0.5
        if x > 1.5:
            k = 2.0
        return tf.reduce_sum(k) + x

    batched = _batched(scaled)
    x = np.array([1.0, 2.0], np.float32)
    expected = np.asarray(batched(x, dry_run=True))
    result = batched(tf.constant(x), backend=backends.backend("tensorflow"))
    assert expected.dtype == np.float32 and result.dtype == tf.float32
    np.testing.assert_array_equal(result.numpy(), expected)


# -- JAX ------------------------------------------------------------------------------


def _jax():
    if not src.JAX:
        pytest.skip("JAX is not installed")
    import jax

    return jax


@pytest.mark.parametrize("program", sorted(src.JAX) or ["none"])
def test_jax_functions_per_example(program):
    _jax()
    import jax.numpy as jnp

    function, inputs = src.JAX[program]
    _differential(function, inputs, backends.backend("jax"), "jax", jnp.asarray)


@pytest.mark.parametrize("program", ["sum_keepdims", "branch"])
def test_jax_functions_inside_jit(program):
    jax = _jax()
    function, inputs = src.JAX[program]
    batched = _batched(function)
    expected = batched(*inputs, dry_run=True)
    backend = backends.backend("jax")
    result = jax.jit(lambda *args: batched(*args, backend=backend))(*inputs)
    _check(result, expected, "jax")


# -- functions that cannot take the value: an error at the user's line ----------------


def test_jax_lax_on_a_per_example_value_says_to_write_jnp_asarray():
    jax = _jax()

    def raw_lax(x):
        return jax.lax.exp(x)

    if tuple(int(p) for p in jax.__version__.split(".")[:2]) < (0, 7):
        # JAX 0.6 refuses the value with its own TypeError before pcbatch can explain.
        with pytest.raises(TypeError, match="not a valid JAX type"):
            _batched(raw_lax)(src.V, backend=backends.backend("jax"))
        return
    with pytest.raises(pcbatch.PcbatchError, match=r"jnp\.asarray\(x\)") as info:
        _batched(raw_lax)(src.V, backend=backends.backend("jax"))
    assert "library_ops" in str(info.value) or "test_library_ops" in str(info.value)


def test_tensorflow_function_on_the_jax_backend_says_which_backend():
    _tf()
    _jax()
    tf_sum = src.TENSORFLOW["sum_keepdims"][0]
    with pytest.raises(pcbatch.PcbatchError, match="runs on the TensorFlow backend only"):
        _batched(tf_sum)(src.V, backend=backends.backend("jax"))


def test_jax_function_on_the_tensorflow_backend_says_which_backend():
    _tf()
    _jax()
    jnp_sum = src.JAX["sum_keepdims"][0]
    with pytest.raises(pcbatch.PcbatchError, match="runs on the JAX backend only"):
        _batched(jnp_sum)(src.V, backend=backends.backend("tensorflow"))


def test_numpy_function_on_a_tensorflow_result_says_what_to_use():
    tf = _tf()

    def numpy_after_tf(x):
        return np.sqrt(tf.abs(x))

    with pytest.raises(pcbatch.PcbatchError, match=r"Use tf\.\* or tf\.experimental\.numpy"):
        _batched(numpy_after_tf)(tf.constant(src.V), backend=backends.backend("tensorflow"))


@pytest.mark.parametrize("library", ["tensorflow", "jax"])
def test_other_library_on_the_numpy_backend_runs_per_example(library):
    """Right, one example at a time, with a warning that says how to batch it."""
    programs = {"tensorflow": src.TENSORFLOW, "jax": src.JAX}[library]
    if not programs:
        pytest.skip(f"{library} is not installed")
    name = {"tensorflow": "TensorFlow", "jax": "JAX"}[library]
    function, inputs = programs["sum_keepdims"]
    batched = _batched(function)
    expected = batched(*inputs, dry_run=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = batched(*inputs, backend=backends.backend("numpy"))
    _check(result, expected, "numpy")
    messages = [str(w.message) for w in caught]
    assert any(f"call the batched function with {name} arrays" in m for m in messages)
