"""Per-example values behave as one example's ndarray, on every backend (docs/semantics/values.md).

Differential: every program of ``values_src`` batched must give what the plain function
gives applied to each example alone (value and dtype), or, where Python itself raises on
one example, raise too; stateful random draws are rejected at the user's line.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from tests import backends, tiers
from tests.semantics import values_src

BATCH = 4

_INPUTS = {
    "v": np.array([[0.3, -1.2, 2.5], [1.0, 0.0, -0.5], [-2.5, 0.7, 0.7], [0.25, 3.5, -4.0]]),
    "x": np.array([2.5, -1.5, 0.35, -3.7]),
    "y": np.array([-0.5, 1.5, 0.25, np.nan]),
    "n": np.array([3, -2, 0, 7]),
}
_INPUTS["m"] = np.stack([_INPUTS["v"], _INPUTS["v"][::-1] * 1.5], axis=1)

EXACT = """shape_tuple shape_index shape_negative_index ndim_attr size_attr dtype_attr
transpose_attr real_imag flatten ravel reshape_args reshape_tuple reshape_minus_one
astype sum_all sum_axis sum_keepdims mean_negative_axis min_all max_axis prod_all
any_all argmax_all argmax_axis argmin_vector std_var cumsum_all cumsum_axis copy_method
item_float item_int clip_method round_method dot_vector dot_matrix transpose_method
transpose_axes squeeze_method squeeze_axis len_vector len_matrix abs_vector abs_scalar
round_scalar round_ndigits round_int min_two max_with_number min_three min_of_vector
max_of_vector float_of_int int_of_float bool_of_float float_of_string index_int
index_slices index_matrix index_ellipsis index_none comparisons matmul unary
helper_norm helper_size helper_len_shape helper_size_attribute helper_ndim
counter_based_uniform more_methods equals_none_scalar equals_none_int
equals_none_vector equals_none_in_helpers builtin_any_all builtin_any_in_condition
builtin_all_of_a_tuple index_integer_arrays index_integer_arrays_apart
membership_in_arrays order_statistics nan_reductions trapezoid_and_searchsorted
lists_as_operands methods_with_arguments interpolation""".split()  # noqa: SIM905

#: Python raises on one example: batched, the same construct raises (word in the message)
RAISES = {
    "round_vector": "np.round",
    "float_of_vector": "float()",
    "min_of_vectors": "np.minimum",
    "len_of_scalar": "len()",
    "item_of_vector": "size 1",
    "any_of_scalar": "not iterable",
    "any_of_matrix": "np.any",
    "membership_in_a_number": "not iterable",
}

RANDOM = """numpy_global_normal numpy_generator_normal numpy_default_rng python_random
numpy_random_in_condition tensorflow_stateful_normal""".split()  # noqa: SIM905


def _arguments(function) -> list:
    return [_INPUTS[name] for name in inspect.signature(function).parameters]


def _per_example(function, args) -> list:
    """The plain function on each example alone, results stacked (the oracle)."""
    results = [function(*(a[i] for a in args)) for i in range(BATCH)]
    if isinstance(results[0], tuple):
        return [np.stack([np.asarray(r[k]) for r in results]) for k in range(len(results[0]))]
    return [np.stack([np.asarray(r) for r in results])]


def _run_batched(function, backend_name, args):
    batched = pcbatch.Context().batch(function)
    return batched(*args, backend=backends.backend(backend_name))


# Every case on NumPy and Torch; on JAX and TensorFlow the fast tier takes the cases in
# turn (tests/tiers.py).
@pytest.mark.parametrize(
    ("name", "backend_name"),
    tiers.in_turn([pytest.param(n, id=n) for n in EXACT], backends.BACKEND_NAMES),
)
def test_matches_the_plain_function_per_example(name, backend_name):
    function = getattr(values_src, name)
    args = _arguments(function)
    with np.errstate(invalid="ignore"):
        expected = _per_example(function, args)
    actual = backends.leaves(_run_batched(function, backend_name, args))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        backends.assert_close(a, e, backend_name)
        assert np.asarray(a).dtype == e.dtype, f"dtype {np.asarray(a).dtype} != {e.dtype}"


@backends.backend_param
@pytest.mark.parametrize("name", sorted(RAISES))
def test_raises_where_python_raises(name, backend_name):
    function = getattr(values_src, name)
    args = _arguments(function)
    with pytest.raises((TypeError, ValueError)):
        function(*(a[0] for a in args))
    with pytest.raises((TypeError, ValueError)) as info:
        _run_batched(function, backend_name, args)
    assert RAISES[name] in str(info.value)


@backends.backend_param
def test_methods_that_are_not_numpy_functions_are_rejected(backend_name):
    function = values_src.sort_in_place  # in place, returning None: not np.sort's copy
    with pytest.raises((AttributeError, pcbatch.TypeInferenceError)) as info:
        _run_batched(function, backend_name, _arguments(function))
    assert "np.sort(x)" in str(info.value)


def _error_line(function) -> int:
    lines, first = inspect.getsourcelines(function)
    return next(first + i for i, line in enumerate(lines) if "# ERROR" in line)


@backends.backend_param
@pytest.mark.parametrize("name", RANDOM)
def test_global_random_draws_are_rejected_at_the_users_line(name, backend_name):
    function = getattr(values_src, name)
    if values_src.tf is None and name.startswith("tensorflow"):
        pytest.skip("TensorFlow is not installed")
    with pytest.raises(pcbatch.AutobatchSyntaxError) as info:
        _run_batched(function, backend_name, _arguments(function))
    error = info.value
    assert error.filename == values_src.__file__
    assert error.lineno == _error_line(function)
    assert "pass the random numbers in" in str(error).lower()
    assert "pcbatch.mcmc.random.uniform" in str(error)


@backends.backend_param
def test_python_scalars_in_a_plain_helper_work_per_lane_or_raise_clearly(backend_name):
    function = values_src.helper_float
    args = _arguments(function)
    if backend_name in backends.EAGER_NAMES:  # one example at a time, and says so
        with pytest.warns(PerExampleFallbackWarning):
            actual = _run_batched(function, backend_name, args)
        backends.assert_close(actual, _per_example(function, args)[0], backend_name)
        return
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        _run_batched(function, backend_name, args)
    message = str(info.value)
    assert "Python float" in message and "ctx.batch" in message and "helper_float" in message


@backends.backend_param
def test_an_integer_array_index_is_a_gather_on_every_backend(backend_name):
    """``v[k]`` with ``k`` a per-example integer array: exact, and on NumPy one gather for
    the batch (it ran one example at a time, with a PerExampleFallbackWarning). On
    TensorFlow, whose tensors take no integer-array index, a ``tf.gather_nd`` (it was
    rejected at the line)."""
    function = values_src.gather_by_integer_arrays
    k = np.array([[2, 0], [1, 1], [-1, 0], [0, 2]])
    args = [_INPUTS["v"], _INPUTS["m"], k]
    expected = _per_example(function, args)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        actual = _run_batched(function, backend_name, args)
    assert not [w for w in record if w.category is PerExampleFallbackWarning]
    for got, want in zip(actual, expected):
        backends.assert_close(got, want, backend_name)


@backends.backend_param
@pytest.mark.parametrize("name", ["assign_by_a_list", "assign_by_an_array", "add_by_columns"])
def test_an_integer_array_item_assignment_is_refused_at_the_users_line(name, backend_name):
    """``buf[[0, 2]] = x``: NumPy's integer-array assignment is refused before anything
    runs, on every backend alike (NumPy and Torch ran some of it; JAX and Torch failed
    inside the machine with errors that named no line)."""
    function = getattr(values_src, name)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        _run_batched(function, backend_name, _arguments(function))
    message = str(info.value)
    assert f"values_src.py:{_error_line(function)}" in message
    assert "item by item" in message and "np.where" in message


#: what TensorFlow's NumPy lacks, and what the refusal says: a function (np.linalg.det),
#: an argument (sum's where=)
_TENSORFLOW_LACKS = {"determinant": "NumPy or Torch backend", "sum_where": "lacks that argument"}


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES)
@pytest.mark.parametrize("name", sorted(_TENSORFLOW_LACKS))
def test_what_the_backends_numpy_lacks_is_refused_saying_what_to_write(name, backend_name):
    """Refused on TensorFlow at the user's line, with advice that applies; the other
    backends run it."""
    function = getattr(values_src, name)
    args = _arguments(function)
    if backend_name != "tensorflow":
        backends.assert_close(
            _run_batched(function, backend_name, args), _per_example(function, args)[0],
            backend_name,
        )
        return
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        _run_batched(function, backend_name, args)
    message = str(info.value)
    assert f"values_src.py:{_error_line(function)}" in message
    assert _TENSORFLOW_LACKS[name] in message
    assert "type_inference" not in message  # no advice that does not apply


def test_a_gather_of_per_example_arrays_is_each_examples_fancy_index():
    """BatchedArray's rule against NumPy on each example: ints, full slices, and integer
    arrays of several shapes, adjacent or apart (NumPy moves the indexed axes first)."""
    from pcbatch.backends.batched_array import BatchedArray

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5, 6, 7))
    vector, table = BatchedArray(rng.integers(-5, 5, (4, 3))), rng.integers(0, 6, (4, 2, 3))
    table, scalar = BatchedArray(table), BatchedArray(rng.integers(0, 5, (4,)))
    full = slice(None)
    keys = [(vector,), (full, table), (vector, table), (vector, full, scalar), (2, table),
            (full, full, scalar), (scalar,), (full, table, 3), (vector, 1, scalar)]  # fmt: skip
    for key in keys:
        got = BatchedArray(x)[key].data
        rows = [tuple(p.data[b] if isinstance(p, BatchedArray) else p for p in key)
                for b in range(4)]  # fmt: skip
        want = np.stack([x[b][row] for b, row in enumerate(rows)])
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("tensorflow" not in backends.BACKEND_NAMES, reason="needs TensorFlow")
def test_tensorflow_runs_on_the_whole_batch_only_what_builds_the_same_graph():
    import tensorflow as tf

    from pcbatch.backends.tensorflow import TensorFlowBackend, _ElementwiseCheck

    def shortcut(function):
        vector = tf.constant([1.0, 2.0, 3.0], tf.float64)
        return _ElementwiseCheck(TensorFlowBackend().adapt(function))((vector,))

    assert shortcut(lambda x: np.maximum(x * 3 - 1, 0))
    assert not shortcut(values_src.helper_norm)  # abs on one example, a norm on the batch
    assert not shortcut(values_src.helper_size)  # a constant 1 against the batch size
    assert not shortcut(lambda x: round(x))  # rejects a whole batch: not a number
