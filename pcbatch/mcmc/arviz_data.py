"""`NutsResult.to_arviz`: draws and per-draw statistics as ArviZ's ``InferenceData``.

The posterior has one variable per leaf of the state, named by its key path
(`NutsResult.names`), each ``[chain, draw, *leaf_shape]``; ``sample_stats`` holds the
per-draw statistics under the names ArviZ gives them (`SAMPLE_STATS`), so that
``az.summary``, ``az.bfmi`` and ``az.plot_energy`` find them. Warmup draws kept with
``sample(..., save_warmup=True)`` go to ``warmup_posterior`` and ``warmup_sample_stats``.

ArviZ 0.x takes the groups as keyword arguments of ``from_dict``; ArviZ 1.x (arviz-base)
takes one dict of groups. Both are called here; 0.x is the one the tests run (1.x needs
a newer Python than the oldest pcbatch supports).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from pcbatch.mcmc import gradients

#: ArviZ's ``sample_stats`` name of each per-draw statistic -> `nuts.Draws`' field
SAMPLE_STATS = {
    "lp": "log_density",
    "energy": "energy",
    "energy_error": "energy_error",
    "max_energy_error": "max_energy_error",
    "tree_depth": "tree_depth",
    "n_steps": "num_leapfrogs",
    "diverging": "diverging",
    "acceptance_rate": "accept_prob",
    "step_size": "step_size",
}


def import_arviz(what: str = "to_arviz()") -> Any:
    """ArviZ, without its import-time notice of its own refactor; a clear error without it."""
    try:
        with warnings.catch_warnings():
            notice = ".*ArviZ is undergoing"
            warnings.filterwarnings("ignore", message=notice, category=FutureWarning)
            import arviz
    except ImportError:
        raise ImportError(f"{what} needs ArviZ: pip install 'pcbatch[arviz]'") from None
    return arviz


def group_names(data: Any) -> list[str]:
    """The group names of what `to_arviz` returns, on either ArviZ: 0.x's
    ``InferenceData.groups()`` (a method) or 1.x's ``DataTree.groups`` (a property of
    paths, ``"/posterior"``, the root ``"/"`` among them)."""
    groups = data.groups
    if callable(groups):
        return list(groups())
    return [path.strip("/") for path in groups if path.strip("/")]


def major_version(arviz: Any) -> int:
    """ArviZ's major version (0 where it does not say)."""
    version = str(getattr(arviz, "__version__", "0"))
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def inference_data(result: Any, coords: dict | None = None, dims: dict | None = None) -> Any:
    """``result`` (a `nuts.NutsResult`) as ArviZ ``InferenceData``."""
    arviz = import_arviz()
    groups = {"posterior": _posterior(result), "sample_stats": _sample_stats(result)}
    warmup = result.warmup_draws
    if warmup is not None:
        groups["warmup_posterior"] = _posterior(warmup)
        groups["warmup_sample_stats"] = _sample_stats(warmup)
    options = {"coords": coords, "dims": dims, "save_warmup": warmup is not None}
    if major_version(arviz) >= 1:
        return arviz.from_dict(groups, **options)
    return arviz.from_dict(**groups, **options)


def _chains_first(draws: Any) -> np.ndarray:
    return np.swapaxes(gradients.to_numpy(draws), 0, 1)


def _posterior(draws: Any) -> dict:
    return {name: _chains_first(leaf) for name, leaf in zip(draws.names, draws.leaves())}


def _sample_stats(draws: Any) -> dict:
    return {name: _chains_first(getattr(draws, field)) for name, field in SAMPLE_STATS.items()}
