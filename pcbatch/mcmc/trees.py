"""NUTS trajectory trees for ONE chain: the per-chain arithmetic the sampler's program uses.

A `Tree` is a stretch of a Hamiltonian trajectory: its two ends in trajectory
order (``minus`` = earliest in time, ``plus`` = latest), the state proposed from
it, the log of its total weight, ``rho`` (the sum of the momenta of all its
states) and counters. Weights are relative to the energy of the draw's first
state, so a state's log weight is ``energy0 - energy``.

Multinomial sampling: inside a subtree a state is kept with probability
proportional to its weight; when a new subtree joins the trajectory its
proposal wins with probability min(1, w_new / w_old) (biased progressive
sampling, Betancourt 2017, appendix A.3.2). The no-U-turn test is the
generalized criterion on momenta, with Stan's two extra checks across the
seam of every merge.

Everything here is straight-line NumPy (selections with ``np.where``, no
Python branching on values), so pcbatch runs it as batched primitives.
"""

from __future__ import annotations

import collections

import numpy as np

#: an energy error above this marks the transition divergent (Stan's and NumPyro's value)
MAX_ENERGY_ERROR = 1000.0

Tree = collections.namedtuple(
    "Tree",
    [
        "q_minus",
        "p_minus",
        "grad_minus",
        "q_plus",
        "p_plus",
        "grad_plus",
        "q_proposal",
        "logp_proposal",
        "grad_proposal",
        "log_weight",
        "rho",
        "turning",
        "diverging",
        "num_leapfrogs",
        "sum_accept",
    ],
)


def kinetic_energy(p, inv_mass):
    return 0.5 * np.sum(p * p * inv_mass)


def leaf(q, p, logp, grad, energy0, inv_mass):
    """The one-state tree after a leapfrog step; divergent if the energy error is huge or NaN."""
    error = kinetic_energy(p, inv_mass) - logp - energy0
    diverging = np.logical_not(error <= MAX_ENERGY_ERROR)
    log_weight = np.where(np.isnan(error), -np.inf, -error)
    accept = np.where(np.isnan(error), 0.0, np.minimum(1.0, np.exp(np.minimum(-error, 0.0))))
    one = np.ones_like(diverging, dtype=np.int32)
    return Tree(
        q,
        p,
        grad,
        q,
        p,
        grad,
        q,
        logp,
        grad,
        log_weight,
        p,
        diverging & False,
        diverging,
        one,
        accept,
    )


def root(q, p, logp, grad):
    """The trajectory's first state, as a tree of no leapfrog steps and log weight 0."""
    zero = logp * 0.0
    no = np.zeros_like(zero, dtype=bool)
    return Tree(
        q,
        p,
        grad,
        q,
        p,
        grad,
        q,
        logp,
        grad,
        zero,
        p,
        no,
        no,
        np.zeros_like(zero, dtype=np.int32),
        zero,
    )


def start_of(tree, direction):
    """The end a new subtree grows from: ``plus`` forward in time, ``minus`` backward."""
    forward = direction > 0
    return (
        np.where(forward, tree.q_plus, tree.q_minus),
        np.where(forward, tree.p_plus, tree.p_minus),
        np.where(forward, tree.grad_plus, tree.grad_minus),
    )


def _no_u_turn(p_left, p_right, rho, inv_mass):
    return (np.sum(inv_mass * p_left * rho) > 0) & (np.sum(inv_mass * p_right * rho) > 0)


def _turning(p_left_minus, p_left_plus, rho_left, p_right_minus, p_right_plus, rho_right, inv_mass):
    """The generalized criterion over left + right (trajectory order), with Stan's extra
    checks: each half extended by the first state across the seam."""
    rho = rho_left + rho_right
    whole = _no_u_turn(p_left_minus, p_right_plus, rho, inv_mass)
    left_extended = _no_u_turn(p_left_minus, p_right_minus, rho_left + p_right_minus, inv_mass)
    right_extended = _no_u_turn(p_left_plus, p_right_plus, rho_right + p_left_plus, inv_mass)
    return np.logical_not(whole & left_extended & right_extended)


def _joined(first, second, direction, take_second, log_weight, inv_mass):
    """``second`` (grown from ``first`` in ``direction``) and ``first`` as one tree."""
    forward = direction > 0
    left = lambda a, b: np.where(forward, a, b)  # the earlier-in-time tree's value
    right = lambda a, b: np.where(forward, b, a)
    turning = _turning(
        left(first.p_minus, second.p_minus),
        left(first.p_plus, second.p_plus),
        left(first.rho, second.rho),
        right(first.p_minus, second.p_minus),
        right(first.p_plus, second.p_plus),
        right(first.rho, second.rho),
        inv_mass,
    )
    return Tree(
        left(first.q_minus, second.q_minus),
        left(first.p_minus, second.p_minus),
        left(first.grad_minus, second.grad_minus),
        right(first.q_plus, second.q_plus),
        right(first.p_plus, second.p_plus),
        right(first.grad_plus, second.grad_plus),
        np.where(take_second, second.q_proposal, first.q_proposal),
        np.where(take_second, second.logp_proposal, first.logp_proposal),
        np.where(take_second, second.grad_proposal, first.grad_proposal),
        log_weight,
        first.rho + second.rho,
        turning | second.turning,
        second.diverging,
        first.num_leapfrogs + second.num_leapfrogs,
        first.sum_accept + second.sum_accept,
    )


def merge_subtrees(first, second, direction, uniform, inv_mass):
    """Two halves of a subtree: the proposal drawn in proportion to the halves' weights."""
    log_weight = np.logaddexp(first.log_weight, second.log_weight)
    take_second = uniform < np.exp(second.log_weight - log_weight)
    return _joined(first, second, direction, take_second, log_weight, inv_mass)


def extend_trajectory(tree, subtree, direction, uniform, inv_mass):
    """The trajectory grown by ``subtree``: biased progressive sampling of the proposal.

    A subtree that turned or diverged inside is not joined (its states are never
    proposed); the trajectory stops with its counters added.
    """
    rejected = subtree.turning | subtree.diverging
    log_weight = np.logaddexp(tree.log_weight, subtree.log_weight)
    take_new = (uniform < np.exp(subtree.log_weight - tree.log_weight)) & ~rejected
    joined = _joined(tree, subtree, direction, take_new, log_weight, inv_mass)
    return joined._replace(
        log_weight=np.where(rejected, tree.log_weight, log_weight),
        turning=np.where(rejected, subtree.turning, joined.turning),
    )
