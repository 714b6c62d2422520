"""The backends the suite runs on: NumPy always, JAX, TensorFlow and Torch when installed."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import pcbatch


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def make_backend(name: str, **options):
    """``options``: keyword arguments of a compiled backend (say, ``compaction``)."""
    if name == "numpy":
        return pcbatch.NumpyBackend()
    if name == "jax":
        import jax

        # The oracle computes in float64/int64; so does JAX here, to compare like with
        # like (JAX's float32 default would, e.g., never meet a 1e-9 tolerance).
        jax.config.update("jax_enable_x64", True)
        from pcbatch.backends.jax import JaxBackend

        # The suite under another way of choosing blocks (the GPU's): every result must
        # stay the same (PCBATCH_TEST_BLOCK_CHOICE=sweep pytest -k jax).
        choice = os.environ.get("PCBATCH_TEST_BLOCK_CHOICE")
        if choice and "block_choice" not in options:
            options = dict(options, block_choice=choice)
        return JaxBackend(**options)
    if name == "tensorflow":
        from pcbatch.backends.tensorflow import TensorFlowBackend

        # Graph mode compiles far faster than XLA; XLA has its own tests.
        return TensorFlowBackend(jit_compile=False, **options)
    if name == "torch":
        from pcbatch.backends.torch import TorchBackend

        return TorchBackend(**options)
    raise ValueError(name)


BACKEND_NAMES = (
    ["numpy"]
    + (["jax"] if _available("jax") else [])
    + (["tensorflow"] if _available("tensorflow") else [])
    + (["torch"] if _available("torch") else [])
)
#: The eager backends: they run the eager machine, whose primitives compute with NumPy's
#: meaning on the active rows, so their results have NumPy's dtypes and its values (Torch's
#: kernels may round the last bit otherwise: float_rtol).
EAGER_NAMES = ("numpy", "torch")
COMPILED_NAMES = [n for n in BACKEND_NAMES if n not in EAGER_NAMES]

# One instance per backend for the whole session, so compiled programs are reused.
_INSTANCES: dict = {}


def scheduled(name: str):
    """The backend ``name`` running the block its schedule chooses at each step (JAX's
    sweep, its choice on a GPU, runs every block: it has no schedule to test)."""
    return backend(name, block_choice="loops") if name == "jax" else backend(name)


def backend(name: str, **options):
    key = (name, *sorted(options.items()))
    if key not in _INSTANCES:
        _INSTANCES[key] = make_backend(name, **options)
    return _INSTANCES[key]


def float_rtol(name: str) -> float:
    """The same float64 arithmetic, but compiled code may fuse or reorder operations."""
    return 1e-12 if name in EAGER_NAMES else 1e-9


def exact_dtypes(name: str) -> bool:
    return name in EAGER_NAMES


def leaves(value) -> list:
    """The arrays of a (nested) tuple of results, in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_close(actual, expected, name: str) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if exact_dtypes(name):
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if np.issubdtype(expected.dtype, np.floating) or np.issubdtype(actual.dtype, np.floating):
        np.testing.assert_allclose(
            actual, expected, rtol=float_rtol(name), atol=1e-6 * (name not in EAGER_NAMES)
        )
    else:
        np.testing.assert_array_equal(actual, expected)


def assert_identical(got, want, zero_signs: bool = False) -> None:
    """The same (nested) results: dtypes and values, nan where nan; with ``zero_signs``,
    zeros of the same sign too."""
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(map(np.asarray, got), map(np.asarray, want)):
        assert g.dtype == w.dtype, f"dtype {g.dtype} != {w.dtype}"
        np.testing.assert_array_equal(g, w)
        if zero_signs and w.dtype.kind == "f":
            # zeros only: a NaN's sign is not NumPy's to promise (CUDA's kernels give +nan
            # where NumPy's give -nan)
            zeros = w == 0
            np.testing.assert_array_equal(np.signbit(g[zeros]), np.signbit(w[zeros]),
                                          "signs of zeros")


def on_cpu(name: str) -> bool:
    """Whether backend ``name`` computes on the CPU (JAX and TensorFlow use a GPU when
    they see one; the suite's Torch backend stays on the CPU)."""
    if name == "jax":
        import jax

        return jax.devices()[0].platform == "cpu"
    if name == "tensorflow":
        import tensorflow as tf

        return not tf.config.list_physical_devices("GPU")
    return True


backend_param = pytest.mark.parametrize("backend_name", BACKEND_NAMES)
