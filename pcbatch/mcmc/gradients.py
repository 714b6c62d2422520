"""The log density and its gradient for ONE state, on each backend.

On NumPy the caller supplies ``value_and_grad`` (written with NumPy calls, like any
pcbatch primitive). On JAX it is ``jax.value_and_grad`` of the target, on
TensorFlow a gradient tape; there the target receives the backend's own arrays
(write it with ``jax.numpy`` or TensorFlow operations).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pcbatch.backends import numpy_dispatch


def array_library(value) -> str:
    """ "jax", "tensorflow" or "numpy": the library ``value``'s array type belongs to."""
    module = type(value).__module__
    if module.startswith(("jax", "jaxlib")):
        return "jax"
    if module.startswith("tensorflow"):
        return "tensorflow"
    return "numpy"


def value_and_grad_for(
    target: Callable | None, value_and_grad: Callable | None, state, backend=None
) -> Callable:
    """The per-state ``(log density, gradient)`` function for the backend that runs.

    That backend is ``backend`` when given (its ``name``), else the one ``state``'s
    array type picks.
    """
    if value_and_grad is not None:
        return value_and_grad
    library = array_library(state) if backend is None else _library_of(backend)
    if library == "numpy":
        on = "NumPy" if backend is None else f"backend {type(backend).__name__}"
        raise TypeError(
            f"nuts.sample on {on} needs value_and_grad=: a function of ONE state returning "
            "(log density, gradient), written with NumPy; or run on JAX or TensorFlow "
            "(their arrays as initial_state, or backend=) to have the gradient computed "
            "automatically from target_log_prob_fn"
        )
    if target is None:
        raise TypeError("nuts.sample needs target_log_prob_fn (or value_and_grad=)")
    return _jax_value_and_grad(target) if library == "jax" else _tf_value_and_grad(target)


def _library_of(backend) -> str:
    name = getattr(backend, "name", None)
    if name not in ("numpy", "jax", "tensorflow"):
        raise TypeError(
            f"nuts.sample: backend={backend!r} is not a pcbatch backend (NumpyBackend, "
            "JaxBackend or TensorFlowBackend)"
        )
    return name


@functools.lru_cache(maxsize=32)
def _jax_value_and_grad(target: Callable) -> Callable:
    import jax

    gradient = jax.value_and_grad(target)

    def value_and_grad(state):
        return gradient(numpy_dispatch.unwrap(state))

    return value_and_grad


@functools.lru_cache(maxsize=32)
def _tf_value_and_grad(target: Callable) -> Callable:
    import tensorflow as tf

    def value_and_grad(state):
        state = numpy_dispatch.unwrap(state)
        with tf.GradientTape() as tape:
            tape.watch(state)
            value = target(state)
        return value, tape.gradient(value, state)

    return value_and_grad
