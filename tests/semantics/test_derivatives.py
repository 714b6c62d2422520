"""Differentiating through a batched function, per library (docs/semantics.md,
"Derivatives"): where the library can, the derivative is the per-example function's
own; where it cannot, an error says so. Never a silent zero."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from tests import backends

ctx = pcbatch.Context()


@ctx.batch
def newton_sqrt(a):
    """sqrt(a) by Newton's iteration, a data-dependent number of steps."""
    x = a if a > 1 else 1.0
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@ctx.batch
def scaled(a, k):
    """A recursion and a branch: a * 2**k for a >= 0, else a * 3**k."""
    if k == 0:
        return a
    if a >= 0:
        return 2.0 * scaled(a, k - 1)
    return 3.0 * scaled(a, k - 1)


A = np.array([2.0, 9.0, 0.25, 1e4])
K = np.array([0, 3, 1, 2])
A_SIGNED = np.array([1.5, -2.0, -0.5, 4.0])


def _expected_scaled_derivative():
    return np.where(A_SIGNED >= 0, 2.0**K, 3.0**K)


needs_jax = pytest.mark.skipif("jax" not in backends.BACKEND_NAMES, reason="needs JAX")
needs_tf = pytest.mark.skipif("tensorflow" not in backends.BACKEND_NAMES, reason="needs TF")
needs_torch = pytest.mark.skipif("torch" not in backends.BACKEND_NAMES, reason="needs torch")


@needs_jax
def test_jax_forward_mode_gives_each_examples_derivative():
    import jax

    jax.config.update("jax_enable_x64", True)
    backend = backends.backend("jax")
    a = jax.numpy.asarray(A)
    root, slope = jax.jvp(lambda a: newton_sqrt(a, backend=backend), (a,), (jax.numpy.ones(4),))
    np.testing.assert_allclose(root, np.sqrt(A), rtol=1e-12)
    np.testing.assert_allclose(slope, 0.5 / np.sqrt(A), rtol=1e-9)
    jacobian = jax.jacfwd(lambda a: scaled(a, K, backend=backend))(jax.numpy.asarray(A_SIGNED))
    np.testing.assert_allclose(jacobian, np.diag(_expected_scaled_derivative()), rtol=1e-12)


@needs_jax
def test_jax_reverse_mode_is_jaxs_own_error_not_a_wrong_gradient():
    import jax

    jax.config.update("jax_enable_x64", True)
    backend = backends.backend("jax")
    with pytest.raises(ValueError, match="(?i)reverse-mode differentiation"):
        jax.grad(lambda a: newton_sqrt(a, backend=backend).sum())(jax.numpy.asarray(A))


@needs_tf
def test_tensorflow_gradient_tape_without_xla_gives_each_examples_derivative():
    import tensorflow as tf

    from pcbatch.backends.tensorflow import TensorFlowBackend

    backend = TensorFlowBackend(jit_compile=False)
    a = tf.Variable(A_SIGNED)
    with tf.GradientTape() as tape:
        # plus a term outside pcbatch: both parts of the gradient must arrive
        total = tf.reduce_sum(scaled(a, tf.constant(K), backend=backend)) + tf.reduce_sum(a)
    np.testing.assert_allclose(tape.gradient(total, a), _expected_scaled_derivative() + 1.0)


@needs_tf
def test_tensorflow_gradient_tape_under_xla_raises():
    import tensorflow as tf

    from pcbatch.backends.tensorflow import TensorFlowBackend

    a = tf.Variable(A)
    with pytest.raises(tf.errors.InvalidArgumentError), tf.GradientTape() as tape:
        total = tf.reduce_sum(newton_sqrt(a, backend=TensorFlowBackend()))  # XLA: the default
        tape.gradient(total, a)


@ctx.batch
def cube_root(a):
    return np.cbrt(a)  # no torch rule: TorchBackend runs it on the host


@needs_torch
def test_torch_autograd_gives_each_examples_derivative():
    import torch

    a = torch.tensor(A_SIGNED, requires_grad=True)
    # plus a term outside pcbatch: both parts of the gradient must arrive
    total = scaled(a, torch.tensor(K)).sum() + (a * a).sum()
    total.backward()
    np.testing.assert_allclose(a.grad, _expected_scaled_derivative() + 2 * A_SIGNED)
    b = torch.tensor(A, requires_grad=True)
    newton_sqrt(b).sum().backward()
    np.testing.assert_allclose(b.grad, 0.5 / np.sqrt(A), rtol=1e-9)


@needs_torch
def test_torch_autograd_through_a_host_primitive_is_an_error_not_a_missing_gradient():
    import torch

    a = torch.tensor([8.0, 27.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="autograd cannot follow") as info:
        cube_root(a)
    assert any("test_derivatives.py" in note for note in getattr(info.value, "__notes__", []))
    with torch.no_grad():
        np.testing.assert_allclose(cube_root(a), [2.0, 3.0])
    np.testing.assert_allclose(cube_root(a.detach()), [2.0, 3.0])


@ctx.batch
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@needs_jax
def test_jax_vmap_of_a_batched_call_is_the_batched_call():
    """Each call under ``jax.vmap`` gets one example (0-d): its result has no batch axis
    of one, so ``vmap(f)(xs)`` equals ``f(xs)`` (it gave shape (n, 1))."""
    import jax

    jax.config.update("jax_enable_x64", True)
    backend = backends.backend("jax")
    n = jax.numpy.asarray([3, 5, 7, 0])
    direct = fib(n, backend=backend)
    mapped = jax.vmap(lambda n: fib(n, backend=backend))(n)
    assert mapped.shape == (4,)
    np.testing.assert_array_equal(mapped, direct)
    results, status = jax.vmap(lambda n: fib(n, backend=backend, return_status=True))(n)
    assert results.shape == status.shape == (4,)
    np.testing.assert_array_equal(results, direct)
    # rows of a 2-D batch are batches of their own: (rows, examples), as called on each
    rows = jax.vmap(lambda row: fib(row, backend=backend))(n.reshape(2, 2))
    np.testing.assert_array_equal(rows, np.reshape(direct, (2, 2)))
    # vmap of a forward-mode derivative: one example's slope per call
    a = jax.numpy.asarray(A)
    slopes = jax.vmap(lambda a: jax.jvp(lambda a: newton_sqrt(a, backend=backend), (a,),
                                        (jax.numpy.ones(()),))[1])(a)
    np.testing.assert_allclose(slopes, 0.5 / np.sqrt(A), rtol=1e-9)
