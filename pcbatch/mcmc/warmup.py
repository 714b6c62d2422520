"""Warmup: Stan's adaptation windows (host side) and per-chain adaptation state.

Step size: dual averaging (Hoffman & Gelman 2014, section 3.2.1) toward a target
acceptance statistic, restarted at every mass-matrix update. Mass matrix:
diagonal, the regularized variance of the draws in each slow window (Welford's
running moments), or dense, their regularized covariance (`pcbatch.mcmc.metric`).
Windows follow Stan's defaults: a fast initial buffer (75 draws), slow windows
doubling from 25, a fast terminal buffer (50), shrunk proportionally (15% / 75% /
10%) when warmup is too short for them.

The per-chain helpers are written for one chain, with no Python control flow
on values, so pcbatch runs them as batched primitives.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from pcbatch.mcmc import metric

# Dual averaging constants (Stan's and NumPyro's defaults).
_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75

DualAveraging = collections.namedtuple(
    "DualAveraging", ["log_step", "log_step_avg", "error_avg", "anchor", "count"]
)
Moments = collections.namedtuple("Moments", ["mean", "m2", "count"])

#: a chain between two calls of the sampler's program: its position (with the log
#: density and gradient there) and its adaptation so far
ChainState = collections.namedtuple(
    "ChainState", ["q", "logp", "grad", "step", "inv_mass", "averaging", "moments"]
)

#: The program's run-time plan is one int32 vector: the call's first draw and the draw
#: it stops before (counted from the run's first, warmup included), the warmup's length,
#: its slow window, the draw whose stream the initial step-size search uses (``TOTAL``:
#: the warmup's length, past its windows' searches), the first draw kept in the draw
#: buffer (the warmup's length, or 0 to keep the warmup draws too) and the mass-matrix
#: windows' last draws (padded with -1 to `MAX_WINDOWS`). Its entries, by index:
START, STOP, NUM_WARMUP, SLOW_START, SLOW_END, TOTAL, KEEP_FROM, WINDOW_ENDS = range(8)

#: at most this many mass-matrix windows (Stan's doubling windows: 27 fit in 2**31 draws)
MAX_WINDOWS = 32


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Which warmup draws feed the mass matrix (``slow_start <= i < slow_end``) and after
    which draws it is updated (``window_ends``; empty when warmup is too short)."""

    slow_start: int
    slow_end: int
    window_ends: tuple


def schedule(num_warmup: int, init_buffer=75, term_buffer=50, base_window=25) -> Schedule:
    """Stan's windowed adaptation schedule for ``num_warmup`` draws."""
    if num_warmup < 20:
        return Schedule(0, 0, ())
    if init_buffer + base_window + term_buffer > num_warmup:
        init_buffer = int(0.15 * num_warmup)
        term_buffer = int(0.1 * num_warmup)
        base_window = num_warmup - init_buffer - term_buffer
    slow_end = num_warmup - term_buffer
    ends, start, size = [], init_buffer, base_window
    while start < slow_end:
        end = start + size
        if end + 2 * size > slow_end:  # the next window would not fit: stretch this one
            end = slow_end
        ends.append(end - 1)
        start, size = end, 2 * size
    return Schedule(init_buffer, slow_end, tuple(ends))


def plan(
    start: int, stop: int, num_warmup: int, total: int, keep_from=None, adapt_mass: bool = True
) -> np.ndarray:
    """The program's plan (see `START`) for draws ``start`` to ``stop - 1`` of a run with
    ``num_warmup`` warmup draws, ``total`` its `TOTAL`, keeping draws from ``keep_from``
    on (None: ``num_warmup``): one vector shared by every chain (a leading axis of size 1),
    so that any lengths run in the same compiled program. Without ``adapt_mass`` the plan
    has no mass-matrix window: warmup adapts the step size only, and the inverse mass
    stays as it started."""
    windows = schedule(num_warmup) if adapt_mass else Schedule(0, 0, ())
    keep_from = num_warmup if keep_from is None else keep_from
    head = [start, stop, num_warmup, windows.slow_start, windows.slow_end, total, keep_from]
    ends = list(windows.window_ends) + [-1] * (MAX_WINDOWS - len(windows.window_ends))
    return np.array([head + ends], np.int32)


def start_state(q, step_size, dtype, inv_mass=None, dense=False) -> ChainState:
    """The chains' state before their first draw (``q``: ``[chains, size]``, of the
    backend's array type): the program computes the log density and gradient, and the
    adaptation starts from these values (``inv_mass``: ``[chains, size]``, or with
    ``dense`` ``[chains, 2, size, size]`` as `metric` keeps it; None: ones, or the
    identity)."""
    chains, size = int(q.shape[0]), tuple(int(d) for d in q.shape[1:])
    zeros = np.zeros(chains, dtype)
    vector = np.zeros((chains, *size), dtype)
    if inv_mass is None:
        eye = np.eye(int(np.prod(size, dtype=np.int64)), dtype=dtype)
        inv_mass = np.tile(eye, (chains, 2, 1, 1)) if dense else vector + 1.0
    m2 = np.zeros((chains, *size, *size), dtype) if dense else vector
    return ChainState(
        q,
        zeros,
        vector,
        np.asarray(step_size, dtype),
        np.asarray(inv_mass, dtype),
        DualAveraging(zeros, zeros, zeros, zeros, zeros),
        Moments(vector, m2, zeros),
    )


def pack(q, logp, grad, step, inv_mass, averaging, moments):
    """ONE chain's `ChainState` as one vector in ``q``'s dtype (`unpack` undoes it)."""
    vectors = [v.reshape(-1) for v in (q, grad, inv_mass, moments.mean, moments.m2)]
    scalars = np.stack([logp, step, *averaging, moments.count]).astype(q.dtype)
    return np.concatenate([*(v.astype(q.dtype) for v in vectors), scalars])


def unpack(packed, event_shape: tuple, reshape, dense: bool = False) -> ChainState:
    """The chains' `ChainState` from `pack`'s vectors (``[chains, 5 * size + 8]``, of the
    backend's array type; ``reshape(x, shape)`` of its library; with a ``dense`` metric
    (a flat state) the inverse mass and the second moments are matrices)."""
    chains = int(packed.shape[0])
    size = int(np.prod(event_shape, dtype=np.int64))
    matrix = (size, size)
    shapes = [event_shape, event_shape, (2, *matrix) if dense else event_shape, event_shape,
              matrix if dense else event_shape]  # fmt: skip
    parts, offset = [], 0
    for shape in shapes:
        length = int(np.prod(shape, dtype=np.int64))
        parts.append(reshape(packed[:, offset : offset + length], (chains, *shape)))
        offset += length
    scalar = lambda k: packed[:, offset + k]
    return ChainState(
        parts[0],
        scalar(0),
        parts[1],
        scalar(1),
        parts[2],
        DualAveraging(*(scalar(k) for k in range(2, 7))),
        Moments(parts[3], parts[4], scalar(7)),
    )


def dual_averaging_start(step_size):
    zero = step_size * 0.0
    return DualAveraging(np.log(step_size), zero, zero, np.log(10.0 * step_size), zero)


def dual_averaging_update(state, accept_prob, target):
    """One dual-averaging update from a draw's mean acceptance statistic."""
    count = state.count + 1.0
    weight = 1.0 / (count + _T0)
    error_avg = (1.0 - weight) * state.error_avg + weight * (target - accept_prob)
    log_step = state.anchor - np.sqrt(count) / _GAMMA * error_avg
    decay = count**-_KAPPA
    log_step_avg = decay * log_step + (1.0 - decay) * state.log_step_avg
    return DualAveraging(log_step, log_step_avg, error_avg, state.anchor, count)


def moments_reset(state):
    """Moments of no draw yet, shaped as ``state``'s (a dense metric's are matrices)."""
    return Moments(state.mean * 0.0, state.m2 * 0.0, state.count * 0.0)


def moments_update(state, position):
    """Welford's update; the second moments are a matrix where the metric is dense."""
    count = state.count + 1.0
    delta = position - state.mean
    mean = state.mean + delta / count
    if state.m2.ndim == position.ndim:
        return Moments(mean, state.m2 + delta * (position - mean), count)
    return Moments(mean, state.m2 + delta[:, None] * (position - mean)[None, :], count)


def regularized_variance(state):
    """Stan's shrunk (co)variance estimate: the new inverse mass matrix, diagonal or, with
    matrix moments, dense (as `metric` keeps it)."""
    n = state.count
    variance = state.m2 / np.maximum(n - 1.0, 1.0)
    shrink = 1e-3 * (5.0 / (n + 5.0))
    if state.m2.ndim == state.mean.ndim:
        return (n / (n + 5.0)) * variance + shrink
    eye = np.eye(state.m2.shape[-1], dtype=state.m2.dtype)
    return metric.dense((n / (n + 5.0)) * variance + shrink * eye)
