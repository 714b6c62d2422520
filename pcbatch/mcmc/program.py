"""The No-U-Turn Sampler written for ONE chain, in the Python pcbatch batches.

`build` returns the batched entry point ``run_chain(*chain_state, data, seed,
chain, first_draw, plan)``: warmup and sampling for one chain, every draw in one
loop, so a chain whose trajectory ends early starts its next draw while other
chains are still building trees (cross-trajectory batching). ``chain_state`` is a
`warmup.ChainState` (the host's start, or what the previous call returned, packed),
``data`` the tuple of the data's leaves that ``value_and_grad(q, data)`` receives,
and ``plan`` the run-time schedule (which draws this call runs, the warmup's
windows; see `warmup.START`). The tree is built recursively, as in Hoffman & Gelman's paper:
``build_tree`` of depth ``d`` is two subtrees of depth ``d - 1``.

The leapfrog step is its own function, discovered last, so its block (the
gradient) comes last in block order and chains finish their cheap bookkeeping
before the gradient runs once for all chains that reached it. Writing the leaf's
step inline in ``build_tree`` saves two VM steps per leaf (the call and the
return) but broke this: with warmup, utilization fell from 0.83 to 0.23 (50
chains, 100 + 50 draws). Nothing but what is needed after a recursive call is
live across it (random draws take their dtype from ``energy0``, not from ``q``,
so ``q`` is not saved at every level). The sampler runs under the ``returns_first``
schedule, so chains unwinding their trees all meet before the next descent.

With ``on_draw`` (a host function), the chains that finish a draw report it through
`pcbatch.host_callback` (the progress bar); without it the program has no callback.

Constants (the draw buffer's length, the gradient function, the event shape) are
closure variables of `build`, so pcbatch treats them as constants; the numbers of
draws, the warmup schedule and the data are arguments, so a new value of any of
them runs in the program already compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pcbatch.callbacks import host_callback
from pcbatch.mcmc import metric, trees, warmup
from pcbatch.mcmc import random as rnd

if TYPE_CHECKING:
    from pcbatch.api import BatchedFunction, Context

#: the label of the gradient primitive, for counting gradient evaluations
GRADIENT_LABEL = "value_and_grad(q_new, data)"

#: The per-draw statistics of the draw's Hamiltonian, the columns of the program's
#: ``energies`` output: the log density at the draw, the Hamiltonian there (minus the log
#: density plus the kinetic energy of the momentum the draw was reached with), the energy
#: error (that Hamiltonian minus the one at the draw's start, after the momentum was
#: drawn), and the energy error of largest magnitude over every state the draw's
#: trajectory computed (signed; +inf for a NaN Hamiltonian).
ENERGY_STATISTICS = ("log_density", "energy", "energy_error", "max_energy_error")


def build(
    ctx: Context,
    value_and_grad: Callable[[Any], Any],
    *,
    capacity: int,
    max_tree_depth: int,
    event_shape: tuple[int, ...],
    target_accept: float,
    on_draw: Callable[..., Any] | None = None,
) -> BatchedFunction:
    """Defines the sampler's batched functions in ``ctx``; returns the entry point."""
    size = int(np.prod(event_shape, dtype=np.int64))
    log_target = float(np.log(0.8))

    def momentum(inv_mass, seed, chain, draw, tag):
        z = rnd.normal(seed, chain, draw, tag, size, inv_mass.dtype)
        return metric.momentum(np.reshape(z, event_shape), inv_mass)

    @ctx.batch
    def run_chain(
        q, logp, grad, step, inv_mass, averaging, moments, data, seed, chain, first_draw, plan
    ):  # fmt: skip
        # Draws plan[START] to plan[STOP] - 1 of the run (warmup first), continuing the
        # chain as the previous call left it (`warmup.ChainState`), or as the host made it
        # when plan[START] is 0: then the log density, its gradient and (with warmup) the
        # step size are found here. The plan is one vector, so it costs one register.
        if plan[warmup.START] == 0:
            logp, grad = value_and_grad(q, data)
            if plan[warmup.NUM_WARMUP] > 0:
                # The search's random numbers lie past the warmup's window searches.
                search_draw = first_draw + plan[warmup.TOTAL]
                step = find_step_size(q, data, logp, grad, step, inv_mass, seed, chain, search_draw)
                averaging = warmup.dual_averaging_start(step)
        samples = np.zeros((capacity,) + event_shape, q.dtype)
        leapfrogs = np.zeros(capacity, np.int32)
        depths = np.zeros(capacity, np.int32)
        divergent = np.zeros(capacity, bool)
        accept = np.zeros(capacity, q.dtype)
        steps = np.zeros(capacity, q.dtype)
        energies = np.zeros((capacity, len(ENERGY_STATISTICS)), q.dtype)  # one register
        for i in range(plan[warmup.START], plan[warmup.STOP]):
            q, logp, grad, n, depth, diverging, accept_prob, energy_stats = nuts_draw(
                q, data, logp, grad, step, inv_mass, seed, chain, first_draw + i
            )
            host_callback(on_draw, chain)  # compiled away when on_draw is None
            if i >= plan[warmup.KEEP_FROM]:
                # Row 0 holds the call's first kept draw.
                j = i - np.maximum(plan[warmup.START], plan[warmup.KEEP_FROM])
                samples[j] = q
                leapfrogs[j] = n
                depths[j] = depth
                divergent[j] = diverging
                accept[j] = accept_prob
                steps[j] = step  # the step size this draw took
                energies[j] = energy_stats
            if i < plan[warmup.NUM_WARMUP]:
                averaging = warmup.dual_averaging_update(averaging, accept_prob, target_accept)
                step = np.exp(averaging.log_step)
                # Not chained: a short-circuit would give the second test a block of its own.
                if (plan[warmup.SLOW_START] <= i) & (i < plan[warmup.SLOW_END]):
                    moments = warmup.moments_update(moments, q)
                if np.any(i == plan[warmup.WINDOW_ENDS :]):
                    inv_mass = warmup.regularized_variance(moments)
                    moments = warmup.moments_reset(moments)
                    step = find_step_size(
                        q, data, logp, grad, step, inv_mass, seed, chain, first_draw + i
                    )
                    averaging = warmup.dual_averaging_start(step)
                if i == plan[warmup.NUM_WARMUP] - 1:
                    step = np.exp(averaging.log_step_avg)
        # The chain's state for the next call, packed into one vector: each result is a
        # register of the program, and a backend may carry every register at every step.
        after = warmup.pack(q, logp, grad, step, inv_mass, averaging, moments)
        return samples, leapfrogs, depths, divergent, accept, steps, energies, after

    @ctx.batch
    def nuts_draw(q, data, logp, grad, step, inv_mass, seed, chain, draw):
        p = momentum(inv_mass, seed, chain, draw, rnd.MOMENTUM)
        energy0 = trees.kinetic_energy(p, inv_mass) - logp
        trajectory = trees.root(q, p, logp, grad, energy0)
        depth = 0
        while depth < max_tree_depth:
            coin = rnd.uniform(seed, chain, draw, rnd.DIRECTION, depth, energy0.dtype)
            direction = np.sign(coin - 0.5)  # -1 or +1 in q's dtype (coins are never 0.5)
            q0, p0, grad0 = trees.start_of(trajectory, direction)
            subtree = build_tree(
                q0,
                data,
                p0,
                grad0,
                direction,
                depth,
                step,
                inv_mass,
                energy0,
                seed,
                chain,
                draw,
                trajectory.num_leapfrogs,
                trees.no_proposal(trajectory),
            )
            u = rnd.uniform(seed, chain, draw, rnd.ACCEPT, depth, energy0.dtype)
            trajectory = trees.extend_trajectory(trajectory, subtree, direction, u, inv_mass)
            depth = depth + 1
            if trajectory.turning or trajectory.diverging:
                break
        steps_taken = np.maximum(trajectory.num_leapfrogs, 1).astype(energy0.dtype)
        mean_accept = trajectory.sum_accept / steps_taken
        # `ENERGY_STATISTICS`, in its order
        energy_stats = np.stack(
            [
                trajectory.logp_proposal,
                trajectory.energy_proposal,
                trajectory.energy_proposal - energy0,
                trajectory.max_energy_error,
            ]
        )
        return (
            trajectory.q_proposal,
            trajectory.logp_proposal,
            trajectory.grad_proposal,
            trajectory.num_leapfrogs,
            depth,
            trajectory.diverging,
            mean_accept,
            energy_stats,
        )

    @ctx.batch
    def build_tree(
        q, data, p, grad, direction, depth, step, inv_mass, energy0, seed, chain, draw,
        first_leaf, running,
    ):  # fmt: skip
        # ``running``: the proposal so far of the subtree this call is part of.
        if depth == 0:
            q_new, p_new, logp_new, grad_new = leapfrog(
                q, data, p, grad, direction * step, inv_mass
            )
            u = rnd.uniform(seed, chain, draw, rnd.SUBTREE, first_leaf, energy0.dtype)
            return trees.leaf(q_new, p_new, logp_new, grad_new, energy0, inv_mass, running, u)
        first = build_tree(
            q,
            data,
            p,
            grad,
            direction,
            depth - 1,
            step,
            inv_mass,
            energy0,
            seed,
            chain,
            draw,
            first_leaf,
            running,
        )
        if first.turning or first.diverging:
            return first
        # Only what the merge reads of the first half stays live across the second call.
        kept = trees.first_half(first)
        second = build_tree(
            first.q_outer,
            data,
            first.p_outer,
            first.grad_outer,
            direction,
            depth - 1,
            step,
            inv_mass,
            energy0,
            seed,
            chain,
            draw,
            first_leaf + kept.num_leapfrogs,
            trees.proposal_of(first),
        )
        return trees.merge_subtrees(kept, second, inv_mass)

    @ctx.batch
    def find_step_size(q, data, logp, grad, step, inv_mass, seed, chain, draw):
        # Stan's heuristic: double (or halve) the step until one leapfrog step's
        # acceptance probability crosses 0.8.
        p = momentum(inv_mass, seed, chain, draw, rnd.STEP_SEARCH)
        energy0 = trees.kinetic_energy(p, inv_mass) - logp
        q1, p1, logp1, grad1 = leapfrog(q, data, p, grad, step, inv_mass)
        log_accept = energy0 - (trees.kinetic_energy(p1, inv_mass) - logp1)
        grow = log_accept > log_target
        for _ in range(60):
            step = np.where(grow, 2.0 * step, 0.5 * step)
            q1, p1, logp1, grad1 = leapfrog(q, data, p, grad, step, inv_mass)
            log_accept = energy0 - (trees.kinetic_energy(p1, inv_mass) - logp1)
            if grow != (log_accept > log_target):
                break
        return step

    @ctx.batch
    def leapfrog(q, data, p, grad, step, inv_mass):
        p_half = p + 0.5 * step * grad
        q_new = q + step * metric.velocity(p_half, inv_mass)
        logp_new, grad_new = value_and_grad(q_new, data)
        return q_new, p_half + 0.5 * step * grad_new, logp_new, grad_new

    return run_chain
