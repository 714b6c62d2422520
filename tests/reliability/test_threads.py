"""No data loss or corruption between calls.

One `Context` called from many Python threads at once (same and different
functions, different batch sizes, cold caches) gives every call the answer of
the per-example run; and a call that fails (bad input, stack overflow, step
limit, an exception in user code) leaves the next call correct.
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pcbatch
from pcbatch import StackOverflowError, StepLimitError
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from pcbatch.errors import BatchSizeError
from tests.backends import assert_close, backend, backend_param
from tests.reliability import bad_src, sample_src


def _fresh_sample(tag: str):
    """`sample_src` imported anew: a `Context` of its own, so every cache starts cold."""
    name = f"sample_src_{tag}"
    spec = importlib.util.spec_from_file_location(name, sample_src.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ctx is not sample_src.ctx
    return module


def _same(actual, expected, backend_name):
    pairs = zip(actual, expected) if isinstance(expected, tuple) else [(actual, expected)]
    for got, want in pairs:
        assert_close(got, want, backend_name)


@backend_param
def test_one_context_called_from_many_threads(backend_name):
    module = _fresh_sample(backend_name)
    # Compiled backends compile per function and batch size: keep those few.
    sizes = [3] if backend_name != "numpy" else [1, 2, 3, 5, 8]
    jobs = []
    for k in range(30):
        rng, size = np.random.RandomState(k), sizes[k % len(sizes)]
        n = rng.randint(0, 6, size=size).astype(np.int64)
        which = k % 3
        if which == 0:
            jobs.append((module.wiggle, [rng.normal(size=(size, 4)), n], k % 4 == 3))
        else:
            jobs.append(([module.is_even, module.is_odd][which - 1], [n], k % 4 == 3))
    expected = [fn(*args, dry_run=True) for fn, args, _ in jobs]
    options = {"backend": backend(backend_name)}

    def call(job):
        fn, args, dry = job
        return fn(*args, dry_run=True) if dry else fn(*args, **options)

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(call, jobs))
    for result, want in zip(results, expected):
        _same(result, want, backend_name)


@backend_param
def test_a_failed_call_leaves_the_next_one_correct(backend_name):
    b = backend(backend_name)
    n = np.array([3, 6, 1])
    assert_close(bad_src.deep(n, backend=b), n, backend_name)
    with pytest.raises(StackOverflowError):
        bad_src.deep(np.array([3, 30, 1]), backend=b)
    assert_close(bad_src.deep(n, backend=b), n, backend_name)
    with pytest.raises(StepLimitError):
        bad_src.deep(np.array([3, 13, 1]), backend=b, max_steps=10)
    assert_close(bad_src.deep(n, backend=b), n, backend_name)
    assert_close(bad_src.deep(n, backend=b), n, backend_name)


@backend_param
def test_a_failed_compile_or_bad_input_leaves_the_context_usable(backend_name):
    b = backend(backend_name)
    ctx = pcbatch.Context()
    add = ctx.batch(bad_src.add)
    wrong = ctx.batch(bad_src.reshapes_wrongly)
    x = np.array([1.0, 2.5])
    with pytest.raises(pcbatch.TypeInferenceError):
        wrong(x, backend=b)
    with pytest.raises(BatchSizeError):
        add(x, np.ones(3), backend=b)
    with pytest.raises(TypeError):
        add(x, "text", backend=b)
    assert_close(add(x, 2 * x, backend=b), 3 * x, backend_name)
    with pytest.raises(pcbatch.TypeInferenceError):
        wrong(x, backend=b)


def test_an_exception_in_user_code_leaves_the_next_call_correct():
    # NumPy only: compiled backends cannot raise on values inside a run.
    ctx = pcbatch.Context()
    logs = ctx.batch(bad_src.logs)
    with pytest.warns(PerExampleFallbackWarning):
        with pytest.raises(ValueError, match="non-positive"):
            logs(np.array([1.0, -2.0, 3.0]))
        np.testing.assert_allclose(logs(np.array([1.0, 2.0, 3.0])), 2 * np.log([1.0, 2.0, 3.0]))
