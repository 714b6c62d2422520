"""pcbatch: program-counter autobatching for NumPy, JAX and TensorFlow.

Write a function for one example; pcbatch runs it over a whole batch, every
batch member a thread with its own program counter.

The public API is what ``__all__`` names here and in the modules the documentation
names (``pcbatch.mcmc.nuts``, ``pcbatch.backends.jax``, ``pcbatch.dsl``, the seed's
module names below, ...), each with an ``__all__`` of its own; the rest of the package
(``pcbatch.ir``, ``pcbatch.passes``, ``pcbatch.vm``, ...) is internal and may change.
"""

import importlib.util as _importlib_util

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
    StaticValueError,
    TypeInferenceError,
    UncheckedFailureError,
    VerificationError,
)
from pcbatch.frontend.runtime import batched_primitive, sync, truthy
from pcbatch.ir.types import TensorType, Type, VariableAllocation
from pcbatch.profiling import Profile, profile
from pcbatch.vm.failures import StepLimitError
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
    "StaticValueError",
    "StepLimitError",
    "TensorType",
    "Type",
    "TypeInferenceError",
    "UncheckedFailureError",
    "VariableAllocation",
    "VerificationError",
    "batched_primitive",
    "host_callback",
    "profile",
    "run",
    "sync",
    "truthy",
]
# The compiled backends import their library when first used, and are exported where
# it is installed (``from pcbatch import *`` then imports it).
if _importlib_util.find_spec("jax") is not None:
    __all__ += ["JaxBackend"]
if _importlib_util.find_spec("tensorflow") is not None:
    __all__ += ["TensorFlowBackend"]
if _importlib_util.find_spec("torch") is not None:
    __all__ += ["TorchBackend"]

__version__ = "0.1.0"


#: The seed's module names, importable as attributes after ``import pcbatch`` (imported
#: on first use: ``tf_backend`` and ``xla`` import TensorFlow).
_SEED_MODULES = (
    "allocation_strategy",
    "dsl",
    "frontend",
    "instructions",
    "liveness",
    "lowering",
    "numpy_backend",
    "tf_backend",
    "type_inference",
    "virtual_machine",
    "xla",
)


def __getattr__(name: str):
    # Compiled backends import their library only when asked for (NumPy users never pay).
    if name == "JaxBackend":
        from pcbatch.backends.jax import JaxBackend

        return JaxBackend
    if name == "TensorFlowBackend":
        from pcbatch.backends.tensorflow import TensorFlowBackend

        return TensorFlowBackend
    if name == "TorchBackend":
        from pcbatch.backends.torch import TorchBackend

        return TorchBackend
    if name in _SEED_MODULES:
        import importlib

        return importlib.import_module(f"pcbatch.{name}")
    raise AttributeError(f"module 'pcbatch' has no attribute {name!r}")
