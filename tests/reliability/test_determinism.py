"""Same inputs, same backend: bit-identical outputs, call after call and context after context."""

from __future__ import annotations

import importlib
import sys

import numpy as np

from tests.backends import assert_close, backend, backend_param
from tests.reliability import sample_src


def _bits(result) -> list:
    leaves = result if isinstance(result, tuple) else (result,)
    return [np.asarray(leaf).tobytes() for leaf in leaves]


def _inputs():
    rng = np.random.RandomState(3)
    return rng.normal(size=(6, 4)), rng.randint(0, 5, size=6).astype(np.int64)


@backend_param
def test_repeated_runs_are_bit_identical(backend_name):
    x, n = _inputs()
    b = backend(backend_name)
    first = sample_src.wiggle(x, n, backend=b)
    for got, want in zip(first, sample_src.wiggle(x, n, dry_run=True)):
        assert_close(got, want, backend_name)
    assert _bits(sample_src.wiggle(x, n, backend=b)) == _bits(first)
    # A fresh Context compiles everything again; the answer must not change.
    sys.modules.pop(sample_src.__name__)
    fresh = importlib.import_module(sample_src.__name__)
    assert fresh.ctx is not sample_src.ctx
    assert _bits(fresh.wiggle(x, n, backend=b)) == _bits(first)
    even = fresh.is_even(np.arange(7), backend=b)
    assert _bits(fresh.is_even(np.arange(7), backend=b)) == _bits(even)
    np.testing.assert_array_equal(np.asarray(even), np.arange(7) % 2 == 0)
