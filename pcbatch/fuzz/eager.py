"""The staged machine run op by op, so the fuzzer checks programs without compiling each.

On JAX and TensorFlow a batched call stages the whole VM (`pcbatch.vm.staged`) and
compiles it: XLA (or TensorFlow's graph builder) costs seconds per program, which
caps how many fuzz programs CI can check. Both frameworks can also execute the same
staged code eagerly: under ``jax.disable_jit()`` the jitted run is called as plain
Python, ``lax.while_loop`` becomes a Python loop (so the block dispatch, a tree of
loops that run at most once, runs the chosen branch); under
``TensorFlowBackend.run_eagerly`` the staged Python body runs outside its
``tf.function``, ``tf.while_loop`` loops in Python and ``tf.switch_case`` runs one
branch. (Not ``tf.config.run_functions_eagerly``: that would also run each
primitive's ``tf.vectorized_map`` without its cached ``tf.function``, which then
traces a new graph on every call, about 24 ms each.) Either way every
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

__all__ = ["eagerly"]


@contextlib.contextmanager
def eagerly(backend):
    """Runs ``backend``'s staged machine op by op inside the block (see the module docstring)."""
    if backend.name == "jax":
        import jax

        with jax.disable_jit():
            yield
    elif backend.name == "tensorflow":
        before = backend.run_eagerly
        backend.run_eagerly = True
        try:
            yield
        finally:
            backend.run_eagerly = before
    else:
        raise ValueError(f"no eager mode for the {backend.name!r} backend (JAX or TensorFlow)")
