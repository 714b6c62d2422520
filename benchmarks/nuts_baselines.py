"""The lockstep NUTS samplers pcbatch is compared with: BlackJAX and NumPyro.

Both run every chain in lockstep: BlackJAX's NUTS kernel under ``jax.vmap`` over
chains (its trajectory ``while_loop`` becomes one loop that runs until the
longest chain's trajectory ends), NumPyro's NUTS with ``chain_method="vectorized"``
(the same, inside NumPyro). Each returns a `Run` shaped like pcbatch's result, so
`benchmarks/nuts.py` prints one table for all of them. Warmup is each library's own
Stan-style window adaptation (step size and diagonal mass matrix per chain);
without warmup they use the fixed step size given, as pcbatch does.

Install the comparison samplers with ``pip install blackjax numpyro``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from pcbatch.mcmc import diagnostics


@dataclasses.dataclass
class Run:
    """Draws ``[draws, chains, dim]`` and leapfrog steps ``[draws, chains]`` of one call."""

    samples: np.ndarray
    num_leapfrogs: np.ndarray
    wall_time: float

    @property
    def leapfrog_steps(self) -> int:
        return int(self.num_leapfrogs.sum())

    @property
    def lockstep_utilization(self) -> float:
        """Lockstep chains wait for the slowest trajectory of every draw: mean / max length."""
        n = self.num_leapfrogs.astype(np.float64)
        return float(np.mean(n.mean(axis=1) / np.maximum(n.max(axis=1), 1)))

    # A lockstep sampler's lanes are used exactly as far as its bound says.
    utilization = lockstep_utilization

    def ess(self, method: str = "classic") -> np.ndarray:
        """Stan's classic multi-chain ESS, as ``pcbatch.mcmc.nuts.Result.ess("classic")``."""
        if method != "classic":
            raise ValueError(f"the baselines compute the classic ESS only, not {method!r}")
        return diagnostics.effective_sample_size(self.samples)


def _timed(call: Callable) -> tuple:
    """(the second call's `Run`, compile seconds = first call's wall time - second's)."""
    first_start = time.perf_counter()
    call()
    first = time.perf_counter() - first_start
    run = call()
    return run, max(first - run.wall_time, 0.0)


def blackjax_nuts(log_prob: Callable, start: np.ndarray, *, warmup, samples, step_size, seed):
    """BlackJAX NUTS vmapped over chains; ``log_prob`` takes ONE state (jax.numpy)."""
    import blackjax
    import jax
    import jax.numpy as jnp

    dim = start.shape[1]

    def one_chain(key, position):
        warm_key, sample_key = jax.random.split(key)
        if warmup:
            adaptation = blackjax.window_adaptation(blackjax.nuts, log_prob)
            (state, parameters), _ = adaptation.run(warm_key, position, num_steps=warmup)
        else:
            parameters = {"step_size": step_size, "inverse_mass_matrix": jnp.ones(dim)}
            state = blackjax.nuts(log_prob, **parameters).init(position)
        kernel = blackjax.nuts(log_prob, **parameters)

        def draw(state, key):
            state, info = kernel.step(key, state)
            return state, (state.position, info.num_integration_steps)

        _, (positions, steps) = jax.lax.scan(draw, state, jax.random.split(sample_key, samples))
        return positions, steps

    sample_chains = jax.jit(jax.vmap(one_chain))
    keys = jax.random.split(jax.random.PRNGKey(seed), start.shape[0])
    positions = jnp.asarray(start, jnp.float32)

    def call() -> Run:
        begin = time.perf_counter()
        draws, steps = jax.block_until_ready(sample_chains(keys, positions))
        wall = time.perf_counter() - begin
        return Run(np.swapaxes(np.asarray(draws), 0, 1), np.asarray(steps).T, wall)

    return _timed(call)


def numpyro_nuts(log_prob: Callable, start: np.ndarray, *, warmup, samples, step_size, seed):
    """NumPyro NUTS with vectorized chains; ``log_prob`` takes ONE state (jax.numpy).

    `MCMC.run` traces and compiles again on every call with vectorized chains
    (measured: 13 s of a 4-chain, 40-draw run), so the second call's wall time, the
    one reported, includes a compilation; a one-draw run's time, which is mostly
    that compilation, is reported as the compile time.
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    def sampler(num_warmup, num_samples):
        kernel = NUTS(
            potential_fn=lambda x: -log_prob(x),
            step_size=step_size,
            adapt_step_size=warmup > 0,
            adapt_mass_matrix=warmup > 0,
        )
        return MCMC(
            kernel,
            num_warmup=num_warmup,
            num_samples=num_samples,
            num_chains=start.shape[0],
            chain_method="vectorized",
            progress_bar=False,
        )

    positions = jnp.asarray(start, jnp.float32)
    if start.shape[0] == 1:
        positions = positions[0]  # with one chain NumPyro takes an unbatched state

    def call(mcmc) -> Run:
        begin = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed), init_params=positions, extra_fields=("num_steps",))
        draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        wall = time.perf_counter() - begin
        steps = mcmc.get_extra_fields(group_by_chain=True)["num_steps"]
        return Run(np.swapaxes(np.asarray(draws), 0, 1), np.asarray(steps).T, wall)

    full, tiny = sampler(warmup, samples), sampler(min(warmup, 1), 1)
    call(full)
    return call(full), call(tiny).wall_time


def gradient_alone(log_prob: Callable, start: np.ndarray, *, warmup, samples, step_size, seed):
    """Not a sampler: ``jit(vmap(value_and_grad))`` on every chain, the batched
    gradient alone, as the ceiling for gradient evaluations per second.

    It takes 100 dependent steps (each moves the chains a little along their
    gradients, so no call can be skipped or cached); draws are the start repeated.
    """
    import jax
    import jax.numpy as jnp

    del warmup, samples, seed
    gradient = jax.jit(jax.vmap(jax.value_and_grad(log_prob)))
    steps = 100

    @jax.jit
    def walk(x):
        def one(_, x):
            _, g = gradient(x)
            return x + (1e-3 * step_size) * g

        return jax.lax.fori_loop(0, steps, one, x)

    positions = jnp.asarray(start, jnp.float32)
    chains = start.shape[0]

    def call() -> Run:
        begin = time.perf_counter()
        jax.block_until_ready(walk(positions))
        wall = time.perf_counter() - begin
        draws = np.broadcast_to(start[None], (2, *start.shape))
        return Run(draws, np.full((1, chains), steps), wall)

    return _timed(call)


SAMPLERS = {"blackjax": blackjax_nuts, "numpyro": numpyro_nuts, "gradient": gradient_alone}
