"""What NUTS's profile costs a run: 100-D correlated Gaussian, fixed step size, no warmup.

Three variants, alternating, each called twice (first call: compilation included; then
warm): ``full``, inside a user's ``pcbatch.profile()`` (every block counted); ``nuts``, as
``nuts.sample`` runs by itself (only the gradient's blocks counted,
`pcbatch.profiling.counting`); ``none``, with the VM's profile switched off (the
gradient counts are then lost: for the timing only). On a GPU JAX runs the sweep, where
each counted block costs reductions at every step (benchmarks/README.md, GPU).

Usage: ``python benchmarks/sweep_profile_probe.py [CHAINS] [ROUNDS]`` (1,000 and 2).
"""

from __future__ import annotations

import contextlib
import sys
import time

import jax.numpy as jnp
import numpy as np

import pcbatch
import pcbatch.vm.staged as staged
from pcbatch.demo import correlated_gaussian
from pcbatch.mcmc import nuts

VARIANTS = ("full", "nuts", "none")


def _log_prob(dim: int):
    mean, cov, _ = correlated_gaussian(dim)
    precision = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    mean = jnp.asarray(mean, jnp.float32)
    return lambda x: -0.5 * jnp.sum((x - mean) * (precision @ (x - mean)))


def _timed(variant: str, log_prob, start) -> list:
    real = staged.profiling.current
    if variant == "none":
        staged.profiling.current = lambda: None
    outer = pcbatch.profile() if variant == "full" else contextlib.nullcontext()
    times = []
    try:
        with outer:
            fn = lambda x: log_prob(x)  # a new function: compiled afresh per variant
            for _ in range(2):
                clock = time.perf_counter()
                result = nuts.sample(fn, start, num_samples=50, num_warmup=0, seed=0,
                                     step_size=0.1, progress_bar=False)
                np.asarray(result.samples)
                times.append(time.perf_counter() - clock)
    finally:
        staged.profiling.current = real
    return times


def main() -> None:
    chains = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    log_prob = _log_prob(100)
    start = jnp.asarray(np.random.RandomState(1).normal(size=(chains, 100)), jnp.float32)
    for _ in range(rounds):
        for variant in VARIANTS:
            first, warm = _timed(variant, log_prob, start)
            print(f"{variant:<5} chains={chains} first {first:.2f} s, warm {warm:.2f} s",
                  flush=True)


if __name__ == "__main__":
    main()
