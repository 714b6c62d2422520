"""`nuts.sample`'s inputs: integer, list and half-precision states, step sizes, warmup.

Each of these once ran silently wrong (issue 24, defect 17): an integer state cast the
step size to 0 and the chains never moved; float16 made every transition divergent; a
list raised an AttributeError; leaving out `num_warmup` skipped adaptation.
"""

from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np
import pytest

from pcbatch.mcmc import nuts
from tests import backends, tiers

SHORT = dict(num_samples=4, num_warmup=0, seed=0, max_tree_depth=3, progress_bar=False)


def _value_and_grad(x):
    return -0.5 * np.sum(x * x), -x


def _on_numpy(state, **options):
    return nuts.sample(None, state, value_and_grad=_value_and_grad, **{**SHORT, **options})


def _jax_log_prob(x):
    import jax.numpy as jnp

    return -0.5 * jnp.sum(x * x)


def _tf_log_prob(x):
    import tensorflow as tf

    return -0.5 * tf.reduce_sum(x * x)


def _native(backend_name: str, state: np.ndarray):
    """``state`` as the backend's own array (its dtype kept)."""
    if backend_name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(state)
    if backend_name == "tensorflow":
        import tensorflow as tf

        return tf.constant(state)
    return state


def _sample(backend_name: str, state, **options):
    if backend_name == "numpy":
        return _on_numpy(state, **options)
    backends.backend(backend_name)  # JAX with float64 enabled, as the other tests
    log_prob = _jax_log_prob if backend_name == "jax" else _tf_log_prob
    return nuts.sample(log_prob, state, **{**SHORT, **options})


@pytest.mark.parametrize("backend_name", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_an_integer_state_moves_like_the_same_state_in_floats(backend_name):
    ints = _sample(backend_name, _native(backend_name, np.arange(6).reshape(3, 2)))
    # The same state in the float dtype integers become (TensorFlow's default float32):
    # one compiled sampler for both runs.
    dtype = np.float32 if backend_name == "tensorflow" else np.float64
    floats = _sample(backend_name, _native(backend_name, np.arange(6, dtype=dtype).reshape(3, 2)))
    samples = np.asarray(ints.samples)
    assert samples.dtype.kind == "f"
    assert not np.array_equal(samples[-1], np.arange(6).reshape(3, 2))  # the chains moved
    np.testing.assert_allclose(samples, np.asarray(floats.samples), rtol=1e-5, atol=1e-5)
    assert np.all(ints.step_size > 0)


def test_an_integer_numpy_state_becomes_float64():
    result = _on_numpy(np.zeros((2, 3), dtype=np.int32))
    assert result.samples.dtype == np.float64
    assert result.step_size.dtype == np.float64


def test_a_list_state_is_taken_as_a_numpy_array():
    from_list = _on_numpy([[0.0, 1.0], [2.0, 3.0]])
    from_array = _on_numpy(np.array([[0.0, 1.0], [2.0, 3.0]]))
    np.testing.assert_array_equal(from_list.samples, from_array.samples)


@pytest.mark.parametrize("backend_name", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_a_half_precision_state_is_a_clear_error(backend_name):
    state = _native(backend_name, np.zeros((2, 2), np.float16))
    with pytest.raises(TypeError, match="initial_state has dtype float16.*float32"):
        _sample(backend_name, state)


@pytest.mark.parametrize("dtype", [bool, np.complex128])
def test_bool_and_complex_states_are_clear_errors(dtype):
    with pytest.raises(TypeError, match="initial_state has dtype"):
        _on_numpy(np.zeros((2, 2), dtype))


def test_a_scalar_state_is_a_clear_error():
    with pytest.raises(ValueError, match="leading chain dimension"):
        _on_numpy(0.0)


@pytest.mark.parametrize("step_size", [0.0, -0.1, np.nan, np.inf, [0.1, 0.0]])
def test_a_step_size_that_is_not_positive_and_finite_is_a_clear_error(step_size):
    with pytest.raises(ValueError, match="step_size must be positive and finite"):
        _on_numpy(np.zeros((2, 2)), step_size=step_size)


@pytest.mark.parametrize("step_size", ["0.1", True, [0.1, 0.2, 0.3]])
def test_a_step_size_that_is_not_a_number_per_chain_is_a_clear_error(step_size):
    with pytest.raises(TypeError, match="step_size must be a positive number"):
        _on_numpy(np.zeros((2, 2)), step_size=step_size)


def test_num_warmup_must_be_given():
    options = {k: v for k, v in SHORT.items() if k != "num_warmup"}
    with pytest.raises(TypeError, match="num_warmup"):
        nuts.sample(None, np.zeros((2, 2)), value_and_grad=_value_and_grad, **options)


def test_warmup_adapts_the_step_size():
    adapted = _on_numpy(np.zeros((2, 2)), num_warmup=20, num_samples=2)
    assert not np.allclose(adapted.step_size, 0.1)
    fixed = _on_numpy(np.zeros((2, 2)), num_warmup=0, num_samples=2)
    np.testing.assert_array_equal(fixed.step_size, 0.1)


def _documented_signature() -> dict:
    """``name -> default text`` (None for required) from docs/nuts.md's API block."""
    text = (pathlib.Path(__file__).parents[2] / "docs" / "nuts.md").read_text()
    block = re.search(r"result = nuts\.sample\(\n(.*?)\n\)", text, re.S).group(1)
    # The block is a call: its first lines pass the required positional arguments.
    positional = iter(inspect.signature(nuts.sample).parameters)
    names = {}
    for line in block.splitlines():
        code, _, comment = line.partition("#")
        code = code.strip().rstrip(",")
        if not code or code == "*":
            continue
        name, equals, default = code.partition("=")
        if not equals or not name.isidentifier():
            names[next(positional)] = None  # a positional argument: a required parameter
        elif name == "value_and_grad":
            names[name] = "None"  # the one value shown that is not the default (NumPy's)
        else:
            names[name] = None if comment.strip().startswith("required") else default
    return names


def test_the_documented_signature_is_the_code_signature():
    documented = _documented_signature()
    actual = inspect.signature(nuts.sample).parameters
    assert set(documented) == set(actual)
    for name, parameter in actual.items():
        if parameter.default is inspect.Parameter.empty:
            assert documented[name] is None, f"{name} is documented with a default"
        else:
            assert documented[name] == repr(parameter.default).replace("'", '"'), name
