"""Convergence diagnostics over draws shaped ``[num_samples, num_chains, *event_shape]``.

`ess` (bulk and tail) and `rhat` are the rank-normalized diagnostics of Vehtari et al.
(2021), with ArviZ's definitions: computed by ArviZ 0.x where it is installed, else by
the NumPy code here (which agrees with ArviZ to 1e-8). The classic forms remain:
`effective_sample_size`, the multi-chain estimate of Stan's reference manual (Geyer's
initial monotone sequence over the chains' combined autocorrelation), and
`potential_scale_reduction`, the split R-hat (Gelman et al., BDA3).
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np

from pcbatch.mcmc import gradients, special

__all__ = ["bfmi", "ess", "rhat", "effective_sample_size", "potential_scale_reduction"]


def _float64_on_host(samples) -> np.ndarray:
    """Draws of any library (a CUDA tensor too) as a float64 NumPy array."""
    return gradients.to_numpy(samples).astype(np.float64, copy=False)


def _autocovariance(x: np.ndarray) -> np.ndarray:
    """Per chain autocovariance along axis 0 (biased, by FFT)."""
    n = x.shape[0]
    centered = x - x.mean(axis=0)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centered, n=size, axis=0)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:n] / n


def effective_sample_size(samples: np.ndarray) -> np.ndarray:
    """ESS of each event component, shape ``event_shape``."""
    x = _float64_on_host(samples)
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
    x = _float64_on_host(samples)
    half = x.shape[0] // 2
    split = np.concatenate([x[:half], x[half : 2 * half]], axis=1)
    n = split.shape[0]
    within = split.var(axis=0, ddof=1).mean(axis=0)
    between = n * split.mean(axis=0).var(axis=0, ddof=1)
    var_plus = (n - 1.0) / n * within + between / n
    return np.sqrt(var_plus / within)


def bfmi(energy) -> np.ndarray:
    """E-BFMI of each chain, from the energy at each draw (``[num_samples, num_chains]``):
    the mean squared change of the energy from one draw to the next over its variance
    (Betancourt 2016; ArviZ's ``az.bfmi``). Below about 0.3, momentum resampling explores
    the energy distribution poorly (a heavy tail, a funnel). NaN for fewer than 2 draws."""
    e = _float64_on_host(energy)
    if e.ndim != 2:
        raise ValueError(f"energy must be [num_samples, num_chains]; got shape {e.shape}")
    if e.shape[0] < 2:
        return np.full(e.shape[1], np.nan)
    return np.mean(np.diff(e, axis=0) ** 2, axis=0) / np.var(e, axis=0, ddof=1)


# -- rank-normalized diagnostics (Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021) ----

#: ``implementation=`` of `ess` and `rhat`
IMPLEMENTATIONS = ("auto", "arviz", "numpy")


def ess(samples, method: str = "bulk", implementation: str = "auto") -> np.ndarray:
    """Bulk or tail effective sample size of each event component (shape ``event_shape``).

    ``samples`` is ``[num_samples, num_chains, *event_shape]``. The definitions are
    ArviZ's (``arviz.ess(..., method="bulk")`` or ``"tail"``): bulk, the ESS of the split
    chains' normal scores of their pooled ranks; tail, the smaller ESS of the split
    chains' indicators of lying at or below the 5% and the 95% quantiles. NaN where a
    component has a NaN draw or fewer than 4 draws per chain.

    ``implementation``: "arviz" (ArviZ computes it: 0.x's ``az.ess``, or 1.x's array
    interface), "numpy" (pcbatch's own code, equal to ArviZ's to 1e-8) or "auto" (ArviZ
    where it is installed, else NumPy).
    """
    if method not in ("bulk", "tail"):
        raise ValueError(f"ess(): method is 'bulk' or 'tail', got {method!r}")
    if _use_arviz(implementation):
        return _with_arviz(samples, "ess", method=method)
    one = _ess_bulk if method == "bulk" else _ess_tail
    return _per_component(samples, one)


def rhat(samples, implementation: str = "auto") -> np.ndarray:
    """Rank-normalized split R-hat of each event component (shape ``event_shape``).

    ArviZ's definition (``arviz.rhat(..., method="rank")``): the larger of the split
    R-hat of the normal scores of the pooled ranks (bulk) and of the same for the
    draws' distances from their median (tail). NaN where a component has a NaN draw,
    fewer than 2 chains or fewer than 4 draws; ``implementation`` as for `ess`.
    """
    if _use_arviz(implementation):
        return _with_arviz(samples, "rhat", method="rank")
    return _per_component(samples, _rhat_rank)


def _use_arviz(implementation: str) -> bool:
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"implementation is one of {', '.join(map(repr, IMPLEMENTATIONS))}, "
            f"got {implementation!r}"
        )
    if implementation == "numpy":
        return False
    from pcbatch.mcmc import arviz_data

    if implementation == "arviz":
        arviz_data.import_arviz("implementation='arviz'")
        return True
    return importlib.util.find_spec("arviz") is not None


def _chains_draws_components(samples) -> tuple:
    """``[draws, chains, *event]`` as float64 ``[chains, draws, components]``, and the
    event shape."""
    x = _float64_on_host(samples)
    if x.ndim < 2:
        raise ValueError(
            f"draws must be [num_samples, num_chains, *event_shape]; got shape {x.shape}"
        )
    event_shape = x.shape[2:]
    return np.swapaxes(x, 0, 1).reshape(x.shape[1], x.shape[0], -1), event_shape


def _per_component(samples, one) -> np.ndarray:
    x, event_shape = _chains_draws_components(samples)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = [one(x[:, :, k]) for k in range(x.shape[2])]
    return np.asarray(values, dtype=np.float64).reshape(event_shape)


def _with_arviz(samples, name: str, method: str) -> np.ndarray:
    """ArviZ's ``ess`` or ``rhat`` of each component: ArviZ 0.x's function of a
    ``[chains, draws]`` array, or ArviZ 1.x's array interface (``arviz_stats``), whose
    tail ESS takes its quantile (0.x's is fixed at 5% and 95%)."""
    from pcbatch.mcmc import arviz_data

    arviz = arviz_data.import_arviz()
    x, event_shape = _chains_draws_components(samples)
    if arviz_data.major_version(arviz) == 0:
        statistic = getattr(arviz, name)
        values = [float(statistic(x[:, :, k], method=method)) for k in range(x.shape[2])]
        return np.asarray(values, dtype=np.float64).reshape(event_shape)
    from arviz_stats.base import array_stats

    options = {"prob": 0.05} if method == "tail" else {}
    values = getattr(array_stats, name)(
        np.moveaxis(x, 2, 0), chain_axis=1, draw_axis=2, method=method, **options
    )
    return np.asarray(values, dtype=np.float64).reshape(event_shape)


def _invalid(x: np.ndarray, min_chains: int) -> bool:
    """ArviZ's validity test: a NaN draw, too few chains, or fewer than 4 draws."""
    return bool(np.isnan(x).any()) or x.shape[0] < min_chains or x.shape[1] < 4


def _split(x: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as chains of their own (an odd middle draw
    is left out)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)


def _normal_scores(x: np.ndarray) -> np.ndarray:
    """Blom's normal scores of the pooled ranks (ties take their mean rank)."""
    _, where, counts = np.unique(x, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2.0  # a whole or half number
    halves = (2.0 * mean_rank[where.reshape(-1)]).astype(np.int64) - 2
    return _scores(x.size)[halves].reshape(x.shape)


@functools.lru_cache(maxsize=4)
def _scores(size: int) -> np.ndarray:
    """The normal score of every rank 1, 1.5, 2, ..., ``size`` among ``size`` draws: the
    same for every component, so computed once."""
    ranks = np.arange(2, 2 * size + 1) / 2.0
    return special.normal_quantile((ranks - 3.0 / 8.0) / (size + 0.25))


def _split_rhat(x: np.ndarray) -> float:
    """R-hat of chains ``x`` ``[chains, draws]`` (already split)."""
    n = x.shape[1]
    within = x.var(axis=1, ddof=1).mean()
    if np.all(x == x[:, :1]):
        within = 0.0  # every chain constant: exactly, not the rounding of their means
    between = n * x.mean(axis=1).var(ddof=1)
    return float(np.sqrt((between / within + n - 1) / n))


def _rhat_rank(x: np.ndarray) -> float:
    if _invalid(x, min_chains=2):
        return np.nan
    split = _split(x)
    bulk = _split_rhat(_normal_scores(split))
    tail = _split_rhat(_normal_scores(np.abs(split - np.median(split))))
    return max(bulk, tail)


def _ess_bulk(x: np.ndarray) -> float:
    if _invalid(x, min_chains=1):
        return np.nan
    return _geyer_ess(_normal_scores(_split(x)))


def _ess_tail(x: np.ndarray) -> float:
    if _invalid(x, min_chains=1):
        return np.nan
    low, high = (_geyer_ess(_split(x <= _quantile(x, p)).astype(np.float64)) for p in (0.05, 0.95))
    return min(low, high)


def _quantile(x: np.ndarray, p: float) -> float:
    """The type-7 quantile of all of ``x``, with ArviZ's arithmetic (so that draws equal to
    it are counted alike)."""
    ordered = np.sort(x, axis=None)
    n = ordered.size
    position = n * p + (1.0 - p)
    k = int(np.floor(np.clip(position, 1, n - 1)))
    weight = float(np.clip(position - k, 0.0, 1.0))
    return (1.0 - weight) * ordered[k - 1] + weight * ordered[k]


def _geyer_ess(x: np.ndarray) -> float:
    """ESS of chains ``x`` ``[chains, draws]``: Geyer's initial positive sequence of
    autocorrelation pairs, made monotone, as ArviZ computes it (its last even lag counts
    once when positive)."""
    m, n = x.shape
    if np.max(x) - np.min(x) < np.finfo(np.float64).resolution:
        return float(x.size)
    acov = _autocovariance(x.T).T  # [chains, lags]
    mean_var = acov[:, 0].mean() * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += x.mean(axis=1).var(ddof=1)
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    if np.isnan(rho[1]):
        return np.nan
    # Pairs of lags (2k, 2k + 1), as far as the sequence may go.
    num_pairs = len(range(1, n - 3, 2)) + 1
    pairs = rho[0 : 2 * num_pairs : 2] + rho[1 : 2 * num_pairs : 2]
    stops = np.flatnonzero(~(pairs > 0.0))  # the first pair that is not positive (or NaN)
    last = min(num_pairs - 1, int(stops[0]) if stops.size else num_pairs)
    # The last pair looked at: its even lag counts once if positive, or if the pair is 0.
    even = rho[2 * last]
    extra = even if (even > 0.0 or pairs[last] >= 0.0) else 0.0
    tau = -1.0 + 2.0 * np.sum(np.minimum.accumulate(pairs[:last])) + extra
    tau = max(tau, 1.0 / np.log10(m * n))
    return float(m * n / tau)
