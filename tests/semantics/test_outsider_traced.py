"""Outsider programs with weak Python scalars, called inside the user's own tracing:
``jax.jit`` (x64 on and off), ``jax.vmap`` and ``tf.function`` (issue 24).

Each must give what ``dry_run=True`` gives, value and dtype; under JAX without x64 the
dtype is JAX's 32-bit counterpart of dry_run's (int64 -> int32), as the JAX backend
documents for 64-bit values.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.semantics import outsider_src as src
from tests.semantics.test_outsider import INPUTS, _arguments

PROGRAMS = """weak_accumulator_of_float32 uint8_plus_a_counter int16_with_a_while_counter
int8_abs_and_negation mixed_literals_with_float32""".split()  # noqa: SIM905
#: one number per example: under jax.vmap each call gets one example (a row of a 2-D
#: batch would be a batch of its own)
SCALAR_PROGRAMS = ["weak_accumulator_of_float32", "int8_abs_and_negation",
                   "mixed_literals_with_float32"]


def _assert_same(actual, expected, canonical=lambda d: d) -> None:
    actual, expected = backends.leaves(actual), backends.leaves(expected)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == canonical(want.dtype), f"dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.fixture
def jax_x64(request):
    """Sets jax_enable_x64 to the test's parameter, and back on afterwards (the suite's
    JAX backend runs with it on)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", request.param)
    yield request.param
    jax.config.update("jax_enable_x64", True)


def _canonical(x64: bool):
    import jax

    return (lambda d: d) if x64 else (lambda d: np.dtype(jax.dtypes.canonicalize_dtype(d)))


@pytest.mark.parametrize("jax_x64", [True, False], indirect=True)
@pytest.mark.parametrize("name", PROGRAMS)
def test_inside_jax_jit(name, jax_x64):
    import jax

    from pcbatch.backends.jax import JaxBackend

    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    args = _arguments(function)
    with np.errstate(all="ignore"):
        expected = batched(*args, dry_run=True)
    backend = JaxBackend()
    actual = jax.jit(lambda *a: batched(*a, backend=backend))(*args)
    _assert_same(actual, expected, _canonical(jax_x64))


@pytest.mark.parametrize("jax_x64", [True, False], indirect=True)
@pytest.mark.parametrize("name", SCALAR_PROGRAMS)
def test_under_jax_vmap(name, jax_x64):
    import jax

    from pcbatch.backends.jax import JaxBackend

    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    args = _arguments(function)
    with np.errstate(all="ignore"):
        expected = batched(*args, dry_run=True)
    backend = JaxBackend()
    actual = jax.vmap(lambda *a: batched(*a, backend=backend))(*args)
    _assert_same(actual, expected, _canonical(jax_x64))


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("name", PROGRAMS)
def test_inside_tf_function(name, jit_compile):
    tf = pytest.importorskip("tensorflow")

    function = getattr(src, name)
    batched = pcbatch.Context().batch(function)
    args = _arguments(function)
    with np.errstate(all="ignore"):
        expected = batched(*args, dry_run=True)
    backend = backends.backend("tensorflow")
    # under XLA, which cannot raise, a run that may fail gives its status (documented)
    run = tf.function(
        lambda *a: batched(*a, backend=backend, return_status=jit_compile),
        jit_compile=jit_compile,
    )
    actual = run(*map(tf.constant, args))
    if jit_compile:
        actual, status = actual
        assert (np.asarray(status) == pcbatch.LaneStatus.OK).all()
    _assert_same(actual, expected)


def test_the_inputs_hold_narrow_dtypes():
    """The programs' point: weak scalars meet float32, uint8, int16, int8 values."""
    assert {INPUTS[k].dtype.name for k in ("f", "u8", "i16", "i8")} == {
        "float32", "uint8", "int16", "int8"}
