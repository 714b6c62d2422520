"""NUTS throughput and utilization: ``python benchmarks/nuts.py [--backends numpy,jax]``.

One run, one machine: the 100-D correlated Gaussian of the demo family (and, with
``--target logistic``, a logistic regression with 1,000 data points and 25
features), for each number of chains: wall time, draws/s, gradient
evaluations/s, minimum ESS/s, utilization (leapfrog steps taken / lanes of the
batched gradient calls) and the lockstep bound (per draw, mean / max trajectory
length: what a sampler that waits for the slowest chain at every draw can reach).
Compile time is the first call's wall time minus the second's.

``--compaction auto`` (or widths such as ``16,128``) runs JAX and TensorFlow with
that compaction option (`pcbatch.vm.compact`); list a backend twice as
``jax,jax/c`` to run it full width and compacted; ``jax/sweep``, ``jax/switch`` run JAX
with that ``JaxBackend(block_choice=...)``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pcbatch.backends import compaction as compaction_option
from pcbatch.demo import correlated_gaussian
from pcbatch.mcmc import nuts

try:  # run as a script (python benchmarks/nuts.py) or as a module
    import nuts_baselines
except ImportError:
    from benchmarks import nuts_baselines


def _like(constant, x, xp):
    """A float64 NumPy constant in ``x``'s dtype: TensorFlow's NumPy does not mix dtypes."""
    return xp.asarray(constant, dtype=x.dtype)


def logistic_regression(num_data=1000, num_features=25):
    rng = np.random.RandomState(0)
    features = rng.normal(size=(num_data, num_features)) / np.sqrt(num_features)
    labels = (rng.uniform(size=num_data) < 1 / (1 + np.exp(-features @ rng.normal(size=25)))) * 1.0

    def log_prob(beta, xp):
        z = xp.matmul(_like(features, beta, xp), beta)
        y = _like(labels, beta, xp)
        return xp.sum(y * z - xp.logaddexp(0.0, z)) - 0.5 * xp.sum(beta * beta)

    def value_and_grad(beta):
        z = features @ beta
        return log_prob(beta, np), features.T @ (labels - 1 / (1 + np.exp(-z))) - beta

    return num_features, log_prob, value_and_grad


def gaussian(dim=100):
    mean, cov, value_and_grad = correlated_gaussian(dim)
    precision = np.linalg.inv(cov)

    def log_prob(x, xp):
        centered = x - _like(mean, x, xp)
        return -0.5 * xp.sum(centered * xp.matmul(_like(precision, x, xp), centered))

    return dim, log_prob, value_and_grad


def _compiled_backend(name: str, variant: str, compaction):
    """``variant`` "c": compacted; another (JAX only): that ``block_choice``."""
    if name == "jax":
        from pcbatch.backends.jax import JaxBackend

        if variant != "c":
            return JaxBackend(block_choice=variant)
        return JaxBackend(compaction=compaction)
    from pcbatch.backends.tensorflow import TensorFlowBackend

    return TensorFlowBackend(compaction=compaction)


def run(backend, target, chains, warmup, samples, step_size, compaction=None, once=False):
    """``backend``: a name; ``name/c`` runs a compiled backend with ``compaction``,
    ``jax/CHOICE`` JAX with that ``block_choice`` (``jax/sweep``, ``jax/switch``).
    ``once``: a single call, its wall time including the compile (for long runs)."""
    backend, _, variant = backend.partition("/")
    chosen = _compiled_backend(backend, variant, compaction) if variant else None
    options_backend = {"backend": chosen} if variant else {}
    dim, log_prob, value_and_grad = target
    start = np.random.RandomState(1).normal(size=(chains, dim))
    if backend in nuts_baselines.SAMPLERS:
        import jax.numpy as jnp

        return nuts_baselines.SAMPLERS[backend](
            lambda x: log_prob(x, jnp),
            start,
            warmup=warmup,
            samples=samples,
            step_size=step_size,
            seed=0,
        )
    # No progress bar: timings measure the sampler alone.
    options = dict(
        num_samples=samples, num_warmup=warmup, seed=0, step_size=step_size, progress_bar=False,
        **options_backend,
    )
    if backend == "numpy":
        call = lambda: nuts.sample(None, start, value_and_grad=value_and_grad, **options)
    elif backend == "jax":
        import jax.numpy as jnp

        fn = lambda x: log_prob(x, jnp)
        call = lambda: nuts.sample(fn, jnp.asarray(start, jnp.float32), **options)
    else:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        fn = lambda x: log_prob(x, tnp)
        call = lambda: nuts.sample(fn, tf.constant(start, tf.float32), **options)
    if once:
        return call(), float("nan")
    first_start = time.perf_counter()
    call()
    first = time.perf_counter() - first_start
    result = call()
    return result, max(first - result.wall_time, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends",
        default="numpy",
        help="comma-separated: numpy, jax, tensorflow (jax/c, tensorflow/c: compacted, "
        "see --compaction), the lockstep baselines blackjax, numpyro, and gradient "
        "(jit(vmap(value_and_grad)) alone: its grads/s is the ceiling)",
    )
    parser.add_argument("--chains", default="1,10,100,1000")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--target", choices=("gaussian", "logistic"), default="gaussian")
    parser.add_argument(
        "--step-size", type=float, default=0.1, help="initial (or, with no warmup, fixed) step size"
    )
    parser.add_argument(
        "--compaction", default="auto", help="for backends named jax/c or tensorflow/c"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="one call per row, compile included in the wall time (long runs; the "
        "lockstep baselines always run twice)",
    )
    args = parser.parse_args()
    compaction = compaction_option.parse_option(args.compaction)
    target = gaussian() if args.target == "gaussian" else logistic_regression()
    print(
        f"target={args.target} warmup={args.warmup} samples={args.samples} "
        f"step_size={args.step_size}"
    )
    header = (
        f"{'backend':<10} {'chains':>6} {'wall s':>8} {'compile s':>9} {'draws/s':>9} "
        f"{'grads/s':>10} {'minESS/s':>9} {'util':>6} {'lockstep':>8} {'leaps/draw':>10}"
    )
    print(header)
    for backend in args.backends.split(","):
        for chains in (int(c) for c in args.chains.split(",")):
            result, compile_s = run(
                backend, target, chains, args.warmup, args.samples, args.step_size, compaction,
                once=args.once,
            )
            wall = result.wall_time
            sampled = backend != "gradient" and chains * args.samples >= 4
            # The classic ESS, as the baselines' (benchmarks/nuts_baselines.py)
            ess = float(np.min(result.ess("classic"))) if sampled else float("nan")
            draws = chains * (args.warmup + args.samples) if backend != "gradient" else np.nan
            print(
                f"{backend:<10} {chains:>6} {wall:>8.2f} {compile_s:>9.2f} {draws / wall:>9.0f} "
                f"{result.leapfrog_steps / wall:>10.0f} {ess / wall:>9.1f} "
                f"{result.utilization:>6.3f} {result.lockstep_utilization:>8.3f} "
                f"{result.num_leapfrogs.mean():>10.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
