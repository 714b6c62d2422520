"""NumPy functions whose other-library counterparts answer otherwise (issue 24).

- Sorting: NumPy puts every NaN last, whatever its sign bit; TensorFlow's argsort put
  ``-nan`` first. ``kind="stable"`` (and ``stable=True``) was refused on JAX and
  TensorFlow, though it is the one order NumPy defines for ties (its default kind's
  order of ties depends on the CPU's vector instructions): every backend now sorts
  stably, for every kind.
- ``np.maximum``/``np.minimum`` propagate a NaN; TensorFlow's dropped it, silently, and
  had no ``np.fmax``/``np.fmin``.
- Indices and counts are int64 in NumPy: JAX's ``searchsorted``, ``digitize`` and
  ``argpartition`` gave int32 with x64 on, its ``histogram`` float64 counts.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pcbatch
from tests import backends

NAN = np.nan


def sorts(v, m):
    return (
        np.sort(v),
        np.argsort(v, kind="stable"),
        np.argsort(-v, stable=True),
        v.argsort(kind="mergesort"),
        np.sort(v)[::-1],
        np.sort(m, axis=0),
        np.argsort(m, axis=0, kind="stable"),
    )


def extrema(a, b, n):
    return (
        np.maximum(a, b), np.minimum(a, b), np.fmax(a, b), np.fmin(a, b),
        np.maximum(a, 1.0), np.fmin(2.0, b), np.maximum(n, 2.5), np.minimum(n, n - 1),
        max(a, b), min(a, b),
    )


EDGES = np.array([0.0, 1.0, 2.0])


def indices(v, x):
    return (
        np.searchsorted(EDGES, x),
        np.searchsorted(v, x, side="right"),
        np.digitize(x, EDGES),
        np.argpartition(v, 1),
        np.histogram(v, bins=3, range=(0.0, 3.0))[0],
        np.argmax(v),
    )


def _differential(function, args, backend_name) -> None:
    batched = pcbatch.Context().batch(function)
    want = batched(*args, dry_run=True)
    per_example = [function(*row) for row in zip(*args)]
    backends.assert_identical(want, tuple(np.stack(parts) for parts in zip(*per_example)))
    backends.assert_identical(batched(*args, backend=backends.backend(backend_name)), want)


@backends.backend_param
def test_sorts_put_every_nan_last_and_ties_in_order(backend_name):
    v = np.array([[3.0, NAN, 1.0, 2.0], [2.0, 2.0, 1.0, 1.0], [-NAN, 0.0, NAN, -1.0]])
    with_nans = [[3.0, NAN], [1.0, 2.0], [-NAN, 2.0]]
    m = np.array([with_nans, with_nans, [[2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]])
    _differential(sorts, (v, m), backend_name)


@backends.backend_param
def test_maximum_and_minimum_propagate_nan_and_fmax_drops_it(backend_name):
    a = np.array([NAN, 1.0, 2.0, NAN, -3.0])
    b = np.array([1.0, NAN, 2.0, NAN, 4.0])
    n = np.array([1, 5, -3, 2, 3], np.int8)
    _differential(extrema, (a, b, n), backend_name)


@backends.backend_param
def test_indices_and_counts_are_int64(backend_name):
    v = np.array([[0.5, 1.5, 2.5], [1.0, 1.0, 3.0], [2.0, 0.0, 1.0]])
    x = np.array([1.0, -2.0, 2.5])
    if backend_name == "tensorflow":
        with pytest.raises(pcbatch.TypeInferenceError, match="no counterpart"):
            pcbatch.Context().batch(indices)(v, x, backend=backends.backend(backend_name))
        return
    _differential(indices, (v, x), backend_name)


def scalar_types(x, n, v):
    return (
        np.float32(x), np.float64(np.float32(x)), np.float16(x), np.int32(v[0]), np.int64(n),
        np.int8(n), np.uint8(n), np.uint16(n), np.bool_(x), np.bool_(n), np.float32(v),
        np.int32(v), np.float32(n) + 1, np.double(x) * 2, np.float32(), np.int8(7),
    )


@backends.backend_param
def test_numpy_scalar_types_convert_a_per_example_value_as_astype_does(backend_name):
    # JAX and TensorFlow failed on every call ("setting an array element with a sequence")
    x = np.array([1.7, -2.5, 1e40, NAN, 0.0])
    n = np.array([1, 300, -129, 65537, 0])
    v = np.array([[1.5, -2.5], [3.0, 4.25], [0.0, -0.0], [7.0, 8.0], [1e3, 2.0]])
    _differential(scalar_types, (x, n, v), backend_name)


def fractions(x, n):
    f, w = np.modf(x)
    m, e = np.frexp(x)
    return (
        f, w, np.signbit(f), np.modf(n)[0], np.modf(n)[1], m, e, np.signbit(m),
        np.frexp(n)[0], np.frexp(n)[1], np.ldexp(x, n), np.ldexp(m, e), np.ldexp(n, n),
        np.ldexp(x.astype(np.float32), n),
    )


def special(x, n):
    return np.sinc(x), np.sinc(n), np.i0(x), np.i0(n)


@backends.backend_param
def test_modf_frexp_ldexp_sinc_i0_at_their_edges_as_numpy(backend_name):
    # JAX: modf's fraction of inf nan and of -0.0 0.0, sinc(inf) 0 (NumPy nan), float32
    # results for int8 (NumPy float16 or float64); TensorFlow had none of them
    x = np.array([-2.5, 2.5, -0.0, np.inf, -np.inf, np.nan, 1e20, -0.25, 1.7e308, 3.0])
    n = np.array([-3, 4, 0, 127, -128, 1, 2, 3, -100, 12], np.int8)
    _differential(fractions, (x, n), backend_name)
    batched = pcbatch.Context().batch(special)
    want = batched(x, n, dry_run=True)
    got = batched(x, n, backend=backends.backend(backend_name))
    for g, w in zip(got, want):  # transcendental: the library's last bits
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14)


def nan_spreads(v, m):
    return (np.nanvar(v), np.nanstd(v), np.nanvar(v, ddof=1), np.nanstd(v, ddof=2),
            np.nanvar(m, axis=0), np.nanstd(m, axis=1, keepdims=True))


@backends.backend_param
def test_nanvar_and_nanstd_skip_nan_and_give_nan_without_degrees_of_freedom(backend_name):
    # TensorFlow had neither
    v = np.array([[1.0, NAN, 3.0], [NAN, NAN, NAN], [2.0, 2.0, 5.0], [NAN, 4.0, NAN]])
    m = np.stack([v[:, :2]] * 2, axis=1)
    batched = pcbatch.Context().batch(nan_spreads)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's degrees-of-freedom notice
        want = batched(v, m, dry_run=True)
        got = batched(v, m, backend=backends.backend(backend_name))
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-13)


def scaled_down(x):
    y = x * 1e-300
    return y > 0.0, y


@backends.backend_param
def test_subnormals_are_kept_on_numpy_and_torch_and_flushed_on_jax_and_tensorflow(
    backend_name,
):
    """docs/semantics.md says so: XLA and TensorFlow's CPU kernels flush subnormals (on
    an H200, JAX's float64 kept them)."""
    if not backends.on_cpu(backend_name):
        pytest.skip("a GPU's kernels: float64 subnormals kept on an H200, not promised")
    x = np.array([1e-10, 1.0])
    batched = pcbatch.Context().batch(scaled_down)
    positive, y = batched(x, backend=backends.backend(backend_name))
    flushed = backend_name not in backends.EAGER_NAMES
    np.testing.assert_array_equal(np.asarray(positive), [not flushed, True])
    assert (np.asarray(y)[0] == 0.0) == flushed
