"""The demo: NUTS, written for one chain, run for many chains (``python -m pcbatch.demo``).

NUTS decides each chain's trajectory length by a recursive tree build, so chains
drift apart at every draw. pcbatch runs the sampler of `pcbatch.mcmc` (plain,
recursive Python for ONE chain) over a few hundred chains at once on NumPy, each
chain starting its next draw as soon as its last one ends. It prints its progress
while it runs (a tqdm bar, or plain lines without tqdm), then the throughput, how
well the batched gradient evaluations were used, and the estimated means and
standard deviations beside the known answer of a correlated Gaussian.

Options: ``--chains``, ``--samples``, ``--warmup``, ``--dim``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from pcbatch.mcmc import nuts

__all__ = ["correlated_gaussian", "main"]

RHO = 0.5  #: the correlation of neighbouring components


def correlated_gaussian(dim: int, rho: float = RHO):
    """Mean, covariance and the per-state (log density, gradient) of an AR(1)-correlated
    Gaussian with means from -1 to 1 and scales from 0.5 to 2."""
    scales = np.linspace(0.5, 2.0, dim)
    lags = np.abs(np.subtract.outer(np.arange(dim), np.arange(dim)))
    cov = rho**lags * np.outer(scales, scales)
    mean = np.linspace(-1.0, 1.0, dim)
    precision = np.linalg.inv(cov)

    def value_and_grad(x):  # ONE chain's state; pcbatch batches it
        pull = precision @ (x - mean)
        return -0.5 * np.sum((x - mean) * pull), -pull

    return mean, cov, value_and_grad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=200)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--dim", type=int, default=20)
    args = parser.parse_args(argv)

    mean, cov, value_and_grad = correlated_gaussian(args.dim)
    start = np.random.RandomState(0).normal(size=(args.chains, args.dim))
    print(
        f"pcbatch demo: NUTS written for one chain, {args.chains} chains at once on NumPy\n"
        f"target: {args.dim}-D Gaussian, means from -1 to 1, standard deviations from 0.5 "
        f"to 2, correlation {RHO}**|i - j|\n"
        f"{args.warmup} warmup + {args.samples} draws per chain\n",
        flush=True,
    )
    result = nuts.sample(
        None,
        start,
        num_samples=args.samples,
        num_warmup=args.warmup,
        seed=2026,
        value_and_grad=value_and_grad,
        progress_bar=True,  # tqdm's bar, or plain lines without tqdm
    )
    draws = args.chains * (args.samples + args.warmup)
    ess, rhat = result.ess(), result.rhat()
    z = (result.samples.mean(axis=(0, 1)) - mean) / (np.sqrt(np.diag(cov)) / np.sqrt(ess))
    sd_error = result.samples.std(axis=(0, 1)) / np.sqrt(np.diag(cov)) - 1.0
    rows = [
        ("wall time", f"{result.wall_time:.1f} s"),
        ("draws/s (all chains, warmup included)", f"{draws / result.wall_time:,.0f}"),
        ("gradient evaluations/s (per chain)", f"{result.leapfrog_steps / result.wall_time:,.0f}"),
        ("batched gradient calls", f"{result.gradient_evaluations:,}"),
        ("mean leapfrog steps per draw", f"{result.num_leapfrogs.mean():.1f}"),
        ("utilization (steps taken / lanes evaluated)", f"{result.utilization:.3f}"),
        ("lockstep bound (mean / max trajectory per draw)", f"{result.lockstep_utilization:.3f}"),
        ("divergent draws", f"{int(result.diverging.sum())}"),
        ("ESS min / median", f"{ess.min():,.0f} / {np.median(ess):,.0f}"),
        ("ESS per second (min)", f"{ess.min() / result.wall_time:,.0f}"),
        ("R-hat max", f"{rhat.max():.4f}"),
        ("mean error, max |z| (in MCMC standard errors)", f"{np.abs(z).max():.2f}"),
        ("sd relative error, max", f"{np.abs(sd_error).max():.3f}"),
    ]
    width = max(len(name) for name, _ in rows)
    print()
    for name, value in rows:
        print(f"{name:<{width}}  {value:>12}")

    print("\nthe known answer beside the estimates (mean and standard deviation over all draws):")
    print(f"{'component':>9}  {'mean':>7}  {'estimate':>8}  {'sd':>6}  {'estimate':>8}")
    estimates = result.samples.mean(axis=(0, 1)), result.samples.std(axis=(0, 1))
    for i in sorted({0, 1, args.dim // 2, args.dim - 2, args.dim - 1} & set(range(args.dim))):
        print(
            f"{i:>9}  {mean[i]:>7.3f}  {estimates[0][i]:>8.3f}  "
            f"{np.sqrt(cov[i, i]):>6.3f}  {estimates[1][i]:>8.3f}"
        )
    ok = rhat.max() < 1.05 and np.abs(z).max() < 5.0 and np.abs(sd_error).max() < 0.1
    print(
        "\nestimates agree with the known answer (R-hat below 1.05, every mean within 5 "
        "MCMC standard errors, every sd within 10%)"
        if ok
        else "\nESTIMATES DISAGREE with the known answer"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
