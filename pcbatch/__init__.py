"""pcbatch: program-counter autobatching for NumPy, JAX and TensorFlow.

Write a function for one example; pcbatch runs it over a whole batch, every
batch member a thread with its own program counter.
"""

from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import (
    BatchSizeError,
    PcbatchError,
    StackOverflowError,
    TypeInferenceError,
    VerificationError,
)
from pcbatch.ir.types import TensorType, Type, VariableAllocation
from pcbatch.profiling import Profile, profile
from pcbatch.vm.machine import StepLimitError
from pcbatch.vm.runner import run

__all__ = [
    "BatchSizeError",
    "NumpyBackend",
    "PcbatchError",
    "Profile",
    "StackOverflowError",
    "StepLimitError",
    "TensorType",
    "Type",
    "TypeInferenceError",
    "VariableAllocation",
    "VerificationError",
    "profile",
    "run",
]

__version__ = "0.1.0"
