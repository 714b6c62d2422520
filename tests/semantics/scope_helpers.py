"""A module of plain helpers for test_scope: its globals change between calls."""

SHIFT = 1.0


def shift(x):
    return x + SHIFT
