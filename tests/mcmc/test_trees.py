"""The per-chain tree arithmetic of `pcbatch.mcmc.trees`, on hand-picked momenta."""

from __future__ import annotations

import numpy as np

from pcbatch.mcmc import trees


def _halves(p_inner, p_middle, p_last):
    """A two-state first half (``p_inner`` then ``p_middle``) and a one-state second half."""
    first = trees.FirstHalf(p_inner, p_middle, p_inner + p_middle, np.int32(2), 2.0, 0.0)
    zero = np.zeros_like(p_last)
    second = trees.Subtree(
        zero, p_last, zero, p_last, zero, 0.0, zero, 0.0, 0.0, p_last, False, False,
        np.int32(1), 1.0, 0.0,
    )  # fmt: skip
    return first, second


def _merged_turning(*momenta, inv_mass=(1.0, 1.0)):
    halves = _halves(*map(np.array, momenta))
    return bool(trees.merge_subtrees(*halves, np.array(inv_mass)).turning)


def test_the_criterion_sums_momenta_by_the_trapezoid_rule():
    # Plain sum (1, 0) + (1, -0.7) + (0, 1) = (2, 0.3): both ends still point along it.
    # Without half of each end it is (1.5, -0.2): the last state points against it.
    assert _merged_turning((1.0, 0.0), (1.0, -0.7), (0.0, 1.0))


def test_momenta_that_keep_their_direction_do_not_turn():
    assert not _merged_turning((1.0, 0.2), (1.0, 0.0), (1.0, -0.2))


def test_the_criterion_reads_velocities_through_the_inverse_mass():
    momenta = (1.0, 0.0), (1.0, -0.7), (0.2, 1.0)
    assert not _merged_turning(*momenta)
    # A larger second inverse mass makes the last state's velocity point against the sum.
    assert _merged_turning(*momenta, inv_mass=(1.0, 10.0))


def test_the_criterion_does_not_depend_on_which_end_is_earlier():
    forward = _merged_turning((1.0, 0.0), (1.0, -0.7), (0.0, 1.0))
    backward = _merged_turning((0.0, 1.0), (1.0, -0.7), (1.0, 0.0))
    assert forward == backward
