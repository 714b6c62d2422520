"""`nuts.sample` inside the user's ``jax.jit`` or ``tf.function``: what is traced, and seeds.

Under tracing the sampler's inputs are placeholders: nothing may leave the backend's
arrays for NumPy, and what only the host knows after a run (wall time, the profiler's
counts of gradient evaluations) does not exist. `is_traced` tells `nuts.sample` which
case it is in; `seed_word` turns every accepted seed (an integer, a traced integer, a
JAX PRNG key) into the one uint32 word the sampler's counter-based streams take.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from pcbatch.mcmc import structure


def is_traced(*values: Any) -> bool:
    """Whether any of ``values`` (arrays or structures of them) is a JAX tracer, or the
    call runs while TensorFlow builds a graph (inside ``tf.function``)."""
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        if not tf.executing_eagerly():
            return True
    if "jax" not in sys.modules:
        return False
    import jax

    for value in values:
        leaves = structure.flatten(value)[0] if structure.is_structured(value) else [value]
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return True
    return False


def is_jax_key(seed: Any) -> bool:
    """A JAX PRNG key: a typed key (``jax.random.key``) or a raw one (``PRNGKey``)."""
    if "jax" not in sys.modules or isinstance(seed, (int, np.integer)):
        return False
    import jax

    dtype = getattr(seed, "dtype", None)
    if dtype is None or not isinstance(seed, (jax.Array, jax.core.Tracer)):
        return False
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return True
    return dtype == np.uint32 and tuple(seed.shape) == (2,)


def integer_seed(key: Any) -> int:
    """The integer seed equivalent to a JAX PRNG key: ``sample(seed=key)`` draws what
    ``sample(seed=integer_seed(key))`` draws (the key's first 32 random bits)."""
    return int(_key_word(key))


def _key_word(key: Any):
    import jax
    import jax.numpy as jnp

    return jax.random.bits(key, (), jnp.uint32)


def seed_word(seed: Any, library: str):
    """``seed`` as one uint32 word: NumPy's for a concrete seed, the backend's scalar for a
    traced one. Integers count modulo 2**32; a JAX key gives `integer_seed`'s word."""
    if isinstance(seed, bool):
        raise TypeError(f"nuts.sample: seed must be an integer or a JAX PRNG key, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        return np.uint32(int(seed) % 2**32)
    if is_jax_key(seed):
        word = _key_word(seed)
        return word if is_traced(word) else np.uint32(int(word))
    dtype = getattr(seed, "dtype", None)
    kind = np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind if dtype is not None else ""
    if kind not in ("i", "u") or len(getattr(seed, "shape", ())) != 0:
        raise TypeError(
            "nuts.sample: seed must be an integer, an integer scalar array (traced inside "
            f"jax.jit or tf.function), or a JAX PRNG key; got {seed!r}"
        )
    if not is_traced(seed):
        return np.uint32(int(seed) % 2**32)
    if library == "tensorflow" or "tensorflow" in type(seed).__module__:
        import tensorflow as tf

        # Through int64, so negative seeds wrap modulo 2**32 as Python's % does.
        return tf.cast(tf.bitwise.bitwise_and(tf.cast(seed, tf.int64), 0xFFFFFFFF), tf.uint32)
    import jax.numpy as jnp

    return jnp.asarray(seed).astype(jnp.uint32)


def chain_seeds(word, num_chains: int, library: str):
    """``[num_chains]`` copies of the seed word, in NumPy for a concrete one."""
    if isinstance(word, np.uint32):
        return np.full(num_chains, word)
    if library == "tensorflow" or "tensorflow" in type(word).__module__:
        import tensorflow as tf

        return tf.fill([num_chains], word)
    import jax.numpy as jnp

    return jnp.full((num_chains,), word, dtype=jnp.uint32)
