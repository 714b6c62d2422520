"""Seed-compatible name for the NumPy backend (real home: ``pcbatch.backends.numpy``)."""

from pcbatch.backends.numpy import NumpyBackend, RegisterVariable, StackVariable

__all__ = ["NumpyBackend", "RegisterVariable", "StackVariable"]
