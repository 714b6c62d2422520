"""A Pyro model's potential function sampled by pcbatch's NUTS for many chains
(`pcbatch.mcmc.pyro_models`), draws mapped back to the constrained sites.

The model has a known posterior: a Bayesian linear regression with unit noise (the
coefficients' posterior is Gaussian, in closed form) and a positive site the data do
not touch (its posterior is its LogNormal prior), so the transform back from the
unconstrained space is checked as well. Moments must agree within 5 standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from pcbatch.mcmc import diagnostics, pyro_models
from tests import tiers

torch = pytest.importorskip("torch")
pyro = pytest.importorskip("pyro")
dist = pytest.importorskip("pyro.distributions")

Z = 5.0
RNG = np.random.RandomState(4)
X = RNG.normal(size=(12, 2))
Y = X @ np.array([0.8, -0.5]) + RNG.normal(size=12)


def regression(x, y):
    beta = pyro.sample("beta", dist.Normal(torch.zeros(2, dtype=torch.float64), 1.0).to_event(1))
    pyro.sample("scale", dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), 0.5))
    pyro.sample("y", dist.Normal(x @ beta, 1.0).to_event(1), obs=y)


def _known_answer() -> dict:
    precision = np.eye(2) + X.T @ X
    covariance = np.linalg.inv(precision)
    return {
        "beta": (covariance @ X.T @ Y, np.sqrt(np.diag(covariance))),
        "scale": (np.exp(0.125), np.sqrt((np.exp(0.25) - 1.0) * np.exp(0.25))),
    }


@pytest.mark.parametrize(("chains", "draws"), [
    pytest.param(2, 30, id="short"),
    pytest.param(4, 150, id="long", marks=tiers.slow),
])
def test_a_pyro_regression_matches_its_known_posterior(chains, draws):
    result = pyro_models.sample(regression, (torch.tensor(X), torch.tensor(Y)),
                                num_chains=chains, num_samples=draws, num_warmup=draws,
                                seed=0, max_tree_depth=5)
    assert set(result.samples) == {"beta", "scale"}
    assert result.samples["beta"].shape == (draws, chains, 2)
    assert bool((result.samples["scale"] > 0).all())  # mapped back to the constrained site
    for name, (mean, sd) in _known_answer().items():
        samples = result.samples[name].numpy().reshape(draws, chains, -1)
        ess = diagnostics.effective_sample_size(samples)
        error = np.abs(samples.mean(axis=(0, 1)) - mean) / (np.asarray(sd) / np.sqrt(ess))
        assert np.all(error < Z), (name, samples.mean(axis=(0, 1)), mean, ess)


def test_constrain_applies_the_inverse_of_initialize_models_transforms():
    from pyro.infer.mcmc.util import initialize_model

    _, _, transforms, _ = initialize_model(regression, (torch.tensor(X), torch.tensor(Y)))
    unconstrained = {"scale": torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64),
                     "beta": torch.zeros(3, 2, dtype=torch.float64)}
    constrained = pyro_models.constrain(unconstrained, transforms)
    torch.testing.assert_close(constrained["scale"], torch.exp(unconstrained["scale"]))
    assert constrained["beta"] is unconstrained["beta"]
