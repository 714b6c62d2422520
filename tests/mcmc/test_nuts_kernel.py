"""`NoUTurnSampler` with `sample`'s inputs (issue 26 follow-up, item 2): ``transforms=``,
``inverse_mass=`` and ``data=``, on every backend.

A kernel's steps draw what one ``sample(..., num_warmup=0)`` draws: a step given back the
state the last step returned goes on from the unconstrained position it kept, exactly
as a resumed `sample` does. The model is tests/mcmc/constrained_target.py's (a positive
scale and a simplex).

Old code: ``NoUTurnSampler(transforms=...)`` and ``inverse_mass=`` were TypeErrors.

A kernel compiles its own program (a buffer of one draw): on JAX and TensorFlow each is
a long compilation, so the compiled backends run in the slow tier.
"""

from __future__ import annotations

import numpy as np
import pytest

from pcbatch.mcmc import nuts
from tests import backends, tiers
from tests.mcmc import constrained_target as model

STEPS = 4
#: the inverse mass over the unconstrained state: sigma's log, then the simplex's 2
INVERSE_MASS = np.array([0.5, 1.5, 1.0])
OPTIONS = dict(step_size=0.3, max_tree_depth=4, seed=11)


def _kernel(backend_name: str, **options) -> nuts.NoUTurnSampler:
    settings = dict(OPTIONS, transforms=model.TRANSFORMS, inverse_mass=INVERSE_MASS)
    settings.update(options)
    if backend_name == "numpy":
        return nuts.NoUTurnSampler(value_and_grad=model.value_and_grad, **settings)
    model.backend(backend_name)  # JAX: float64, as the other NUTS tests
    return nuts.NoUTurnSampler(model.target(backend_name), **settings)


def _start(backend_name: str) -> dict:
    state = model.initial()
    if backend_name == "jax":
        import jax.numpy as jnp

        return {name: jnp.asarray(leaf) for name, leaf in state.items()}
    if backend_name == "tensorflow":
        import tensorflow as tf

        return {name: tf.constant(leaf) for name, leaf in state.items()}
    return state


def _steps(kernel: nuts.NoUTurnSampler, state, steps: int = STEPS):
    results = kernel.bootstrap_results(state)
    draws = []
    for _ in range(steps):
        state, results = kernel.one_step(state, results)
        draws.append(state)
    return draws, results


def _sampled(backend_name: str, state, **options) -> nuts.NutsResult:
    settings = dict(OPTIONS, transforms=model.TRANSFORMS, inverse_mass=INVERSE_MASS,
                    num_samples=STEPS, num_warmup=0, progress_bar=False)  # fmt: skip
    settings.update(options)
    if backend_name == "numpy":
        return nuts.sample(None, state, value_and_grad=model.value_and_grad, **settings)
    return nuts.sample(model.target(backend_name), state, **settings)


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_kernel_steps_with_transforms_draw_what_sample_draws(backend_name):
    draws, results = _steps(_kernel(backend_name), _start(backend_name))
    whole = _sampled(backend_name, _start(backend_name))
    for name in ("sigma", "w"):
        stepped = np.stack([np.asarray(draw[name]) for draw in draws])
        backends.assert_close(stepped, whole.samples[name], backend_name)
    assert np.all(np.asarray(draws[-1]["sigma"]) > 0)
    np.testing.assert_allclose(np.asarray(draws[-1]["w"]).sum(axis=-1), 1.0)
    assert results.draw == STEPS and results.last.state.next_draw == STEPS
    np.testing.assert_array_equal(results.last.inverse_mass, np.tile(INVERSE_MASS, (4, 1)))


def test_a_state_changed_between_steps_starts_from_its_own_values():
    kernel = _kernel("numpy")
    draws, results = _steps(kernel, model.initial(), steps=2)
    changed = {"sigma": draws[-1]["sigma"] * 2.0, "w": draws[-1]["w"]}
    state, _ = kernel.one_step(changed, results)
    # The draw a `sample` from the changed state makes as its run's third draw.
    expected = _sampled("numpy", changed, num_samples=1, first_draw=2)
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(state[name], expected.samples[name][0])


def test_the_numpy_state_a_step_returns_is_read_only():
    kernel = _kernel("numpy")
    state, results = kernel.one_step(model.initial(), kernel.bootstrap_results(None))
    with pytest.raises(ValueError, match="read-only"):
        state["sigma"][0] = 1.0
    assert results.last.samples["sigma"].flags.writeable  # the result's own draws


def test_a_dense_inverse_mass_steps_as_sample_with_it():
    root = np.array([[1.0, 0.0, 0.0], [0.4, 0.8, 0.0], [-0.2, 0.3, 0.6]])
    dense = root @ root.T
    draws, results = _steps(_kernel("numpy", inverse_mass=dense), model.initial())
    whole = _sampled("numpy", model.initial(), inverse_mass=dense, adapt_mass="off")
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(np.stack([d[name] for d in draws]), whole.samples[name])
    assert results.last.inverse_mass.shape == (model.CHAINS, 3, 3)


def test_kernel_options_are_checked_as_sample_checks_them():
    kernel = _kernel("numpy", transforms={"tau": nuts.transforms.positive()})
    with pytest.raises(ValueError, match="'tau', which is no leaf of initial_state"):
        kernel.one_step(model.initial(), kernel.bootstrap_results(None))
    kernel = _kernel("numpy", inverse_mass=np.ones(4))
    with pytest.raises(ValueError, match=r"inverse_mass must be .* shape \(3,\)"):
        kernel.one_step(model.initial(), kernel.bootstrap_results(None))


@tiers.slow
def test_kernel_with_transforms_steps_inside_jit():
    jax = pytest.importorskip("jax")
    kernel = _kernel("jax")

    def steps(state):
        return _steps(kernel, state)[0][-1]

    start = _start("jax")
    traced, eager = jax.jit(steps)(start), steps(start)
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(np.asarray(traced[name]), np.asarray(eager[name]))
