"""NumPy and Torch run one implementation of the eager machine's registers and stacks
(`pcbatch.backends.eager_storage`), each over its own array operations."""

from __future__ import annotations

import numpy as np
import pytest

from pcbatch.backends.eager_storage import Register, Stack
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.ir.types import TensorType, VariableAllocation

FLOATS = TensorType(np.dtype(np.float64), (2,))


def _variables(backend):
    register = backend.create_variable("r", VariableAllocation.REGISTER, FLOATS, 4, 3)
    stack = backend.create_variable("s", VariableAllocation.FULL, FLOATS, 4, 3)
    return register, stack


def _exercise(backend, to_host):
    register, stack = _variables(backend)
    some, every = backend.lanes_of(np.array([0, 2]), 3), backend.all_lanes(3)
    stack.update(backend.place(np.ones((3, 2)), every, FLOATS), every)
    stack.push(backend.place(np.full((2, 2), 5.0), some, FLOATS), some)
    stack.save(some)  # pushes the top, keeps it
    assert to_host(stack.read(every)).tolist() == [[5, 5], [1, 1], [5, 5]]
    stack.pop(some)
    stack.pop(some)
    assert to_host(stack.read(every)).tolist() == [[1, 1]] * 3
    assert stack.high_water == 2
    register.update(backend.place(7.0, every, FLOATS), every)
    assert to_host(register.read(some)).tolist() == [[7, 7]] * 2
    return register, stack


def test_numpy_variables_are_the_shared_classes():
    register, stack = _exercise(NumpyBackend(), np.asarray)
    assert isinstance(register, Register) and isinstance(stack, Stack)


def test_torch_variables_are_the_same_classes_as_numpys():
    torch = pytest.importorskip("torch")
    from pcbatch.backends.torch import TorchBackend

    register, stack = _exercise(TorchBackend("cpu"), lambda t: t.numpy())
    assert type(register) is Register and type(stack) is Stack
    assert isinstance(stack.top, torch.Tensor)


def test_a_save_that_grows_the_stack_lands_in_the_grown_stack():
    backend = NumpyBackend()
    stack = backend.create_variable("s", VariableAllocation.FULL, FLOATS, 64, 2)
    every = backend.all_lanes(2)
    for value in range(10):
        stack.update(backend.place(float(value), every, FLOATS), every)
        stack.save(every)
    for value in reversed(range(10)):
        stack.pop(every)
        assert np.asarray(stack.read(every)).tolist() == [[value, value]] * 2
