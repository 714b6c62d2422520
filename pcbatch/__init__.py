"""pcbatch: program-counter autobatching for NumPy, JAX and TensorFlow.

Write a function for one example; pcbatch runs it over a whole batch, every
batch member a thread with its own program counter.
"""

from pcbatch.api import BatchedFunction, Context
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.callbacks import HostCallbackWarning, host_callback
from pcbatch.errors import (
    AutobatchSyntaxError,
    BatchSizeError,
    ConditionShapeError,
    LaneStatus,
    NarrowingWarning,
    PcbatchError,
    StackOverflowError,
    TypeInferenceError,
    UncheckedFailureError,
    VerificationError,
)
from pcbatch.frontend.runtime import sync, truthy
from pcbatch.ir.types import TensorType, Type, VariableAllocation
from pcbatch.profiling import Profile, profile
from pcbatch.vm.machine import StepLimitError
from pcbatch.vm.runner import run

__all__ = [
    "AutobatchSyntaxError",
    "BatchedFunction",
    "Context",
    "BatchSizeError",
    "ConditionShapeError",
    "HostCallbackWarning",
    "LaneStatus",
    "NarrowingWarning",
    "NumpyBackend",
    "PcbatchError",
    "Profile",
    "StackOverflowError",
    "StepLimitError",
    "TensorType",
    "Type",
    "TypeInferenceError",
    "UncheckedFailureError",
    "VariableAllocation",
    "VerificationError",
    "host_callback",
    "profile",
    "run",
    "sync",
    "truthy",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    # pcbatch.JaxBackend imports JAX only when asked for (NumPy users never pay for it).
    if name == "JaxBackend":
        from pcbatch.backends.jax import JaxBackend

        return JaxBackend
    raise AttributeError(f"module 'pcbatch' has no attribute {name!r}")
