"""NUTS on Torch (issue 29, item 4): torch states, a log density written in torch, its
gradient by torch's autograd over the active chains, draws as tensors.

The reference is the same target on NumPy with its analytic gradient: the same seed
draws the same random numbers, so the first draws agree to rounding (the gradients
differ only in their last bits, and a trajectory's U-turns amplify that slowly); the
moments of a longer run agree with the known answer within Monte Carlo error.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

from pcbatch.mcmc import diagnostics, nuts
from tests import tiers

torch = pytest.importorskip("torch")

MEAN = np.array([1.0, -2.0])
SCALE = np.array([1.0, 2.0])
Z = 5.0  # standard errors allowed


def torch_log_prob(x):
    mean, scale = torch.tensor(MEAN), torch.tensor(SCALE)
    return -0.5 * torch.sum(((x - mean) / scale) ** 2)


def numpy_value_and_grad(x):
    standard = (x - MEAN) / SCALE
    return -0.5 * np.sum(standard**2), -standard / SCALE


@functools.cache
def _runs(chains: int, draws: int):
    start = np.random.RandomState(3).normal(size=(chains, 2))
    options = dict(num_samples=draws, num_warmup=draws, seed=1, max_tree_depth=6)
    on_torch = nuts.sample(torch_log_prob, torch.tensor(start), **options)
    on_numpy = nuts.sample(None, start, value_and_grad=numpy_value_and_grad, **options)
    return on_torch, on_numpy


def test_a_torch_log_density_samples_as_the_same_target_on_numpy():
    on_torch, on_numpy = _runs(3, 15)
    assert isinstance(on_torch.samples, torch.Tensor)
    assert on_torch.samples.dtype == torch.float64 and on_torch.samples.shape == (15, 3, 2)
    # The same draws while the trajectories agree: the first ones, to rounding.
    np.testing.assert_allclose(on_torch.samples[:5].numpy(), on_numpy.samples[:5], rtol=1e-6)
    np.testing.assert_array_equal(on_torch.num_leapfrogs[:5], on_numpy.num_leapfrogs[:5])
    assert on_torch.gradient_evaluations > 0


@tiers.slow
def test_moments_of_a_torch_target_match_the_known_answer():
    on_torch, _ = _runs(4, 150)
    samples = on_torch.samples.numpy()
    ess = diagnostics.effective_sample_size(samples)
    error = np.abs(samples.mean(axis=(0, 1)) - MEAN) / (SCALE / np.sqrt(ess))
    assert np.all(error < Z), (samples.mean(axis=(0, 1)), ess)
    np.testing.assert_allclose(samples.std(axis=(0, 1)), SCALE, rtol=0.2)


def structured_log_prob(params, data):
    mu, sigma, y = params["mu"], params["sigma"], data["y"]
    return (-0.5 * (mu / 10.0) ** 2 - 0.5 * (sigma / 5.0) ** 2
            - y.shape[0] * torch.log(sigma) - 0.5 * torch.sum((y - mu) ** 2) / sigma**2)


def structured_value_and_grad(params, data):
    mu, sigma, y = params["mu"], params["sigma"], data["y"]
    squares = np.sum((y - mu) ** 2)
    logp = (-0.5 * (mu / 10.0) ** 2 - 0.5 * (sigma / 5.0) ** 2 - y.size * np.log(sigma)
            - 0.5 * squares / sigma**2)
    grad = {"mu": -mu / 100.0 + np.sum(y - mu) / sigma**2,
            "sigma": -sigma / 25.0 - y.size / sigma + squares / sigma**3}
    return logp, grad


def test_a_dict_state_with_data_and_a_transform_on_torch():
    # transforms= runs its NumPy-written bijection on torch values, differentiated by
    # torch.func together with the target.
    y = np.random.RandomState(0).normal(3.0, 2.0, size=20)
    start = {"mu": np.zeros(3), "sigma": np.ones(3)}
    options = dict(num_samples=6, num_warmup=6, seed=2, max_tree_depth=6,
                   transforms={"sigma": nuts.transforms.positive()})
    tensors = {name: torch.tensor(value) for name, value in start.items()}
    on_torch = nuts.sample(structured_log_prob, tensors, data={"y": torch.tensor(y)},
                           **options)
    on_numpy = nuts.sample(None, start, data={"y": y},
                           value_and_grad=structured_value_and_grad, **options)
    for name in ("mu", "sigma"):
        assert isinstance(on_torch.samples[name], torch.Tensor)
        np.testing.assert_allclose(on_torch.samples[name].numpy(), on_numpy.samples[name],
                                   rtol=1e-6)
    assert bool((on_torch.samples["sigma"] > 0).all())


def test_a_float32_state_samples_in_float32():
    start = torch.zeros((2, 2), dtype=torch.float32)
    result = nuts.sample(lambda x: -0.5 * torch.sum(x * x), start, num_samples=3,
                         num_warmup=3, seed=0, max_tree_depth=4)
    assert result.samples.dtype == torch.float32


def test_the_gradient_does_not_import_torch_dynamo_which_crashes_beside_tensorflow():
    """``torch.func.grad`` imports ``torch._dynamo``, which imports triton where torch's
    CUDA wheels ship it, and triton's import kills a process that has loaded TensorFlow
    (CI: torch 2.14.1 beside TensorFlow 2.21, a segmentation fault). The gradient is torch's
    autograd instead; a fresh process shows what sampling imports."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys, numpy as np, torch
        from pcbatch.mcmc import nuts
        start = torch.tensor(np.random.RandomState(0).normal(size=(3, 2)))
        result = nuts.sample(lambda x: -0.5 * torch.sum(x * x), start, num_samples=3,
                             num_warmup=3, seed=1, max_tree_depth=3)
        assert tuple(result.samples.shape) == (3, 3, 2), result.samples.shape
        print("dynamo imported:", "torch._dynamo" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dynamo imported: False" in done.stdout


def test_a_torch_start_with_nan_is_refused_naming_the_chains():
    start = torch.zeros((3, 2), dtype=torch.float64)
    start[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"initial_state is not finite .* chains \[2\]"):
        nuts.sample(torch_log_prob, start, num_samples=2, num_warmup=2, seed=0)


def test_results_reach_the_host_without_numpy_reading_a_tensor(monkeypatch):
    """A CUDA tensor refuses ``np.asarray`` ("can't convert cuda:0 device type tensor to
    numpy"): a run on a GPU failed at its inverse mass. Here CPU tensors refuse it too, so
    every path from a torch run to NumPy must go through ``.cpu()``."""
    start = torch.tensor(np.random.RandomState(5).normal(size=(3, 2)))

    def refuse(self, *args, **kwargs):
        raise TypeError("can't convert this tensor to numpy (as a CUDA tensor would)")

    monkeypatch.setattr(torch.Tensor, "__array__", refuse)
    result = nuts.sample(torch_log_prob, start, num_samples=8, num_warmup=8, seed=4,
                         max_tree_depth=5)
    assert result.inverse_mass.shape == (3, 2)
    assert np.all(np.isfinite(result.ess()))
    assert np.all(np.isfinite(result.state.step_size))
    assert np.all(np.isfinite(diagnostics.effective_sample_size(result.samples)))
    if importlib.util.find_spec("arviz") is not None:
        assert result.to_arviz().posterior["x"].shape == (3, 8, 2)
    resumed = nuts.sample(torch_log_prob, result.state, num_samples=4, num_warmup=0, seed=4,
                          max_tree_depth=5)
    assert resumed.samples.shape == (4, 3, 2)
