"""The log density and its gradient for ONE state, on each backend.

The sampler's program calls ``value_and_grad(q, data)``: ``q`` one chain's state as
one vector, ``data`` a tuple of the data's leaves (empty without data). The
functions here adapt the user's to that form, once per (function, state layout,
data structure), so a compiled program is found again for new data:

- On NumPy the caller supplies ``value_and_grad`` (written with NumPy calls, like
  any pcbatch primitive); with a structured state it receives the state's structure
  and returns its gradient in the same structure.
- On JAX it is ``jax.value_and_grad`` of the target, on TensorFlow a gradient tape,
  on Torch torch's autograd of the target mapped over the active chains with
  ``torch.func.vmap``; there the target receives the backend's own arrays (write it
  with ``jax.numpy``, TensorFlow or torch operations), and the gradient is taken with
  respect to the flat vector, so the target never sees it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.backends import numpy_dispatch


def array_library(value) -> str:
    """ "jax", "tensorflow", "torch" or "numpy": the library ``value``'s array type
    belongs to."""
    module = type(value).__module__
    if module.startswith(("jax", "jaxlib")):
        return "jax"
    if module.startswith("tensorflow"):
        return "tensorflow"
    if module.startswith("torch"):
        return "torch"
    return "numpy"


def dtype_of(value) -> np.dtype:
    """The NumPy dtype of ``value``'s elements (a NumPy, JAX, TensorFlow or torch array)."""
    if array_library(value) == "torch":
        from pcbatch.backends.torch import numpy_dtype

        return numpy_dtype(value.dtype)
    return np.dtype(getattr(value.dtype, "as_numpy_dtype", value.dtype))


def to_numpy(value) -> np.ndarray:
    """``value`` as a NumPy array on the host (a CUDA tensor included)."""
    if array_library(value) == "torch":
        return value.detach().cpu().numpy()
    return np.asarray(value)


def constant_like(value, like) -> Any:
    """``value`` (NumPy) as an array of ``like``'s library and dtype (no promotion to
    float64)."""
    library = array_library(like)
    if library == "tensorflow":
        import tensorflow as tf

        return tf.constant(value, dtype=like.dtype)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.asarray(value, like.dtype)
    if library == "torch":
        import torch

        return torch.as_tensor(np.asarray(value), device=like.device).to(like.dtype)
    return np.asarray(value, like.dtype)


def value_and_grad_for(
    target: Callable | None,
    value_and_grad: Callable | None,
    state,
    backend=None,
    *,
    layout=None,
    data=None,
) -> Callable:
    """The program's ``(q, data) -> (log density, gradient)`` for the backend that runs.

    That backend is ``backend`` when given (its ``name``), else the one ``state``'s
    array type picks. ``layout``: the `structure.Layout` of a structured state (None
    for one array); ``data``: the data's `structure.Node` (None without data).
    """
    if value_and_grad is not None:
        return _given(value_and_grad, layout, data)
    library = array_library(state) if backend is None else _library_of(backend)
    if library == "numpy":
        on = "NumPy" if backend is None else f"backend {type(backend).__name__}"
        takes = "ONE state" if layout is None else "ONE state (the structure you passed)"
        takes += "" if data is None else " and the data"
        gives = "gradient" if layout is None else "gradient in the state's structure"
        raise TypeError(
            f"nuts.sample on {on} needs value_and_grad=: a function of {takes} returning "
            f"(log density, {gives}), written with NumPy; or run on JAX, TensorFlow or "
            "Torch (their arrays as initial_state, or backend=) to have the gradient "
            "computed automatically from target_log_prob_fn"
        )
    if target is None:
        raise TypeError("nuts.sample needs target_log_prob_fn (or value_and_grad=)")
    if library == "jax":
        return _jax_value_and_grad(target, layout, data)
    if library == "torch":
        return _torch_value_and_grad(target, layout, data)
    return _tf_value_and_grad(target, layout, data)


def _library_of(backend) -> str:
    name = getattr(backend, "name", None)
    if name not in ("numpy", "jax", "tensorflow", "torch"):
        raise TypeError(
            f"nuts.sample: backend={backend!r} is not a pcbatch backend (NumpyBackend, "
            "JaxBackend, TensorFlowBackend or TorchBackend)"
        )
    return name


def _call(function: Callable, params, data_leaves, data):
    """``function(params)``, or ``function(params, data)`` with the data rebuilt."""
    if data is None:
        return function(params)
    return function(params, data.unflatten(data_leaves))


class LogDensityShapeError(ValueError):
    """The user's function returned a log density (or gradient) of the wrong shape.

    Raised while the sampler's program is compiled, inside pcbatch's type inference;
    `nuts.sample` raises it as it is, not wrapped in pcbatch's `TypeInferenceError`.
    """


def _scalar(value, who: str):
    """``value``, checked to be a scalar: ONE state's log density."""
    shape = tuple(int(d) for d in getattr(value, "shape", ()))
    if shape:
        advice = "take its element ([0])" if shape == (1,) else "sum its terms"
        raise LogDensityShapeError(
            f"nuts.sample: {who} returned a log density of shape {shape} for ONE state; it "
            f"must be a scalar: {advice}"
        )
    return value


def _state_shaped(grad, q):
    """``grad``, checked to have the state's shape (or to be a number for all of it)."""
    shape, wanted = tuple(getattr(grad, "shape", ())), tuple(q.shape)
    if shape and shape != wanted:
        raise LogDensityShapeError(
            f"nuts.sample: value_and_grad returned a gradient of shape {shape} for ONE state "
            f"of shape {wanted}; it must have the state's shape"
        )
    return grad


@functools.lru_cache(maxsize=32)
def _given(value_and_grad: Callable, layout, data) -> Callable:
    """The user's own ``value_and_grad``; with a structured state it takes and returns
    the structure, joined here into the program's vector."""
    if layout is None:

        def plain(q, data_leaves):
            logp, grad = _call(value_and_grad, q, data_leaves, data)
            return _scalar(logp, "value_and_grad"), _state_shaped(grad, q)

        return plain

    def structured(q, data_leaves):
        logp, grad = _call(value_and_grad, layout.unflatten(q), data_leaves, data)
        logp = _scalar(logp, "value_and_grad")
        flat = layout.flatten(grad, "value_and_grad's gradient", dtype=q.dtype)
        return logp, flat.astype(q.dtype) if flat.dtype != q.dtype else flat

    return structured


#: The library's gradient gives (log density, gradient) as its own arrays, never Python
#: scalars: declared (`pcbatch.frontend.to_ir`), type inference does not run it on a
#: dummy state to find out, eagerly (on JAX, an XLA compile per operation of the user's
#: density and its gradient: 1.1 CPU s of NUTS's first call on a 10-D Gaussian).
ARRAY_RESULTS = (False, False)


@functools.lru_cache(maxsize=32)
def _jax_value_and_grad(target: Callable, layout, data) -> Callable:
    import jax

    def log_prob(q, data_leaves):
        params = q if layout is None else layout.unflatten(q)
        return _scalar(_call(target, params, data_leaves, data), "target_log_prob_fn")

    gradient = jax.value_and_grad(log_prob)

    def value_and_grad(q, data_leaves):
        return gradient(numpy_dispatch.unwrap(q), numpy_dispatch.unwrap(data_leaves))

    value_and_grad.weak_results = ARRAY_RESULTS
    return value_and_grad


@functools.lru_cache(maxsize=32)
def _tf_value_and_grad(target: Callable, layout, data) -> Callable:
    import tensorflow as tf

    def value_and_grad(q, data_leaves):
        q = numpy_dispatch.unwrap(q)
        data_leaves = numpy_dispatch.unwrap(data_leaves)
        with tf.GradientTape() as tape:
            tape.watch(q)
            params = q if layout is None else layout.unflatten(q, reshape=tf.reshape)
            value = _scalar(_call(target, params, data_leaves, data), "target_log_prob_fn")
        return value, tape.gradient(value, q)

    value_and_grad.weak_results = ARRAY_RESULTS
    return value_and_grad


@functools.lru_cache(maxsize=32)
def _torch_value_and_grad(target: Callable, layout, data) -> Callable:
    """The gradient by torch's autograd: the target gets ONE chain's tensors (plain torch
    tensors, so any torch code runs, Pyro's included), mapped over the active chains with
    ``torch.func.vmap``; ``torch.autograd.grad`` of the chains' summed log densities is
    each chain's own gradient, as no chain's density reads another chain's state.

    Not ``torch.func.grad``: it imports ``torch._dynamo``, which imports triton where
    torch's CUDA wheels ship it, and triton's import crashes a process that has loaded
    TensorFlow (seen with torch 2.14.1 and TensorFlow 2.21)."""
    import torch

    from pcbatch.backends.torch_values import TorchBatched, map_examples

    def log_prob(q, data_leaves):
        params = q if layout is None else layout.unflatten(q)
        return _scalar(_call(target, params, data_leaves, data), "target_log_prob_fn")

    def mapped(free, data_leaves):
        """Every chain at once, under ``torch.func.vmap``."""
        kind = type(free)
        return map_examples(log_prob, kind(free.data), tuple(data_leaves)).data

    def one_by_one(free, data_leaves):
        """Chain by chain, for targets vmap cannot run (Pyro reads ``.data`` of values)."""
        rows = [
            log_prob(free.data[i], [d.data[i] if isinstance(d, TorchBatched) else d
                                    for d in data_leaves])
            for i in range(int(free.data.shape[0]))
        ]
        return torch.stack([torch.as_tensor(r) for r in rows])

    def value_and_grad(q, data_leaves):
        kind = type(q).strong()
        with torch.enable_grad():
            free = kind(q.data.detach().requires_grad_(True))
            try:
                values = mapped(free, data_leaves)
            except RuntimeError as error:
                if "vmap" not in str(error):
                    raise
                values = one_by_one(free, data_leaves)
            if values.requires_grad:
                (grad,) = torch.autograd.grad(values.sum(), free.data)
            else:  # a density that does not depend on the state
                grad = torch.zeros_like(free.data)
        return kind(values.detach()), kind(grad)

    return value_and_grad
