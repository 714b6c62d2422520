"""Host callbacks: call a Python function from inside a batched function while it runs.

Written as a statement of its own inside a batched function::

    pcbatch.host_callback(report, chain, i)

the compiler emits one primitive that, each time threads reach that line, calls
``report`` on the host with the values of the threads that reached it: NumPy
arrays with a leading dimension of the number of those threads (inactive threads
never appear; a step in which no thread is there makes no call). The callback's
return value is ignored, and it cannot change the program's results.

- ``report`` must be a constant of the function (a global or closure variable,
  not a local). If it is ``None`` the statement compiles to nothing at all, so a
  program can switch a callback off at no cost per step.
- NumPy: a plain call, in step order. JAX: ``jax.debug.callback`` inside the
  jitted ``while_loop`` (calls may arrive out of order and on another thread).
  TensorFlow: ``tf.numpy_function`` in the graph; under XLA
  (``TensorFlowBackend(jit_compile=True)``, the default) py functions cannot be
  compiled, so the callback is dropped with a `HostCallbackWarning`.
- Called as a plain function (plain Python, ``dry_run``) it calls ``report``
  with each value given a leading dimension of 1: one thread.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from pcbatch import running
from pcbatch.ir.types import TensorType, Type

__all__ = ["HostCallbackWarning", "host_callback"]


class HostCallbackWarning(UserWarning):
    """A backend cannot call the host from inside its compiled program."""


def host_callback(function: Callable, *values) -> None:
    """Calls ``function`` on the host with the values of the threads at this line.

    See the module docstring; outside a batched function this is one thread.
    """
    if function is not None:
        function(*(np.asarray(v)[None] for v in values))


def supported_on(backend) -> bool:
    """Whether ``backend`` calls host callbacks while it runs (not TensorFlow under XLA)."""
    return not (getattr(backend, "name", None) == "tensorflow" and backend.jit_compile)


class HostCallbackOp:
    """The primitive function the compiler emits for a ``host_callback`` statement.

    Its result (never read) is one bool per thread; type inference takes it from
    ``result_type`` instead of running the callback on dummy values.
    """

    #: the staged VM passes the block's mask (the threads at this block)
    wants_mask = True
    result_type = Type(TensorType(np.dtype(bool), ()))

    def __init__(self, function: Callable):
        self.function = function
        self.__name__ = f"host_callback({getattr(function, '__name__', 'callback')})"

    def __call__(self, *values, mask=None):
        """NumPy: ``values`` hold only the active threads' rows (``mask`` is None)."""
        self._deliver(mask, *values)
        return np.zeros(len(np.asarray(values[0])), bool)

    def _deliver(self, mask, *values) -> None:
        values = [np.asarray(v) for v in values]
        if mask is not None:
            mask = np.asarray(mask)
            if not mask.any():
                return
            values = [v[mask] for v in values]
        with running.outside():  # host code: it may start batched runs of its own
            self.function(*values)

    def for_backend(self, backend) -> Callable | None:
        name = getattr(backend, "name", "numpy")
        if name == "jax":
            return self._jax
        if name == "tensorflow":
            return self._tensorflow if supported_on(backend) else self._tensorflow_xla
        return None  # NumPy: the plain call

    def _jax(self, *values, mask):
        import jax
        import jax.numpy as jnp

        jax.debug.callback(self._deliver, mask, *values)
        return jnp.zeros(mask.shape, bool)

    def _tensorflow(self, *values, mask):
        import tensorflow as tf

        def deliver(mask, *values):
            self._deliver(mask, *values)
            return np.zeros(mask.shape, bool)

        # Stateful, so the graph keeps it although nothing reads its result.
        return tf.numpy_function(deliver, [mask, *values], Tout=tf.bool, stateful=True)

    def _tensorflow_xla(self, *values, mask):
        import tensorflow as tf

        warnings.warn(
            f"{self.__name__}: TensorFlow under XLA (jit_compile=True) cannot call the host "
            "from inside the compiled program; the callback is skipped. Use "
            "TensorFlowBackend(jit_compile=False) to have it called.",
            HostCallbackWarning,
            stacklevel=2,
        )
        return tf.zeros(tf.shape(mask), tf.bool)
