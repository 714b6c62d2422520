"""Per-example programs that call an array library's own functions (issue 25, item 7).

Each function is written for ONE example, as a user of that library writes it: axis
arguments, shapes and reductions refer to the example's own axes. ``NUMPY`` runs on
every backend, ``TENSORFLOW`` on the TensorFlow backend, ``JAX`` on the JAX backend.
Each entry: (function, its batched inputs).
"""

from __future__ import annotations

import importlib.util

import numpy as np

S = np.array([1.0, -2.0, 0.5, 3.0])
V = np.array([[1.0, 2.0, 3.0], [0.5, -4.0, 2.5], [3.0, 3.0, -1.0]])
M = np.array(
    [[[1.0, 2.0], [3.0, 4.0]], [[0.0, -1.0], [2.5, 0.5]], [[2.0, 0.0], [0.0, 2.0]]]
)


# -- NumPy, on every backend --------------------------------------------------------


def np_sum_keepdims(x):
    return x + np.sum(x, axis=-1, keepdims=True)


def np_reductions(m):
    return np.max(m, axis=0) - np.min(m, axis=1) + np.mean(m)


def np_linalg(m, v):
    return np.matmul(m, v[:2]) + np.linalg.norm(v) + np.dot(v, v)


def np_joins(x):
    return np.concatenate([x, 2.0 * x], axis=0), np.stack([x, -x], axis=-1)


def np_branch(x):
    total = np.sum(x)
    if total > 4.0:  # noqa: SIM108 - a branch of statements is tested
        x = x / total
    else:
        x = np.concatenate([x[1:], x[:1]], axis=0)
    return x


NUMPY = {
    "sum_keepdims": (np_sum_keepdims, (V,)),
    "reductions": (np_reductions, (M,)),
    "linalg": (np_linalg, (M, V)),
    "joins": (np_joins, (V,)),
    "branch": (np_branch, (V,)),
}


# -- TensorFlow -----------------------------------------------------------------------

TENSORFLOW: dict = {}
if importlib.util.find_spec("tensorflow") is not None:
    import tensorflow as tf

    def tf_scalar(s):
        # Per-example scalars: elementwise ops may run on the batch's vector at once.
        return tf.math.log1p(tf.abs(s)) + tf.where(s > 0.0, s, -s) * tf.reduce_sum(s)

    def tf_sum_keepdims(x):
        return x + tf.reduce_sum(x, axis=-1, keepdims=True)

    def tf_reductions(m):
        return tf.reduce_max(m, axis=0) - tf.reduce_min(m, axis=1) + tf.reduce_mean(m)

    def tf_math(x):
        return tf.math.log1p(tf.math.abs(x)) + tf.math.sqrt(tf.math.square(x)) * tf.exp(-x)

    def tf_where(x):
        return tf.where(x > 1.0, x, tf.zeros_like(x))

    def tf_joins(x):
        return tf.concat([x, 2.0 * x], axis=0), tf.stack([x, -x], axis=-1)

    def tf_linalg(m, v):
        return (
            tf.linalg.matvec(m, v[:2])
            + tf.linalg.norm(v)
            + tf.tensordot(v, v, 1)
            + tf.reduce_sum(tf.matmul(m, m, transpose_b=True), axis=-1)
        )

    def tf_cast_shape(x):
        width = tf.cast(tf.shape(x)[0], x.dtype)
        return width * tf.cast(tf.cast(x, tf.int32), x.dtype) + tf.cast(tf.size(x), x.dtype)

    def tf_branch(x):
        total = tf.reduce_sum(x)
        if total > 4.0:  # noqa: SIM108 - a branch of statements is tested
            x = x / total
        else:
            x = tf.concat([x[1:], x[:1]], axis=0)
        return x

    def tf_halving(x):
        n = 0
        while tf.reduce_max(tf.abs(x)) > 1.0:
            x = x / 2.0
            n += 1
        return n, x

    def tf_compare(x):
        # == and != on what TensorFlow returned compare (TF1's rule, kept in plain and
        # TF1-style graphs, would make them object identity: False).
        return tf.reduce_max(x) == x, tf.where(tf.abs(x) != 3.0, x, 0.0)

    def tf_mixed(x):
        # NumPy on the per-example value, TensorFlow on NumPy's result.
        return tf.reduce_sum(np.sqrt(np.abs(x))) + np.sum(x, axis=-1)

    TENSORFLOW = {
        "scalar": (tf_scalar, (S,)),
        "sum_keepdims": (tf_sum_keepdims, (V,)),
        "reductions": (tf_reductions, (M,)),
        "math": (tf_math, (V,)),
        "where": (tf_where, (V,)),
        "joins": (tf_joins, (V,)),
        "linalg": (tf_linalg, (M, V)),
        "cast_shape": (tf_cast_shape, (V,)),
        "branch": (tf_branch, (V,)),
        "halving": (tf_halving, (V,)),
        "mixed": (tf_mixed, (V,)),
        "compare": (tf_compare, (V,)),
    }


# -- JAX ------------------------------------------------------------------------------

JAX: dict = {}
if importlib.util.find_spec("jax") is not None:
    import jax
    import jax.numpy as jnp

    def jnp_scalar(s):
        return jnp.log1p(jnp.abs(s)) + jnp.where(s > 0.0, s, -s) * jnp.sum(s)

    def jnp_sum_keepdims(x):
        return x + jnp.sum(x, axis=-1, keepdims=True)

    def jnp_reductions(m):
        return jnp.max(m, axis=0) - jnp.min(m, axis=1) + jnp.mean(m)

    def jnp_math(x):
        return jnp.log1p(jnp.abs(x)) + jax.nn.softplus(x) + jnp.exp(-x)

    def jnp_where(x):
        return jnp.where(x > 1.0, x, jnp.zeros_like(x))

    def jnp_joins(x):
        return jnp.concatenate([x, 2.0 * x], axis=0), jnp.stack([x, -x], axis=-1)

    def jnp_linalg(m, v):
        return jnp.matmul(m, v[:2]) + jnp.linalg.norm(v) + jnp.dot(v, v) + (m @ m.T)[0]

    def jnp_cast_shape(x):
        return jnp.shape(x)[0] * x.astype(jnp.int32).astype(x.dtype) + jnp.size(x)

    def jnp_branch(x):
        total = jnp.sum(x)
        if total > 4.0:  # noqa: SIM108 - a branch of statements is tested
            x = x / total
        else:
            x = jnp.concatenate([x[1:], x[:1]], axis=0)
        return x

    def jnp_halving(x):
        n = 0
        while jnp.max(jnp.abs(x)) > 1.0:
            x = x / 2.0
            n += 1
        return n, x

    def jnp_compare(x):
        return jnp.max(x) == x, jnp.where(jnp.abs(x) != 3.0, x, 0.0)

    def jnp_lax(x):
        # jax.lax takes JAX arrays: jnp.asarray gives the example's.
        return jax.lax.exp(jnp.asarray(x)) + jax.lax.reduce_max(jnp.asarray(x), (0,))

    JAX = {
        "scalar": (jnp_scalar, (S,)),
        "sum_keepdims": (jnp_sum_keepdims, (V,)),
        "reductions": (jnp_reductions, (M,)),
        "math": (jnp_math, (V,)),
        "where": (jnp_where, (V,)),
        "joins": (jnp_joins, (V,)),
        "linalg": (jnp_linalg, (M, V)),
        "cast_shape": (jnp_cast_shape, (V,)),
        "branch": (jnp_branch, (V,)),
        "halving": (jnp_halving, (V,)),
        "lax": (jnp_lax, (V,)),
        "compare": (jnp_compare, (V,)),
    }
