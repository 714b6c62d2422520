"""The PyTorch backend: the eager machine with its state in torch tensors.

The VM's registers, stacks and program counters are torch tensors on one device
(the inputs' device when pcbatch picks the backend from ``torch.Tensor``
arguments), and a run's results are torch tensors there, of the dtypes NumPy's
rules give (a float32 input stays float32).

Per-example code means what it means on NumPy, value and dtype (NumPy 2 promotion,
Python numbers weak, ``int / int`` a float64), and may call ``torch`` functions too.
Primitives run as torch operations on the active rows, on the device
(`pcbatch.backends.torch_values`): NumPy calls and operators compute NumPy's result
dtype first and cast to it, where torch's own rules differ (``int / int`` float32 in
torch, its promotion lattice, an integer divided by zero). A primitive that needs what
only NumPy's machinery has (a NumPy function without a torch rule, Python control flow on
a value inside a plain helper) runs on the host copies of its rows instead, with
`pcbatch.backends.batched_array`: NumPy's meaning by construction.
`TorchBackend.host_primitives` names those primitives and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from pcbatch.backends import batched_array
from pcbatch.backends.bounds import index_error
from pcbatch.backends.eager_storage import Register, Stack
from pcbatch.backends.numpy import NumpyBackend, check_example_shape, dummy_array, may_cast
from pcbatch.backends.scalars import BatchedValueError
from pcbatch.backends.torch_values import (
    NUMPY_OF_TORCH,
    TORCH_OF_NUMPY,
    NotNative,
    OneExample,
    TorchBatched,
)
from pcbatch.ir.types import (
    TensorType,
    VariableAllocation,
    flatten,
    is_pattern_node,
    map_pattern,
    rebuild,
)

__all__ = ["TorchBackend"]

#: NumPy's unsigned types torch can hold and convert but not index into or compute with
#: (uint16, uint32: NUTS's random-number counters): the VM keeps them in int64 tensors
#: (every value fits) and hands them out in their own dtype, which computes on the host.
_CARRIED = {np.dtype(np.uint16): torch.uint16, np.dtype(np.uint32): torch.uint32}


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype holding NumPy ``dtype``'s values, or a TypeError naming it."""
    dtype = np.dtype(dtype)
    if dtype in _CARRIED:
        return _CARRIED[dtype]
    if dtype not in TORCH_OF_NUMPY:
        raise TypeError(
            f"TorchBackend cannot hold values of dtype {dtype}: torch has no full support "
            f"for it; use one of {', '.join(str(d) for d in TORCH_OF_NUMPY)}"
        )
    return TORCH_OF_NUMPY[dtype]


def _storage_dtype(dtype: Any) -> torch.dtype:
    """The dtype of the VM's tensors holding values of NumPy ``dtype``."""
    return torch.int64 if np.dtype(dtype) in _CARRIED else torch_dtype(dtype)


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of torch ``dtype`` (bfloat16 and others NumPy lacks: a TypeError)."""
    carried = {t: n for n, t in _CARRIED.items()}
    if dtype in carried:
        return carried[dtype]
    if dtype not in NUMPY_OF_TORCH:
        name = str(dtype).removeprefix("torch.")
        why = (
            "torch supports too few operations on it" if hasattr(np, name)
            else "per-example code means what it means on NumPy, which has no such dtype"
        )
        raise TypeError(
            f"TorchBackend cannot run on torch.{name} tensors: {why}; convert the argument "
            "(say, .to(torch.float32) or .to(torch.int64)) first"
        )
    return NUMPY_OF_TORCH[dtype]


@dataclasses.dataclass
class TorchLanes:
    """Active rows: ``index`` (sorted row numbers, on the device) or None for every row."""

    index: torch.Tensor | None
    count: int
    batch_size: int
    device: torch.device

    def rows(self) -> torch.Tensor:
        if self.index is None:
            return torch.arange(self.batch_size, device=self.device)
        return self.index


class TorchArrays:
    """`pcbatch.backends.eager_storage.EagerArrays` on torch tensors on ``device``: the
    eager machine's registers and stacks are the same classes as on NumPy."""

    converts = True  # Python numbers, NumPy arrays and carried dtypes need converting

    def __init__(self, device):
        self.device = device

    def zeros(self, shape: tuple, dtype: Any) -> torch.Tensor:
        return torch.zeros(shape, dtype=_storage_dtype(dtype), device=self.device)

    def row_numbers(self, size: int) -> torch.Tensor:
        return torch.arange(size, dtype=torch.int64, device=self.device)

    def concatenate(self, arrays: list) -> torch.Tensor:
        return torch.cat(arrays)

    def whole(self, top: torch.Tensor, dtype: Any) -> torch.Tensor:
        return _as_values(top, dtype)

    def rows_of(self, array: torch.Tensor, index: torch.Tensor, dtype: Any) -> torch.Tensor:
        return _as_values(array[index], dtype)

    def storable(self, value: Any, like: torch.Tensor) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):  # a block number, a NumPy value
            return torch.as_tensor(value, dtype=like.dtype, device=like.device)
        return value if value.dtype == like.dtype else value.to(like.dtype)

    def filled(self, value: Any, like: torch.Tensor) -> torch.Tensor:
        return self.storable(value, like).expand(like.shape).clone()

    def to_host(self, value: Any) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)

    def flip(self, value: torch.Tensor, axes: list) -> torch.Tensor:
        return torch.flip(value, axes)

    def wrap_negative(self, index: torch.Tensor, size: int, axis: int) -> torch.Tensor:
        bad = (index < -size) | (index >= size)
        if bool(bad.any()):
            raise index_error(int(index[bad].reshape(-1)[0]), axis, size)
        return torch.where(index < 0, index + size, index)

    def as_index(self, value: Any, like: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(value, device=like.device).to(torch.int64)


def _as_values(tensor: torch.Tensor, dtype: Any) -> torch.Tensor:
    """``tensor`` (storage) in the torch dtype of NumPy ``dtype`` (a carried one differs)."""
    want = torch_dtype(dtype)
    return tensor if tensor.dtype == want else tensor.to(want)


class TorchBackend(NumpyBackend):
    """Runs the eager VM on torch tensors on ``device``, touching only active rows.

    Args:
      device: where the VM's state and the results live (default: torch's default
        device). Chosen automatically, pcbatch uses the arguments' device.

    Types, type inference and the seed's array surface are NumPy's (inherited), so
    a program's types are exactly those it has on NumPy.
    """

    name = "torch"
    gathers_active_rows = True
    measures_stack_depth = True
    variable_class = Register
    reuses_block_runners = False  # `vectorize` decides native or host once per run

    def __init__(self, device: Any = None, safety_checks: bool = True):
        super().__init__(safety_checks)
        self.device = torch.device(device) if device is not None else torch.get_default_device()
        self.arrays = TorchArrays(self.device)
        #: the primitives that ran on the host (NumPy's machinery), by name, with the reason
        self.host_primitives: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"TorchBackend(device={str(self.device)!r})"

    # -- the VM core -------------------------------------------------------
    def create_variable(self, name, alloc, type_, max_stack_depth, batch_size):
        if alloc == VariableAllocation.FULL:
            return Stack(name, type_, batch_size, max_stack_depth, self.arrays)
        return Register(name, type_, batch_size, self.arrays)

    def all_lanes(self, batch_size: int) -> TorchLanes:
        return TorchLanes(None, batch_size, batch_size, self.device)

    def lanes_at(self, program_counter: torch.Tensor, block_index: int) -> TorchLanes:
        size = len(program_counter)
        index = torch.nonzero(program_counter == block_index).flatten()
        if len(index) == size:
            return TorchLanes(None, size, size, self.device)
        return TorchLanes(index, len(index), size, self.device)

    def lanes_of(self, rows, batch_size: int) -> TorchLanes:
        index = torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)
        return TorchLanes(index, len(index), batch_size, self.device)

    def place(self, value, lanes: TorchLanes, type_: TensorType, leading_batch: bool = False):
        """``value`` cast to ``type_`` and broadcast to the lanes' rows, on the device."""
        want = torch_dtype(type_.dtype)
        target = (lanes.count, *type_.shape)
        if isinstance(value, torch.Tensor):
            have = numpy_dtype(value.dtype)
            tensor = value.to(self.device)
        else:
            array = np.asarray(value)
            have = array.dtype
            if have not in TORCH_OF_NUMPY and may_cast(have, np.dtype(type_.dtype)):
                array = array.astype(type_.dtype)  # say, a uint32 constant into int64
            if not array.flags.writeable or any(step < 0 for step in array.strides):
                # a primitive passed its input through, or reversed it (v[::-1]): torch
                # takes neither a read-only array nor a negative stride
                array = array.copy()
            tensor = torch.as_tensor(array, dtype=torch_dtype(array.dtype), device=self.device)
        if tuple(tensor.shape) == target and tensor.dtype == want:
            return tensor
        if leading_batch:
            missing = len(type_.shape) - (tensor.ndim - 1)
            if missing > 0:
                tensor = tensor.reshape(tensor.shape[:1] + (1,) * missing + tensor.shape[1:])
            elif missing == 0:
                check_example_shape(tuple(tensor.shape[1:]), type_.shape)
        if tensor.dtype != want:
            if not may_cast(have, np.dtype(type_.dtype)):
                raise TypeError(f"got dtype {have}, expected {np.dtype(type_.dtype)}")
            tensor = tensor.to(want)
        try:
            return tensor.expand(target)
        except RuntimeError as e:
            raise ValueError(
                f"cannot broadcast shape {tuple(tensor.shape)} to {target}: {e}"
            ) from None

    def gather(self, value, lanes: TorchLanes):
        return value if lanes.index is None else value[lanes.index]

    def vectorize(self, function: Callable) -> Callable:
        """A function written for one example, applied to the active rows' tensors.

        It runs natively (`pcbatch.backends.torch_values`: torch kernels on the device,
        NumPy's meaning); a primitive that needs what only NumPy's machinery has
        (`NotNative`: a NumPy function without a torch rule, Python control flow on a
        value inside a plain helper) runs on the host copies of the rows instead, from
        then on (that decision depends on the code and dtypes only, never on values). The
        native attempt computes nothing the host run does not compute again, so only a
        primitive with side effects (a print) would show it twice.
        """
        native = _native(function)
        host = _on_host(batched_array.vectorize(_naming_torch_calls(function)))
        decided: dict = {}

        @functools.wraps(function)
        def run(*args):
            if "host" not in decided:
                try:
                    return native(*args)
                except (NotNative, BatchedValueError, ValueError) as e:
                    # (NumPy's item assignment turns a BatchedValueError into a ValueError)
                    if isinstance(e, ValueError) and not isinstance(e.__cause__,
                                                                    BatchedValueError):
                        raise
                    decided["host"] = e
                    self.host_primitives[_where(function)] = str(e)
            if torch.is_grad_enabled() and _requires_grad(args):
                raise _gradient_cut(decided["host"])
            with _why_on_host(decided["host"]):
                return host(*args)

        return run

    def adapt(self, function: Callable) -> Callable:
        """A batched primitive written with NumPy (pcbatch's own checks, a user's batched
        helper), run on the host copies of the active rows: NumPy's meaning exactly. Such
        code sees whole batches and may call any NumPy function, which the per-example
        rules of `torch_values` do not cover."""
        return _on_host(function)

    def run_on_dummies(self, primitive_callable: Callable, input_types, fill: Any = 1):
        """The primitive's results (NumPy arrays) on tensors filled with ``fill``."""
        if any(np.dtype(t.dtype) not in TORCH_OF_NUMPY
               for t in input_types for t in flatten(t.tensors)):
            return super().run_on_dummies(primitive_callable, input_types, fill)
        args = [
            map_pattern(lambda t: torch.as_tensor(dummy_array(t.shape, t.dtype, fill),
                                                  device=self.device), t.tensors)
            for t in input_types
        ]
        with np.errstate(all="ignore"):
            return map_pattern(self.to_host, primitive_callable(*args))

    def select(self, condition, if_true, if_false):
        condition = torch.as_tensor(condition, device=self.device)
        if condition.dtype != torch.bool:
            condition = condition != 0
        return torch.where(
            condition,
            torch.as_tensor(if_true, device=self.device),
            torch.as_tensor(if_false, device=self.device),
        )

    def truth(self, condition) -> torch.Tensor:
        condition = torch.as_tensor(condition, device=self.device)
        return condition if condition.dtype == torch.bool else condition != 0

    def count_true(self, mask: torch.Tensor) -> int:
        return int(torch.count_nonzero(mask))

    def lanes_where(self, lanes: TorchLanes, mask: torch.Tensor) -> TorchLanes:
        index = lanes.rows()[mask]
        return TorchLanes(index, len(index), lanes.batch_size, self.device)

    def to_host(self, value) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)

    def copy_out(self, value) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.clone()
        return torch.as_tensor(np.array(value), device=self.device)

    def next_block(self, program_counter: torch.Tensor) -> int:
        return int(program_counter.min())

    # -- types ---------------------------------------------------------------
    def type_of(self, t, preferred_dtype=None) -> TensorType:
        if isinstance(t, torch.Tensor):
            return TensorType(numpy_dtype(t.dtype), tuple(t.shape))
        return super().type_of(t, preferred_dtype)


def _where(function: Callable) -> str:
    """Where the user wrote a primitive: ``file:line``, or its name."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return getattr(function, "__name__", "primitive")
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def _native(function: Callable) -> Callable:
    """``function`` (one example's code) on the batch's tensors, as `TorchBatched` views."""

    def run(*args):
        return _native_output(function(*[_native_input(a) for a in args]))

    return run


def _native_input(value):
    if is_pattern_node(value):
        return rebuild(value, [_native_input(v) for v in value])
    if not isinstance(value, torch.Tensor):  # a NumPy array from the machine's own checks
        value = torch.as_tensor(np.asarray(value))
    return TorchBatched(value)


def _native_output(value):
    if is_pattern_node(value):
        return rebuild(value, [_native_output(v) for v in value])
    if isinstance(value, TorchBatched):
        return value.data
    if isinstance(value, torch.Tensor):  # a tensor made in the code: the same per example
        return value[None]
    # A per-example constant (a Python or NumPy number): a batch of one, which the VM
    # broadcasts, of the dtype NumPy gives it.
    return np.asarray(value)[None]


def _requires_grad(value) -> bool:
    if is_pattern_node(value):
        return any(_requires_grad(v) for v in value)
    return isinstance(value, torch.Tensor) and value.requires_grad


def _gradient_cut(reason: Exception) -> RuntimeError:
    """The error for a value torch's autograd follows reaching a primitive that runs on the
    host: its result would carry no gradient, and a loss built on it would silently miss
    this part of its gradient."""
    return RuntimeError(
        f"this line runs on the host with NumPy on TorchBackend ({reason}), where torch's "
        "autograd cannot follow it, and a value here requires grad: write it with torch "
        "functions (or NumPy functions that TorchBackend runs as torch kernels), or pass "
        "detached inputs (x.detach()) or call under torch.no_grad() if you need no gradient"
    )


def _on_host(function: Callable) -> Callable:
    """``function`` run on NumPy copies of its tensor arguments."""

    @functools.wraps(function)
    def on_host(*args):
        return function(*[_host_pattern(a) for a in args])

    return on_host


def _host_pattern(value):
    """A primitive's argument as NumPy arrays (a full-width read: read-only, as on NumPy)."""
    if is_pattern_node(value):
        return rebuild(value, [_host_pattern(v) for v in value])
    if not isinstance(value, torch.Tensor):
        return value
    array = value.detach().cpu().numpy()
    array.flags.writeable = False  # a primitive must not mutate VM state
    return array


_HOST_REASON = threading.local()


@contextlib.contextmanager
def _why_on_host(reason: Exception):
    previous = getattr(_HOST_REASON, "reason", None)
    _HOST_REASON.reason = reason
    try:
        yield
    finally:
        _HOST_REASON.reason = previous


def _naming_torch_calls(function: Callable) -> Callable:
    """``function``, where a torch function called on a host value says why it is there."""

    @functools.wraps(function)
    def checked(*args):
        try:
            return function(*args)
        except TypeError as e:
            if "BatchedArray" not in str(e) or "Tensor" not in str(e):
                raise
            reason = getattr(_HOST_REASON, "reason", None)
            raise TypeError(
                f"{e}: on TorchBackend this line runs on the host with NumPy, as it uses "
                f"what only NumPy has ({reason}), and torch functions cannot take its "
                "values there; compute that part with torch functions too, or with NumPy "
                "functions (np.sqrt, np.where, ...) only"
            ) from None

    return checked


class _ExamplesOf:
    """A tensor argument whose batch members are `OneExample` views (``dry_run`` of code
    that calls torch functions): each a copy of its own, on the tensor's device."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.shape = tuple(tensor.shape)
        self.ndim = tensor.ndim

    def __getitem__(self, i: int) -> OneExample:
        return OneExample(self.tensor[i : i + 1].detach().clone())


def examples_of(value: Any) -> Any:
    """``value``'s tensors as sources of `OneExample` views, for ``dry_run``."""
    if is_pattern_node(value):
        return rebuild(value, [examples_of(v) for v in value])
    if isinstance(value, torch.Tensor):
        return _ExamplesOf(value) if value.ndim else OneExample(value.detach().clone()[None])
    return value


def example_result(value: Any) -> Any:
    """One example's result of a ``dry_run`` on `OneExample` views, as NumPy values."""
    if is_pattern_node(value):
        return rebuild(value, [example_result(v) for v in value])
    if isinstance(value, TorchBatched):
        return value.data[0].detach().cpu().numpy()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value


def calls_torch_on_numpy(error: Exception) -> bool:
    """Whether ``error`` is a torch function refusing a NumPy value."""
    text = str(error)  # "must be Tensor, not numpy.float64", "invalid combination ... numpy"
    return isinstance(error, TypeError) and "Tensor" in text and "numpy." in text
