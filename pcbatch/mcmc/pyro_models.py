"""Pyro models on pcbatch's NUTS: many chains of a model's potential function at once.

Pyro's ``pyro.infer.mcmc.util.initialize_model`` turns a model into what a sampler needs:
initial unconstrained parameters (one dict of tensors, a leading chain axis with
``num_chains``), the potential function (ONE chain's unconstrained parameters -> minus
the log joint density, Jacobians included) and the transforms from each constrained
site to its unconstrained space. pcbatch's NUTS samples ``-potential_fn`` on Torch
(`nuts.sample`, gradient by ``torch.func``) and `constrain` maps the draws back through
the transforms' inverses.

`sample` does the three steps; `log_density` and `constrain` are the steps, for a caller
who calls ``initialize_model`` itself.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from pcbatch.mcmc import nuts

__all__ = ["constrain", "log_density", "sample"]


def log_density(potential_fn: Callable[[dict], Any]) -> Callable[[dict], Any]:
    """ONE chain's unconstrained parameters -> their log density, ``-potential_fn``.

    Pyro's validation is off inside: it checks values with Python ``if``s (NaN warnings,
    supports), which ``torch.func.vmap`` over the chains cannot run; NUTS itself reports
    non-finite densities as divergences.
    """
    return _log_density(potential_fn)


@functools.lru_cache(maxsize=32)
def _log_density(potential_fn: Callable[[dict], Any]) -> Callable[[dict], Any]:
    import pyro

    def unconstrained_log_density(params: dict) -> Any:
        with pyro.validation_enabled(False):
            return -potential_fn(params)

    return unconstrained_log_density


def constrain(samples: dict, transforms: dict) -> dict:
    """Draws of unconstrained sites (``initialize_model``'s space) mapped to each site's
    own (constrained) space; ``transforms`` maps constrained to unconstrained values, so
    its inverse is applied. Sites without a transform are returned as they are."""
    return {
        name: transforms[name].inv(value) if name in transforms else value
        for name, value in samples.items()
    }


def sample(
    model: Callable[..., Any],
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    *,
    num_chains: int,
    num_samples: int,
    num_warmup: int,
    seed: int,
    **options: Any,
) -> nuts.NutsResult:
    """NUTS on a Pyro model: ``num_chains`` chains, draws of every latent site in its own
    (constrained) space as tensors ``[num_samples, num_chains, *site_shape]``.

    The chains start where ``initialize_model`` puts them (its default: uniform in
    (-2, 2) in unconstrained space), drawn under ``torch.manual_seed(seed)`` without
    touching torch's global random state. ``options`` are `nuts.sample`'s (``max_tree_depth``,
    ``target_accept_prob``, ...). The result's ``state`` continues the run in the
    unconstrained space: ``nuts.sample(log_density(potential_fn), result.state, ...)``.
    """
    import torch
    from pyro.infer.mcmc.util import initialize_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        init, potential_fn, transforms, _ = initialize_model(
            model, model_args, model_kwargs or {}, num_chains=num_chains
        )
    if num_chains == 1:  # initialize_model drops the chain axis for one chain
        init = {name: value[None] for name, value in init.items()}
    result = nuts.sample(
        log_density(potential_fn), init, num_samples=num_samples, num_warmup=num_warmup,
        seed=seed, **options,
    )
    return dataclasses.replace(result, samples=constrain(result.samples, transforms))
