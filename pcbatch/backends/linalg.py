"""``np.linalg`` on JAX and TensorFlow as NumPy means it, example by example.

NumPy raises LinAlgError for a singular matrix (for ``cholesky``, one not positive
definite). JAX and TensorFlow under XLA return inf or nan for that example, and
TensorFlow's kernels without XLA fail the whole run. The probe of a compiled machine
(`pcbatch.backends.weak.note_fault`) records those examples: `note_singular` after the
call (XLA), `factorable` before it (without XLA, where the identity is solved in the
matrix's place). TensorFlow's NumPy has no ``np.linalg.solve``, ``inv`` or ``cholesky``:
`tensorflow_linalg` gives ``tf.linalg``'s.
"""

from __future__ import annotations

import numpy as np

from pcbatch.backends.foreign import is_foreign_array

#: ``np.linalg`` functions NumPy raises LinAlgError in for a singular matrix (for
#: ``cholesky``, one not positive definite), where JAX and TensorFlow return inf or nan
FACTORING = frozenset({np.linalg.solve, np.linalg.inv, np.linalg.cholesky})


def note_singular(args: tuple, result, xp) -> None:
    """For the compiled machine's probe (`weak.note_fault`): the examples whose finite
    matrix gave a result that is not, where NumPy raises LinAlgError."""
    from pcbatch.backends import weak

    inputs = [a for a in args if is_foreign_array(a)]
    finite = [xp.all(xp.isfinite(a)) for a in inputs]
    if not finite:
        return
    given = finite[0] if len(finite) == 1 else xp.logical_and(*finite[:2])
    failed = xp.logical_and(given, xp.logical_not(xp.all(xp.isfinite(result))))
    weak.note_fault(failed, xp, weak.SINGULAR)


def tensorflow_linalg(name: str):
    """``np.linalg``'s ``solve``, ``inv``, ``cholesky`` for TensorFlow's NumPy, which has
    none: ``tf.linalg``'s, with NumPy's vector right-hand side for ``solve`` (``b`` of
    one dimension). (``det`` and ``slogdet`` are left out: XLA has no kernel for them.)"""

    def counterpart(xp):
        import tensorflow as tf

        if name != "solve":
            return lambda a: getattr(tf.linalg, name)(factorable(a, name, xp))

        def solve(a, b):
            a = factorable(a, name, xp)
            if len(b.shape) == 1:
                return tf.linalg.solve(a, b[:, None])[:, 0]
            return tf.linalg.solve(a, b)

        return solve

    return counterpart


def factorable(a, name: str, xp):
    """``a``, where TensorFlow's kernels (without XLA) would fail the whole run on it (a
    singular matrix; for ``cholesky`` one not positive definite), the identity instead,
    noted for the probe (`weak.note_fault`: that example fails with NumPy's
    LinAlgError). XLA's kernels return inf or nan instead (`_note_singular`)."""
    import tensorflow as tf

    from pcbatch.backends import weak
    from pcbatch.backends.tensorflow import in_xla_context

    if in_xla_context():
        return a
    if name == "cholesky":
        failing = tf.reduce_min(tf.linalg.eigvalsh(a), axis=-1) <= 0
    else:
        failing = tf.equal(tf.linalg.slogdet(a)[0], 0)
    weak.note_fault(failing, xp, weak.SINGULAR)
    identity = tf.eye(a.shape[-1], dtype=a.dtype)
    return tf.where(failing[..., None, None], identity, a)
