"""Adaptation you control: the state `nuts.warmup` returns and `nuts.sample` resumes from,
initial jitter, and the ``inverse_mass=`` input.

An `AdaptedState` is the chains exactly as the sampler's program left them after a
call (position, log density and gradient there, step size, inverse mass, the
adaptation's running averages), with the draw counter: `nuts.sample` given one runs
on from there without adapting, drawing the random numbers the next draws of the same
run would have drawn. So one run of ``2N`` draws equals a run of ``N`` continued for
``N`` more, and ``warmup`` followed by ``sample`` equals one ``sample`` with warmup.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pcbatch.mcmc import gradients, warmup
from pcbatch.mcmc import random as rnd

#: the random stream of the initial jitter (past the sampler's own tags)
JITTER = 6


@dataclasses.dataclass(frozen=True)
class AdaptedState:
    """The chains after warmup (or after any `nuts.sample` call): pass it to `nuts.sample`
    as ``initial_state`` to continue them without adaptation.

    ``position`` is in the state's structure (constrained, when there are transforms);
    ``step_size`` is ``[chains]``, ``inverse_mass`` ``[chains, size]`` over the
    unconstrained, flattened state (leaves in `NutsResult.names`' order). ``next_draw``
    is the draw counter the next draw uses.
    """

    chain_state: Any  # warmup.ChainState, the backend's arrays
    layout: Any  # structure.Layout of the unconstrained state (None: one array)
    constraints: Any  # constrained.Constraints (None: no transforms)
    seed: int
    first_chain: int
    first_draw: int  # the run's first draw counter
    draws_done: int  # draws run since it, warmup included
    num_warmup: int  # the run's warmup (all of it is done)
    reshape: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def num_chains(self) -> int:
        return int(self.chain_state.q.shape[0])

    @property
    def next_draw(self) -> int:
        return self.first_draw + self.draws_done

    @property
    def step_size(self) -> np.ndarray:
        return gradients.to_numpy(self.chain_state.step)

    @property
    def dense(self) -> bool:
        """Whether the metric is dense (see `pcbatch.mcmc.metric`)."""
        return len(self.chain_state.inv_mass.shape) == len(self.chain_state.q.shape) + 2

    @property
    def inverse_mass(self) -> np.ndarray:
        """``[chains, size]``, or ``[chains, size, size]`` for a dense metric."""
        return user_inverse_mass(self.chain_state.inv_mass, self.dense)

    @property
    def position(self) -> Any:
        """The chains' current draws, in the state's structure and constrained space."""
        q = self.chain_state.q
        tree = q if self.layout is None else self.layout.unflatten(q, reshape=self.reshape)
        if self.constraints is None:
            return tree
        return _first(self.constraints.constrain(_with_draw_axis(tree)))


def _with_draw_axis(tree):
    from pcbatch.mcmc import structure

    if not structure.is_structured(tree):
        return tree[None]
    leaves, node = structure.flatten(tree)
    return node.unflatten([leaf[None] for leaf in leaves])


def _first(tree):
    from pcbatch.mcmc import structure

    if not structure.is_structured(tree):
        return tree[0]
    leaves, node = structure.flatten(tree)
    return node.unflatten([leaf[0] for leaf in leaves])


def jitter(
    num_chains: int, size: int, amount: float, seed: int, first_chain: int, dtype: Any
) -> np.ndarray:
    """``[chains, size]`` uniform in ``(-amount, amount)``: chain ``c``'s numbers depend only
    on (seed, its chain index), as the sampler's own."""
    chains = np.arange(first_chain, first_chain + num_chains, dtype=np.uint32)[:, None]
    seeds = np.full((num_chains, 1), np.uint32(seed % 2**32))
    counter = rnd.stream(JITTER, np.arange(size, dtype=np.uint32))[None, :]
    u, _ = rnd.uniform_pair(seeds, chains, np.uint32(0), counter, np.dtype(dtype))
    return (amount * (2.0 * u - 1.0)).astype(dtype)


def check_jitter(amount) -> float:
    try:
        value = float(amount)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(
            f"nuts.sample: jitter must be a finite number >= 0 (the half-width of the "
            f"uniform noise added to the unconstrained start; Stan's is 2), got {amount!r}"
        )
    return value


ADAPT_MASS = ("diagonal", "dense", "off")


def check_adapt_mass(adapt_mass) -> str:
    if adapt_mass not in ADAPT_MASS:
        raise ValueError(
            f"nuts.sample: adapt_mass must be one of {', '.join(map(repr, ADAPT_MASS))}, "
            f"got {adapt_mass!r}"
        )
    return adapt_mass


def is_dense_input(inverse_mass, num_chains: int, size: int, adapt_mass: str) -> bool:
    """Whether ``inverse_mass=`` is a dense matrix: ``[chains, size, size]``, or ``[size,
    size]`` (read as per-chain diagonals when that is also ``[chains, size]``, unless
    ``adapt_mass="dense"``)."""
    shape = np.shape(inverse_mass)
    if len(shape) == 3:
        return True
    square = shape == (size, size) and size > 1
    return square and (num_chains != size or adapt_mass == "dense")


def inverse_mass_input(inverse_mass, num_chains: int, size: int, dtype, dense: bool):
    """``inverse_mass=`` in the program's form: ``[chains, size]`` from a diagonal shared
    by all chains (``[size]``) or one per chain (``[chains, size]``), positive and finite;
    with ``dense``, `metric`'s ``[chains, 2, size, size]`` from a symmetric positive
    definite ``[size, size]`` or ``[chains, size, size]``."""
    values = gradients.to_numpy(inverse_mass)
    allowed = ((size, size), (num_chains, size, size)) if dense else ((size,), (num_chains, size))
    if values.dtype.kind not in "iuf" or values.shape not in allowed:
        raise ValueError(
            f"nuts.sample: inverse_mass must be the diagonal of the inverse mass matrix over "
            f"the flattened (unconstrained) state: shape ({size},), or ({num_chains}, {size}) "
            f"for one per chain; or a dense one, ({size}, {size}) or ({num_chains}, {size}, "
            f"{size}); got {values.dtype} of shape {values.shape}"
        )
    if not dense:
        if not np.all(np.isfinite(values) & (values > 0)):
            raise ValueError("nuts.sample: inverse_mass must be positive and finite")
        return np.broadcast_to(values, (num_chains, size)).astype(dtype)
    matrices = np.broadcast_to(values, (num_chains, size, size)).astype(np.float64)
    if not (np.all(np.isfinite(matrices)) and np.allclose(matrices, np.swapaxes(matrices, 1, 2))):
        raise ValueError("nuts.sample: a dense inverse_mass must be finite and symmetric")
    try:
        lower = np.linalg.cholesky(matrices)
    except np.linalg.LinAlgError:
        raise ValueError("nuts.sample: a dense inverse_mass must be positive definite") from None
    inverse = np.linalg.inv(lower)
    return np.stack([matrices, inverse], axis=1).astype(dtype)


def check_thin(thin) -> int:
    if isinstance(thin, bool) or not isinstance(thin, (int, np.integer)) or thin < 1:
        raise ValueError(f"nuts.sample: thin must be an integer >= 1, got {thin!r}")
    return int(thin)


def user_inverse_mass(inv_mass, dense: bool, traced: bool = False) -> np.ndarray:
    """The program's inverse mass as users see it (a dense metric's matrix ``C``); NumPy,
    or ``traced``, the backend's (traced) array."""
    values = inv_mass if traced else gradients.to_numpy(inv_mass)
    return values[:, 0] if dense else values


def start_of(state: AdaptedState, step_size, inverse_mass, dtype) -> warmup.ChainState:
    """The adapted chains, with ``step_size`` / ``inverse_mass`` (when given) in place of
    the adapted ones."""
    chain_state = state.chain_state
    if step_size is not None:
        step = gradients.constant_like(step_size, chain_state.step)
        chain_state = chain_state._replace(step=step)
    if inverse_mass is not None:
        inv_mass = gradients.constant_like(inverse_mass, chain_state.inv_mass)
        chain_state = chain_state._replace(inv_mass=inv_mass)
    return chain_state


