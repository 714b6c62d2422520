"""The staged machine run op by op, so the fuzzer checks programs without compiling each.

On JAX and TensorFlow a batched call stages the whole VM (`pcbatch.vm.staged`) and
compiles it: XLA (or TensorFlow's graph builder) costs seconds per program, which
caps how many fuzz programs CI can check. Both frameworks can also execute the same
staged code eagerly: under ``jax.disable_jit()`` the jitted run is called as plain
Python, ``lax.while_loop`` becomes a Python loop (so the block dispatch, a tree of
loops that run at most once, runs the chosen branch); under
``tf.config.run_functions_eagerly(True)`` the ``tf.function`` runs its Python body,
``tf.while_loop`` loops in Python and ``tf.switch_case`` runs one branch. Either way every
block, stack scatter and item assignment is the same code and the same framework
operation as in the compiled run; what eager mode leaves untested is the compiler itself (XLA's or
TensorFlow's graph lowering and optimization), which the fuzz tests cover with a
smaller compiled sample.

Contract: ``eagerly(backend)`` is a context manager under which calls batched on
``backend`` (a `JaxBackend` or `TensorFlowBackend`) run the staged machine eagerly;
every such call re-runs the staged Python code, so it adds one to ``backend.traces``
(tests use that to check the staged machine, not a cached compiled program, ran).
"""

from __future__ import annotations

import contextlib
import logging


@contextlib.contextmanager
def eagerly(backend):
    """Runs ``backend``'s staged machine op by op inside the block (see the module docstring)."""
    if backend.name == "jax":
        import jax

        with jax.disable_jit():
            yield
    elif backend.name == "tensorflow":
        import tensorflow as tf

        before = tf.config.functions_run_eagerly()
        logger = tf.get_logger()
        level = logger.level
        # tf.vectorized_map warns on every call that it builds its own graph anyway.
        logger.setLevel(logging.ERROR)
        tf.config.run_functions_eagerly(True)
        try:
            yield
        finally:
            tf.config.run_functions_eagerly(before)
            logger.setLevel(level)
    else:
        raise ValueError(f"no eager mode for the {backend.name!r} backend (JAX or TensorFlow)")
