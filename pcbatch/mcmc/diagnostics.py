"""Convergence diagnostics over draws shaped ``[num_samples, num_chains, *event_shape]``.

`effective_sample_size` is the multi-chain estimate of Stan's reference manual
(Geyer's initial monotone sequence over the chains' combined autocorrelation),
`potential_scale_reduction` the split R-hat (Gelman et al., BDA3).
"""

from __future__ import annotations

import numpy as np

__all__ = ["effective_sample_size", "potential_scale_reduction"]


def _autocovariance(x: np.ndarray) -> np.ndarray:
    """Per chain autocovariance along axis 0 (biased, by FFT)."""
    n = x.shape[0]
    centered = x - x.mean(axis=0)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centered, n=size, axis=0)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:n] / n


def effective_sample_size(samples: np.ndarray) -> np.ndarray:
    """ESS of each event component, shape ``event_shape``."""
    x = np.asarray(samples, dtype=np.float64)
    n, m = x.shape[:2]
    if n < 4:
        return np.full(x.shape[2:], np.nan)
    acov = _autocovariance(x)
    chain_var = acov[0] * n / (n - 1.0)
    within = chain_var.mean(axis=0)
    var_plus = within * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + x.mean(axis=0).var(axis=0, ddof=1)
    rho = 1.0 - (within - acov.mean(axis=1)) / np.where(var_plus > 0, var_plus, 1.0)
    rho[0] = 1.0
    pairs = rho[: (n // 2) * 2].reshape((n // 2, 2) + rho.shape[1:]).sum(axis=1)
    # Geyer: keep the initial positive sequence, made monotone.
    positive = np.cumprod(pairs > 0, axis=0).astype(bool)
    monotone = np.minimum.accumulate(np.where(positive, pairs, np.inf), axis=0)
    tau = -1.0 + 2.0 * np.sum(np.where(positive, monotone, 0.0), axis=0)
    return n * m / np.maximum(tau, 1.0 / np.log10(n * m))


def potential_scale_reduction(samples: np.ndarray) -> np.ndarray:
    """Split R-hat of each event component (1 at convergence)."""
    x = np.asarray(samples, dtype=np.float64)
    half = x.shape[0] // 2
    split = np.concatenate([x[:half], x[half : 2 * half]], axis=1)
    n = split.shape[0]
    within = split.var(axis=0, ddof=1).mean(axis=0)
    between = n * split.mean(axis=0).var(axis=0, ddof=1)
    var_plus = (n - 1.0) / n * within + between / n
    return np.sqrt(var_plus / within)
