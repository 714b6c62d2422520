"""Seed-compatible XLA utilities (``tfp.experimental.auto_batching.xla``).

pcbatch compiles with XLA through its backends (`pcbatch.JaxBackend` always,
`TensorFlowBackend(jit_compile=True)` by default); this module keeps the seed's one
helper for compiling a user's own function that returns a nested structure.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["compile_nested_output"]


def compile_nested_output(function: Callable, compile_fn: Callable | None = None) -> Callable:
    """``function`` compiled with XLA, returning the same nested structure it returns.

    Args:
      function: a TensorFlow function of tensors returning a (nested) structure.
      compile_fn: how to compile a function of tensors returning a flat list of tensors;
        default ``tf.function(..., jit_compile=True)``.
    """
    import tensorflow as tf

    structure = {}

    def flat(*args, **kwargs):
        result = function(*args, **kwargs)
        structure["value"] = result
        return tf.nest.flatten(result)

    compiled = (compile_fn or (lambda f: tf.function(f, jit_compile=True)))(flat)

    def call(*args, **kwargs):
        leaves = compiled(*args, **kwargs)
        return tf.nest.pack_sequence_as(structure["value"], leaves)

    return call
