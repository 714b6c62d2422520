"""Arrays of other libraries (JAX, TensorFlow) as NumPy code meets them: what they are,
their NumPy dtype, and the dtypes their NumPy namespace holds. Shared by
`pcbatch.backends.numpy_dispatch` and the rules it applies (`result_dtypes`, `linalg`)."""

from __future__ import annotations

from typing import Any

import numpy as np

TF_NUMPY = "tensorflow.experimental.numpy"
JAX_NUMPY = "jax.numpy"


def is_foreign_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.ndarray)


def numpy_dtype(x: Any) -> np.dtype:
    return np.dtype(getattr(x.dtype, "as_numpy_dtype", x.dtype))


def available(dtype, xp):
    """``dtype`` as the namespace has it: JAX without ``jax_enable_x64`` runs 64-bit
    types as 32-bit ones (as the JAX backend documents), which asking for them would
    only add a warning to (``float(x)`` and ``x.item()`` ask for float64)."""
    if xp.__name__ == "jax.numpy":
        import jax

        return jax.dtypes.canonicalize_dtype(np.dtype(dtype))
    return dtype
