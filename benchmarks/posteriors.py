"""NUTS on the validation models (issue 26, item 8): posterior moments against trusted
answers, and simulation-based calibration over many data sets, one per chain.

    PYTHONPATH=. python benchmarks/posteriors.py                      # the full set, JAX
    PYTHONPATH=. python benchmarks/posteriors.py --backends jax numpy tensorflow
    PYTHONPATH=. python benchmarks/posteriors.py --chains 4 --draws 50 --warmup 50 \\
        --sbc-sets 20 --models eight_schools_noncentered   # a smoke run

Per model and backend: max |z| over the checked means and sds (each against the
reference within the combined Monte Carlo error, see `posterior_models.z_scores`) and
their root mean square (near 1 for a correct sampler: the z-scores are calibrated), the
smallest ESS and largest split R-hat over the model's quantities, the divergences
after warmup, the first call's time (compilation included: a run of one draw) and the
wall time of the run itself. A model passes with max |z| < 5; the centered funnel is
expected to diverge and is not held to it. Then simulation-based calibration: S
simulated data sets run as S chains, each with its own data (``data_chain_axis``), and
the chi-square p-value of the ranks' uniformity per parameter. Exits 1 when a check
fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

try:
    import posterior_models
except ImportError:  # imported as benchmarks.posteriors
    from benchmarks import posterior_models

Z = 5.0
P_MIN = 1e-4


def _row(name: str, library: str, args) -> tuple | None:
    try:
        model = posterior_models.model(name)
    except ImportError as error:  # its data set's package is missing
        print(f"{name:27} {library:10} skipped: {error}")
        return None
    if library == "numpy" and model.value_and_grad is None:
        print(f"{name:27} {library:10} skipped: no hand-written NumPy gradient")
        return None
    clock = time.perf_counter()
    posterior_models.sample(name, library, chains=args.chains, draws=1, warmup=0)
    first = time.perf_counter() - clock  # compiles; the lengths below do not recompile
    result = posterior_models.sample(
        name, library, chains=args.chains, draws=args.draws, warmup=args.warmup, seed=args.seed
    )
    samples = {key: np.asarray(leaf) for key, leaf in result.samples.items()}
    quantities = model.quantities(samples)
    diagnostics = posterior_models.diagnostics
    ess = min(np.min(diagnostics.effective_sample_size(q)) for q in quantities.values())
    rhat = max(np.max(diagnostics.potential_scale_reduction(q)) for q in quantities.values())
    z_all = posterior_models.all_z(model, samples)
    z, z_rms = float(np.max(z_all)), float(np.sqrt(np.mean(z_all**2)))
    verdict = "diverges" if model.divergent else ("ok" if z < Z else "FAIL")
    divergences = int(np.sum(result.diverging))
    return (name, library, args.chains, args.draws, z, z_rms, ess, divergences, rhat, first,
            result.wall_time, verdict)  # fmt: skip


HEADER = (
    f"{'model':27} {'backend':10} {'chains':>6} {'draws':>6} {'max|z|':>7} {'rms z':>6} "
    f"{'ESS min':>8} {'diverg':>7} {'R-hat':>6} {'first s':>8} {'wall s':>8}  check"
)


def _print_row(row: tuple) -> None:
    name, library, chains, draws, z, z_rms, ess, divergences, rhat, first, wall, verdict = row
    print(
        f"{name:27} {library:10} {chains:6d} {draws:6d} {z:7.2f} {z_rms:6.2f} {ess:8.0f} "
        f"{divergences:7d} {rhat:6.3f} {first:8.1f} {wall:8.1f}  {verdict}",
        flush=True,
    )


def _calibrate(library: str, args) -> bool:
    clock = time.perf_counter()
    calibration = posterior_models.run_sbc(
        library, num_sets=args.sbc_sets, draws=args.sbc_thin * (args.sbc_ranks - 1),
        warmup=args.warmup, thin=args.sbc_thin, bins=args.sbc_bins, seed=args.seed,
    )  # fmt: skip
    seconds = time.perf_counter() - clock
    ok = all(p > P_MIN for p in calibration.p_values.values())
    p_values = ", ".join(f"{name} p={p:.3f}" for name, p in calibration.p_values.items())
    divergences = int(np.sum(calibration.result.diverging))
    print(
        f"SBC {library:10} {args.sbc_sets} data sets as {args.sbc_sets} chains, "
        f"{args.sbc_ranks - 1} of {args.sbc_thin * (args.sbc_ranks - 1)} draws each kept "
        f"(thinned by {args.sbc_thin}), {args.sbc_bins} bins: "
        f"{p_values}; {divergences} divergences; {seconds:.1f} s  {'ok' if ok else 'FAIL'}",
        flush=True,
    )
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["jax"],
                        choices=["numpy", "jax", "tensorflow"])  # fmt: skip
    parser.add_argument("--models", nargs="+", default=posterior_models.NAMES,
                        choices=posterior_models.NAMES)  # fmt: skip
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sbc-sets", type=int, default=500, help="0: no calibration")
    parser.add_argument("--sbc-ranks", type=int, default=50, help="kept draws + 1 per chain")
    parser.add_argument("--sbc-thin", type=int, default=10)
    parser.add_argument("--sbc-bins", type=int, default=5, help="odd, dividing --sbc-ranks")
    args = parser.parse_args(argv)
    ok = True
    print(HEADER)
    print("-" * len(HEADER))
    for library in args.backends:
        for name in args.models:
            row = _row(name, library, args)
            if row is not None:  # None: skipped, and said why
                _print_row(row)
                ok = ok and row[-1] != "FAIL"
    if args.sbc_sets:
        for library in args.backends:
            ok = _calibrate(library, args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
