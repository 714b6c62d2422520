"""Writes ``benchmarks/references/posteriors.json``: the reference moments of the
validation models without an analytic answer, from long NumPyro NUTS runs.

    PYTHONPATH=. python benchmarks/make_references.py [--samples 50000] [--only NAME]

The NumPyro models below are written with NumPyro's own distributions and transforms
(HalfCauchy, Uniform, ``lax.scan`` for the volatility's recursion), independently of
the hand-written log densities and Jacobians of `posterior_models`, so an error in
either shows as a mismatch. Eight schools' moments are also computed by quadrature
(the school effects integrate out analytically, leaving a 2-D grid over mu and
log tau); the file stores both, and a test checks that they agree.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import sys

import numpy as np

try:
    import posterior_models
except ImportError:  # imported as benchmarks.make_references
    from benchmarks import posterior_models

SEED = 20261126


def _numpyro_models():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax import lax

    def eight_schools(y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, posterior_models.MU_SCALE))
        tau = numpyro.sample("tau", dist.HalfCauchy(posterior_models.TAU_SCALE))
        with numpyro.plate("schools", len(y)):
            eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
            theta = numpyro.deterministic("theta", mu + tau * eta)
            numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)

    def logistic_iris(x, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, posterior_models.ALPHA_SCALE))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, tau).expand([x.shape[1]]).to_event(1))
        numpyro.sample("obs", dist.Bernoulli(logits=alpha + x @ beta), obs=y)

    def stochastic_volatility(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
        phi = numpyro.sample("phi", dist.Uniform(0.0, 1.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        e = numpyro.sample("e", dist.Normal(0.0, 1.0).expand([len(y)]).to_event(1))

        def step(previous, innovation):
            x = phi * previous + sigma * innovation
            return x, x

        first = sigma * e[0] / jnp.sqrt(1.0 - phi**2)
        _, rest = lax.scan(step, first, e[1:])
        h = mu + jnp.concatenate([first[None], rest])
        numpyro.sample("obs", dist.Normal(0.0, jnp.exp(h / 2.0)), obs=y)

    return {
        "eight_schools": (eight_schools, posterior_models.SCHOOLS),
        "logistic_iris": (logistic_iris, posterior_models.iris_data()),
        "stochastic_volatility": (stochastic_volatility, posterior_models.sv_data()),
    }


QUANTITIES = {
    "eight_schools": ["mu", "tau", "theta"],
    "logistic_iris": ["alpha", "beta", "tau"],
    "stochastic_volatility": ["mu", "phi", "sigma"],
}


def run_numpyro(name: str, chains: int, samples: int, warmup: int) -> dict:
    import jax
    from numpyro.infer import MCMC, NUTS

    model, data = _numpyro_models()[name]
    mcmc = MCMC(
        NUTS(model, target_accept_prob=0.9), num_warmup=warmup, num_samples=samples,
        num_chains=chains, chain_method="vectorized", progress_bar=False,
    )  # fmt: skip
    mcmc.run(jax.random.PRNGKey(SEED), **data)
    draws = mcmc.get_samples(group_by_chain=True)
    divergences = int(np.sum(mcmc.get_extra_fields(group_by_chain=True)["diverging"]))
    entry = {"divergences": divergences, "moments": {}}
    for quantity in QUANTITIES[name]:
        flat = np.asarray(draws[quantity], dtype=np.float64)
        flat = np.swapaxes(flat.reshape(flat.shape[:2] + (-1,)), 0, 1)  # [draws, chains, k]
        found = posterior_models.moments(flat)
        entry["moments"][quantity] = {
            key: np.asarray(getattr(found, key)).tolist()
            for key in ("mean", "sd", "mean_se", "sd_se")
        }
        entry["moments"][quantity]["ess_min"] = float(
            np.min(posterior_models.diagnostics.effective_sample_size(flat))
        )
    return entry


def eight_schools_by_quadrature(points: int = 500) -> dict:
    """Exact moments (to quadrature error) of mu, tau and theta: given mu and tau the
    school effects are independent normals, so p(mu, tau | y) is a 2-D density."""
    y, sigma = posterior_models.SCHOOLS["y"], posterior_models.SCHOOLS["sigma"]
    mu = np.linspace(-40.0, 50.0, points)[:, None]
    log_tau = np.linspace(-12.0, 9.0, points)[None, :]
    tau = np.exp(log_tau)
    variance = sigma[:, None, None] ** 2 + tau**2  # [school, mu, tau]
    log_density = (
        -0.5 * (mu / posterior_models.MU_SCALE) ** 2
        - np.log1p((tau / posterior_models.TAU_SCALE) ** 2)
        + log_tau  # the grid is in log tau
        - 0.5 * np.sum(np.log(variance) + (y[:, None, None] - mu) ** 2 / variance, axis=0)
    )
    weight = np.exp(log_density - log_density.max())
    weight /= weight.sum()

    def mean_sd(values):
        mean = np.sum(weight * values)
        return mean, np.sqrt(np.sum(weight * (values - mean) ** 2))

    # theta_j given mu, tau: precision-weighted mean of y_j and mu, and its variance.
    precision = 1.0 / sigma[:, None, None] ** 2 + 1.0 / tau**2
    conditional_mean = (y[:, None, None] / sigma[:, None, None] ** 2 + mu / tau**2) / precision
    theta_mean = np.sum(weight * conditional_mean, axis=(1, 2))
    spread = conditional_mean - theta_mean[:, None, None]
    theta_var = np.sum(weight * (1.0 / precision + spread**2), axis=(1, 2))
    mu_mean, mu_sd = mean_sd(np.broadcast_to(mu, weight.shape))
    tau_mean, tau_sd = mean_sd(np.broadcast_to(tau, weight.shape))
    return {
        "mu": {"mean": [mu_mean], "sd": [mu_sd]},
        "tau": {"mean": [tau_mean], "sd": [tau_sd]},
        "theta": {"mean": theta_mean.tolist(), "sd": np.sqrt(theta_var).tolist()},
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--only", nargs="*", default=list(QUANTITIES))
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    path = posterior_models.REFERENCE_FILE
    stored = json.loads(path.read_text()) if path.exists() else {"models": {}}
    command = "PYTHONPATH=. python benchmarks/make_references.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    for name in args.only:
        print(f"{name}: {args.chains} chains x {args.samples} draws ...", flush=True)
        entry = run_numpyro(name, args.chains, args.samples, args.warmup)
        entry.update(
            seed=SEED, chains=args.chains, samples=args.samples, warmup=args.warmup,
            target_accept_prob=0.9, command=command.strip(), date=datetime.date.today().isoformat(),
        )  # fmt: skip
        if name == "eight_schools":
            entry["quadrature"] = eight_schools_by_quadrature()
        stored["models"][name] = entry
        print(json.dumps(entry["moments"], indent=None)[:400], flush=True)
    stored["versions"] = {
        package: importlib.metadata.version(package) for package in ("numpyro", "jax", "numpy")
    }
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
