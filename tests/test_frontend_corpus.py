"""Differential tests of the Python frontend over ``tests/programs/python_corpus.py``.

The oracle is ``fn(*args, dry_run=True)``: the plain Python function run on each
batch member alone (a size-1 slice), results stacked. Every corpus program, at
batch sizes 1, 2 and 37, on the stack machine and stackless, must give the same
structure (tuples, nested tuples, namedtuple types), shapes and dtypes; ints and
bools exactly, floats to rtol=1e-12. Each program's plain-Python ``reference``
checks the program itself against ``dry_run``, example by example.

On JAX and TensorFlow each program and batch size is a compilation of its own (seconds
each): the fast tier takes the programs in turn, each on one compiled backend at one of
the three sizes (also in turn), so every compiled backend runs half the corpus at every
size; the slow tier (``--slow``) runs every program on both at all three sizes.

Skipped as a whole until ``pcbatch.Context`` exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch

if getattr(pcbatch, "Context", None) is None:
    pytest.skip("pcbatch.Context (the Python frontend) does not exist yet", allow_module_level=True)

from tests import backends, tiers  # noqa: E402
from tests.programs.python_corpus import NUMPY_ONLY, PY_CORPUS, PY_CORPUS_BY_NAME  # noqa: E402

BATCH_SIZES = (1, 2, 37)
MODES = {
    "stack": {},
    "stackless": {"stackless": True},
    "returns_first": {"schedule": "returns_first"},
    "most_threads": {"schedule": "most_threads"},
}
MODES.update({name: {"backend": backends.backend(name)} for name in backends.BACKEND_NAMES[1:]})


def _structure(value):
    """The nesting of tuples (namedtuple types included) with leaves erased."""
    if isinstance(value, tuple):
        kind = type(value) if hasattr(value, "_fields") else tuple
        return (kind, tuple(_structure(v) for v in value))
    if isinstance(value, list):
        return (list, tuple(_structure(v) for v in value))
    return None


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _assert_close(actual, expected, rtol, atol=0.0, exact_dtype=True):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if exact_dtype:
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if np.issubdtype(expected.dtype, np.floating) or np.issubdtype(actual.dtype, np.floating):
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)


def _assert_same_result(actual, expected, batch_size, backend_name="numpy"):
    assert _structure(actual) == _structure(expected), (
        f"result structure {_structure(actual)} != {_structure(expected)}"
    )
    for i, (a, e) in enumerate(zip(_leaves(actual), _leaves(expected), strict=True)):
        e = np.asarray(e)
        assert e.ndim >= 1 and e.shape[0] == batch_size, f"dry_run leaf {i} shape {e.shape}"
        try:
            backends.assert_close(a, e, backend_name)
        except AssertionError as err:
            raise AssertionError(f"result leaf {i}: {err}") from None


def _copies(args):
    return [np.array(a, copy=True) for a in args]


COMPILED = backends.COMPILED_NAMES


def _fast(k: int, mode: str, batch_size: int) -> bool:
    """Whether program ``k`` runs in ``mode`` at ``batch_size`` in the fast tier."""
    if mode not in COMPILED:
        return True
    turn = k % len(COMPILED)
    size = BATCH_SIZES[(k // len(COMPILED)) % len(BATCH_SIZES)]
    return mode == COMPILED[turn] and batch_size == size


def _batched_cases():
    for k, entry in enumerate(PY_CORPUS):
        for mode in MODES:
            for batch_size in BATCH_SIZES:
                fast = _fast(k, mode, batch_size)
                yield pytest.param(
                    entry, mode, batch_size, id=f"{entry.name}-{mode}-{batch_size}",
                    marks=() if fast else tiers.slow,
                )


@pytest.mark.parametrize(("entry", "mode", "batch_size"), list(_batched_cases()))
def test_batched_equals_dry_run(entry, mode, batch_size):
    if mode in backends.COMPILED_NAMES and entry.name in NUMPY_ONLY:
        pytest.skip("uses a plain helper with Python control flow on values")
    rng = np.random.RandomState(batch_size)
    args = entry.make_args(rng, batch_size)
    expected = entry.fn(*_copies(args), dry_run=True)
    call_args = _copies(args)
    actual = entry.fn(*call_args, max_stack_depth=entry.max_stack_depth, **MODES[mode])
    backend_name = mode if mode in backends.BACKEND_NAMES else "numpy"
    _assert_same_result(actual, expected, batch_size, backend_name)
    for given, original in zip(call_args, args, strict=True):
        np.testing.assert_array_equal(given, original, err_msg="the batched call mutated its input")


@pytest.mark.parametrize("entry", [p for p in PY_CORPUS if p.reference], ids=lambda p: p.name)
def test_reference_matches_dry_run(entry):
    """The programs themselves: plain Python on one example agrees with ``dry_run``."""
    batch_size = 11
    args = entry.make_args(np.random.RandomState(0), batch_size)
    expected = entry.fn(*_copies(args), dry_run=True)
    for i in range(batch_size):
        one = entry.reference(*(a[i] for a in args))
        if hasattr(one, "_fields"):
            assert type(expected) is type(one)
        leaves = _leaves(expected)
        assert len(_leaves(one)) == len(leaves)
        for r, e in zip(_leaves(one), leaves, strict=True):
            # Different (but equivalent) arithmetic, so a loose float tolerance; any dtype.
            _assert_close(np.asarray(e)[i], r, rtol=1e-9, atol=1e-12, exact_dtype=False)


@pytest.mark.parametrize("name", ["fib", "nuts_trajectories", "leapfrog_oscillator"])
def test_backend_and_block_code_cache_options(name):
    """The remaining call options of the contract are accepted and change nothing."""
    entry = PY_CORPUS_BY_NAME[name]
    args = entry.make_args(np.random.RandomState(3), 9)
    expected = entry.fn(*_copies(args), dry_run=True)
    cache = {}
    for _ in range(2):  # the second call may reuse the cache
        actual = entry.fn(
            *_copies(args),
            backend=pcbatch.NumpyBackend(),
            block_code_cache=cache,
            max_stack_depth=entry.max_stack_depth,
        )
        _assert_same_result(actual, expected, 9)


def test_corpus_is_large_enough():
    assert len(PY_CORPUS) >= 45
