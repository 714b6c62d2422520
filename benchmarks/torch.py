"""The Torch backend beside NumPy and JAX, and NUTS on Torch beside Pyro's own NUTS.

Prints two tables.

1. The `benchmarks/backends.py` workloads on the CPU: per workload and backend (NumPy,
   JAX, Torch), the batched block executions, the median wall time of a warm call,
   microseconds per block execution and the time relative to NumPy. Every backend's
   results are checked against NumPy's first (values and, on Torch, dtypes).
2. NUTS on a Pyro model (eight schools, non-centred): pcbatch's NUTS on Torch
   (`pcbatch.mcmc.pyro_models`: every chain batched) against Pyro's NUTS (``pyro.infer.
   MCMC``, its chains one after another, as Pyro runs chains in one process), the same
   model, chains, warmup and draws: wall time, the smallest ESS over the parameters, and
   ESS per second. pcbatch's time is a warm call's (its program compiled by a first,
   short call); Pyro's has nothing to compile.

``--tiny`` cuts every workload to its first 16 examples and NUTS to a few draws: a smoke
run that checks the script, not a measurement.

Usage: ``python benchmarks/torch.py [--repeats N] [--chains C] [--draws D] [--only TEXT]
[--skip-nuts | --skip-backends] [--skip-pyro] [--device cuda] [--tiny]``

``--device cuda`` puts Torch's VM, its inputs and the Pyro model's data on the GPU (NumPy and
JAX stay where they are: JAX on its default device).
"""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
# This file is named torch.py, and Python puts its folder first on sys.path, where
# ``import torch`` would find this file itself: the folder leaves the path first.
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import pcbatch  # noqa: E402
from pcbatch.mcmc import diagnostics  # noqa: E402


def _backends_module():
    """benchmarks/backends.py (run by path, not a package), for its workloads."""
    spec = importlib.util.spec_from_file_location("backend_workloads", HERE / "backends.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _make_backends(device: str) -> dict:
    backends = {"numpy": pcbatch.NumpyBackend()}
    if importlib.util.find_spec("jax") is not None:
        import jax

        jax.config.update("jax_enable_x64", True)  # NumPy's dtypes, as Torch computes
        from pcbatch.backends.jax import JaxBackend

        backends["jax"] = JaxBackend()
    backends["torch"] = pcbatch.TorchBackend(device=device)
    return backends


def _on_host(result) -> list:
    leaves = result if isinstance(result, tuple) else (result,)
    return [leaf.cpu().numpy() if isinstance(leaf, torch.Tensor) else np.asarray(leaf)
            for leaf in leaves]


def _check_same(name: str, backend: str, got, want) -> None:
    for a, b in zip(_on_host(got), _on_host(want)):
        if backend == "torch" and a.dtype != b.dtype:
            raise AssertionError(f"{name} on torch: dtype {a.dtype}, NumPy's {b.dtype}")
        np.testing.assert_allclose(a, b, rtol=1e-9, err_msg=f"{name} on {backend}")


def _call(fn, args, depth, backend):
    result = fn(*args, backend=backend, max_stack_depth=depth)
    for leaf in result if isinstance(result, tuple) else (result,):
        getattr(leaf, "block_until_ready", lambda: None)()
        if isinstance(leaf, torch.Tensor) and leaf.is_cuda:
            torch.cuda.synchronize(leaf.device)
    return result


def backends_table(opts) -> None:
    workloads = _backends_module()._workloads()
    backends = _make_backends(opts.device)
    header = (f"{'workload':<22} {'backend':<7} {'blocks':>7} {'warm s':>9} {'us/block':>9} "
              f"{'/numpy':>7}")
    print(header)
    print("-" * len(header))
    for name, fn, args, depth in workloads:
        if opts.only not in name:
            continue
        if opts.tiny:
            args = [a[:16] for a in args]
        reference = _call(fn, args, depth, backends["numpy"])
        blocks = {}
        for backend_name, backend in backends.items():
            _check_same(name, backend_name, _call(fn, args, depth, backend), reference)
            with pcbatch.profile() as prof:
                _call(fn, args, depth, backend)
            blocks[backend_name] = prof.block_executions
        times: dict = {b: [] for b in backends}
        for _ in range(opts.repeats):  # the backends take turns: load touches each alike
            for backend_name, backend in backends.items():
                start = time.perf_counter()
                _call(fn, args, depth, backend)
                times[backend_name].append(time.perf_counter() - start)
        numpy_time = statistics.median(times["numpy"])
        for backend_name in backends:
            seconds = statistics.median(times[backend_name])
            print(f"{name:<22} {backend_name:<7} {blocks[backend_name]:>7} {seconds:>9.4f} "
                  f"{seconds / max(blocks[backend_name], 1) * 1e6:>9.1f} "
                  f"{seconds / numpy_time:>6.2f}x")
    print("\nwarm s: median of --repeats calls after a first one (the backends taking turns);"
          "\n/numpy: warm time over NumPy's. Results checked against NumPy's first.")


# -- NUTS on a Pyro model ----------------------------------------------------------------

SCHOOLS_Y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]
SCHOOLS_SIGMA = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]


def eight_schools(sigma, y=None):
    import pyro
    import pyro.distributions as dist

    schools = len(SCHOOLS_Y)
    like = {"dtype": torch.float64, "device": sigma.device}
    mu = pyro.sample("mu", dist.Normal(torch.tensor(0.0, **like), 5.0))
    tau = pyro.sample("tau", dist.HalfCauchy(torch.tensor(5.0, **like)))
    with pyro.plate("J", schools):
        theta = pyro.sample("theta", dist.Normal(torch.zeros(schools, **like), 1.0))
        pyro.sample("obs", dist.Normal(mu + tau * theta, sigma), obs=y)


def _min_ess(samples: dict) -> float:
    """The smallest ESS over every component of every site (draws ``[draws, chains, ...]``)."""
    return float(min(
        np.min(diagnostics.effective_sample_size(
            np.asarray(value).reshape(value.shape[0], value.shape[1], -1)))
        for value in samples.values()
    ))


def pcbatch_nuts(args, chains: int, warmup: int, draws: int, depth: int) -> tuple:
    from pcbatch.mcmc import pyro_models

    def run(warmup, draws):
        return pyro_models.sample(eight_schools, args, num_chains=chains, num_samples=draws,
                                  num_warmup=warmup, seed=0, max_tree_depth=depth)

    run(2, 2)  # compiles the sampler's program for these chains
    start = time.perf_counter()
    result = run(warmup, draws)
    seconds = time.perf_counter() - start
    return seconds, {k: v.cpu().numpy() for k, v in result.samples.items()}


def pyro_nuts(args, chains: int, warmup: int, draws: int, depth: int) -> tuple:
    import pyro
    from pyro.infer import MCMC, NUTS

    per_chain = []
    start = time.perf_counter()
    for chain in range(chains):  # one process: Pyro runs one chain after another
        pyro.set_rng_seed(chain)
        mcmc = MCMC(NUTS(eight_schools, max_tree_depth=depth), num_samples=draws,
                    warmup_steps=warmup, num_chains=1, disable_progbar=True)
        mcmc.run(*args)
        per_chain.append(mcmc.get_samples())
    seconds = time.perf_counter() - start
    samples = {name: np.stack([c[name].cpu().numpy() for c in per_chain], axis=1)
               for name in per_chain[0]}
    return seconds, samples


def nuts_table(opts) -> None:
    args = (torch.tensor(SCHOOLS_SIGMA, dtype=torch.float64, device=opts.device),
            torch.tensor(SCHOOLS_Y, dtype=torch.float64, device=opts.device))
    chains, draws = (2, 4) if opts.tiny else (opts.chains, opts.draws)
    header = (f"{'sampler':<22} {'chains':>6} {'draws':>6} {'wall s':>8} {'min ESS':>8} "
              f"{'ESS/s':>8}")
    print(f"\neight schools (non-centred), {draws} warmup + {draws} draws per chain")
    print(header)
    print("-" * len(header))
    samplers = [("pcbatch NUTS (torch)", pcbatch_nuts), ("pyro NUTS", pyro_nuts)]
    for name, sampler in samplers[: 1 if opts.skip_pyro else 2]:
        seconds, samples = sampler(args, chains, draws, draws, opts.depth)
        ess = _min_ess(samples)
        print(f"{name:<22} {chains:>6} {draws:>6} {seconds:>8.2f} {ess:>8.1f} "
              f"{ess / seconds:>8.2f}")
    print("\nmin ESS: the smallest effective sample size over every parameter component"
          "\n(pcbatch.mcmc.diagnostics); ESS/s: it over the wall time (warmup included).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="workloads whose name contains this")
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--draws", type=int, default=500, help="warmup and kept, each")
    parser.add_argument("--depth", type=int, default=10, help="max_tree_depth")
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--skip-backends", action="store_true", help="the NUTS table only")
    parser.add_argument("--skip-pyro", action="store_true", help="pcbatch's NUTS row only")
    parser.add_argument("--device", default="cpu", help="Torch's device, e.g. cuda")
    parser.add_argument("--tiny", action="store_true", help="a smoke run, not a measurement")
    opts = parser.parse_args()
    if opts.tiny:
        opts.repeats = 1
    if not opts.skip_backends:
        backends_table(opts)
    if not opts.skip_nuts:
        nuts_table(opts)


if __name__ == "__main__":
    main()
