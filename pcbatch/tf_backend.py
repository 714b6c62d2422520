"""Seed-compatible name for the TensorFlow backend (real home: ``pcbatch.backends.tensorflow``).

Importing this module imports TensorFlow.
"""

from pcbatch.backends.tensorflow import TensorFlowBackend

__all__ = ["TensorFlowBackend"]
