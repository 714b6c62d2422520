"""The backends the suite runs on: NumPy always, JAX, TensorFlow and Torch when installed.

A test that takes ``backend_name`` is parametrized with `backend_param` (or, for a grid
of cases, `tests.tiers.in_turn`), which gives it one run per backend, by the rule of
`tests.tiers.backend_runs`: NumPy and Torch always; JAX and TensorFlow either compiled
(their ids ``jax``, ``tensorflow``) or, where the fast tier saves the compilation, as
the same staged machine run op by op (ids ``jax_eager``, ``tensorflow_eager``; see
`staged_eagerly`). Such an eager run has ``backend_name`` "jax" or "tensorflow", so a
test reads it as it reads the compiled run; ``tests/conftest.py`` runs the test inside
`staged_eagerly`. A test uses `compiled_param` instead (every backend compiled, in both
tiers) where the point is the compiled program itself (its trace count, compile-time
work, threads), or where its programs run hundreds of VM steps: run op by op, each step
dispatches dozens of JAX or TensorFlow operations, and that costs more CPU than the
compilation it saves (a small program compiles in about 0.1 s on JAX, 0.25 s in
TensorFlow's graph mode, and runs eagerly in about half that when it takes few steps).
"""

from __future__ import annotations

import contextlib
import importlib.util

import numpy as np
import pytest

import pcbatch


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def make_backend(name: str, **options):
    """``options``: keyword arguments of a compiled backend (say, ``compaction``)."""
    return _eager_if_asked(_new_backend(name, **options))


def _new_backend(name: str, **options):
    if name == "numpy":
        return pcbatch.NumpyBackend()
    if name == "jax":
        import jax

        # The oracle computes in float64/int64; so does JAX here, to compare like with
        # like (JAX's float32 default would, e.g., never meet a 1e-9 tolerance).
        jax.config.update("jax_enable_x64", True)
        from pcbatch.backends.jax import JaxBackend

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


def backend(name: str, **options):
    key = (name, *sorted(options.items()))
    if key not in _INSTANCES:
        _INSTANCES[key] = make_backend(name, **options)
    return _eager_if_asked(_INSTANCES[key])


#: the TensorFlow backends handed out inside `staged_eagerly`, run op by op until it ends
#: (None outside it)
_TF_EAGER: list | None = None


def _eager_if_asked(instance):
    if _TF_EAGER is not None and instance.name == "tensorflow":
        instance.run_eagerly = True
        _TF_EAGER.append(instance)
    return instance


@contextlib.contextmanager
def staged_eagerly(name: str):
    """Inside the block, JAX (``name`` "jax") or TensorFlow ("tensorflow") runs the staged
    machine op by op instead of compiling it (`pcbatch.fuzz.eager`): the same blocks,
    scatters and framework operations as the compiled run, about 1 CPU-s a program where
    JAX's compilation takes 4 or more. What it leaves untested is the compiler, which the
    compiled runs test (`tests.tiers.backend_runs`). On TensorFlow it applies to every
    backend that `backend` or `make_backend` gives inside the block; on JAX, to this thread."""
    global _TF_EAGER
    if name == "jax":
        import jax

        with jax.disable_jit():
            yield
        return
    if name != "tensorflow":
        raise ValueError(f"no staged machine to run eagerly on {name!r}")
    _TF_EAGER = []
    try:
        yield
    finally:
        for instance in _TF_EAGER:
            instance.run_eagerly = False
        _TF_EAGER = None


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


def backend_param(test):
    """Parametrizes ``test`` over ``backend_name``: one run per backend, JAX and TensorFlow
    compiled or eager by the rule of `tests.tiers.backend_runs`."""
    from tests import tiers

    return pytest.mark.parametrize("backend_name", tiers.backend_runs(test.__module__))(test)


#: every backend compiled, in both tiers: for a test of the compiled program itself, or
#: of programs that run many steps (see the module docstring)
compiled_param = pytest.mark.parametrize("backend_name", BACKEND_NAMES)
