"""Long differential fuzz runs: random programs, every backend against the per-example run.

    python benchmarks/fuzz.py --programs 10000 --backends numpy stackless returns_first
    python benchmarks/fuzz.py --programs 200 --backends jax tensorflow --seed 7

Program ``k`` of a run is ``pcbatch.fuzz.generate(RandomChooser(seed + k))``, so a
failure is reproduced by its printed seed alone (``--seed S --programs 1``). Prints
each mismatch or error with the program's source, then the counts per backend, and
exits 1 if anything failed. JAX and TensorFlow compile every new program (about a
second each), so give them fewer programs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback

import numpy as np

from pcbatch import fuzz

BACKENDS = ("numpy", "stackless", "returns_first", "jax", "tensorflow")


def options_for(name: str) -> dict:
    """Call options that select a backend (or a NumPy variant of the machine)."""
    if name == "numpy":
        return {}
    if name == "stackless":
        return {"stackless": True}
    if name == "returns_first":
        return {"schedule": "returns_first"}
    if name == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)  # the per-example run is int64/float64
        from pcbatch.backends.jax import JaxBackend

        return {"backend": JaxBackend()}
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        from pcbatch.backends.tensorflow import TensorFlowBackend

        return {"backend": TensorFlowBackend(jit_compile=False)}
    raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")


def check_one(seed: int, backends: dict, directory: str, batch_size: int) -> list:
    """(backend, seed, what went wrong) for each backend that disagreed on program ``seed``."""
    program = fuzz.generate(fuzz.RandomChooser(seed))
    module = fuzz.load(program, directory)
    args = program.make_args(np.random.RandomState(seed), batch_size)
    failures = []
    for name, options in backends.items():
        try:
            problem = fuzz.mismatch(program, module, args, **options)
        except Exception:  # noqa: BLE001 - any crash is a finding to report
            problem = traceback.format_exc(limit=-3)
        if problem:
            failures.append((name, seed, problem, program.source))
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=BACKENDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=7)
    args = parser.parse_args(argv)
    backends = {name: options_for(name) for name in args.backends}
    failed: dict = {name: 0 for name in backends}
    with tempfile.TemporaryDirectory() as directory:
        for k in range(args.programs):
            for name, seed, problem, source in check_one(
                args.seed + k, backends, directory, args.batch_size
            ):
                failed[name] += 1
                print(f"--- {name}, seed {seed}: {problem}\n{source}", flush=True)
            if (k + 1) % 500 == 0:
                print(f"{k + 1} programs checked", file=sys.stderr, flush=True)
    for name in backends:
        print(f"{name}: {args.programs} programs, {failed[name]} mismatches or errors")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
