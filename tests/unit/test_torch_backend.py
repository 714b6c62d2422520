"""TorchBackend: the eager machine on torch tensors, meaning what NumPy means (issue 29).

The semantic suite runs on Torch through `tests.backends` with NumPy arguments; these
tests pass ``torch.Tensor`` arguments: the backend is chosen from them, results stay
on their device with NumPy's dtypes, and what NumPy's meaning cannot cover on torch is
refused with an error saying what to change.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pcbatch

torch = pytest.importorskip("torch")

ctx = pcbatch.Context()


@ctx.batch
def collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps, steps / 2


@ctx.batch
def depth(n):
    if n <= 0:
        return 0
    return 1 + depth(n - 1)


@ctx.batch
def scaled(x, n):
    total = x * 0
    for i in range(n):
        total = total + np.sqrt(x) / n + i / 2
    return total, np.where(x > 1, x, -x), x * 2


@ctx.batch
def safe_log(x):
    if x > 0:
        return np.log(x)
    return x * 0


@ctx.batch
def torch_and_numpy(x, k):
    # torch functions (pointwise, and a reduction over the example's own axis) beside
    # NumPy calls and Python operators, under data-dependent control flow
    total = torch.zeros_like(x[0])
    while k > 0:
        y = torch.where(x > 0, torch.sin(x), np.exp(x) / k)
        total = total + torch.sum(torch.clamp(y, min=-0.5), dim=0) + k / 2
        k -= 1
    return total, torch.tanh(total) * x.shape[0]


@ctx.batch
def torch_beside_python_numbers(x, n):
    total = x * 0
    for i in range(n):
        half = i / 2  # a Python float per example
        total = total + torch.where(x > half, x, half) + torch.clamp(x, max=i)
    return total


@ctx.batch
def calls_nonzero(x):
    return torch.nonzero(x)


def _same(torch_result, numpy_result) -> None:
    for got, want in zip(pcbatch.ir.types.flatten(torch_result),
                         pcbatch.ir.types.flatten(numpy_result)):
        assert isinstance(got, torch.Tensor)
        got = got.numpy()
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)


def test_torch_arguments_choose_the_torch_backend_and_get_numpys_results():
    n = torch.tensor([1, 6, 7, 12])
    _same(collatz(n), collatz(n.numpy()))
    _same(depth(n), depth(n.numpy()))


def test_dtypes_follow_numpy_not_torch():
    # Torch would give float32 for int / int and promote differently; NumPy's rules hold.
    x, n = torch.tensor([0.5, 4.0], dtype=torch.float32), torch.tensor([1, 3])
    total, chosen, doubled = scaled(x, n)
    assert total.dtype == torch.float64  # i / 2 is a float64 in Python's and NumPy's terms
    assert chosen.dtype == doubled.dtype == torch.float32  # the weak 2 keeps float32
    _same((total, chosen, doubled), scaled(x.numpy(), n.numpy()))
    assert collatz(torch.tensor([6]))[1].dtype == torch.float64


def test_results_stay_on_the_inputs_device():
    x = torch.tensor([1.0, 2.0], device="cpu")
    (result, *_) = scaled(x, 2)
    assert result.device == x.device
    assert pcbatch.TorchBackend().device == torch.get_default_device()


def test_backend_by_name_and_object_take_numpy_arguments():
    n = np.array([3, 5])
    _same(depth(n, backend="torch"), depth(n))
    _same(depth(n, backend=pcbatch.TorchBackend(device="cpu")), depth(n))


def test_primitives_see_only_the_active_threads_rows():
    x = torch.tensor([-1.0, 4.0, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.log of a negative row would warn
        _same(safe_log(x), safe_log(x.numpy()))


def test_a_stack_overflow_measures_the_depth_as_on_numpy():
    with pytest.raises(pcbatch.StackOverflowError) as numpy_error:
        depth(np.array([3, 40]), max_stack_depth=8)
    with pytest.raises(pcbatch.StackOverflowError) as error:
        depth(torch.tensor([3, 40]), max_stack_depth=8)
    assert str(error.value) == str(numpy_error.value)


def test_refilled_lanes_give_numpys_results():
    n = torch.arange(1, 30)
    _same(collatz.map(n, width=4, group=2), collatz.map(n.numpy(), width=4, group=2))


def test_torch_functions_on_per_example_values_match_dry_run():
    x = torch.tensor([[0.5, -1.0, 2.0], [-3.0, 0.25, 1.0], [1.5, 1.5, -0.5]])
    k = torch.tensor([1, 3, 0])
    batched, dry = torch_and_numpy(x, k), torch_and_numpy(x, k, dry_run=True)
    for got, want in zip(batched, dry):
        assert got.dtype == want.dtype == torch.float64  # k / 2 makes the total float64
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    assert x.tolist()[0] == [0.5, -1.0, 2.0] and k.tolist() == [1, 3, 0]


@ctx.batch
def numpy_meaning(x, n, m, small):
    # Torch would give float32 for n / m and np.sqrt(n), raise on n // 0, promote
    # float32 * int64 to float32 and keep -0.0 % 1.0 negative; NumPy's meaning holds.
    return (np.sqrt(x) * 2, x * n, n / m, np.sqrt(n * n), n // m, n % m, np.fmod(n, m),
            -x % 1.0, np.float32(1.5) * small, small + 3, np.maximum(x, 0.5).sum(),
            np.where(n > 2, small, 0.5), np.clip(n, 0, 3), np.mean(n))


def test_numpy_calls_keep_numpys_values_and_dtypes():
    x = torch.tensor([0.0, 4.0, 2.25], dtype=torch.float32)
    n, m = torch.tensor([7, -7, 3]), torch.tensor([2, 0, -1])
    small = torch.tensor([1, 200, 255], dtype=torch.uint8)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        expected = numpy_meaning(x.numpy(), n.numpy(), m.numpy(), small.numpy())
    backend = pcbatch.TorchBackend()
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        got = numpy_meaning(x, n, m, small, backend=backend)
    assert not backend.host_primitives  # every primitive ran as torch operations
    assert [g.dtype for g in got][:4] == [torch.float32, torch.float64, torch.float64,
                                          torch.float64]
    _same(got, expected)
    assert str(got[7][0].item()) == "0.0"  # not -0.0


@ctx.batch
def python_int_beside_uint8(small, k):
    return small + k


def test_a_python_int_out_of_the_arrays_range_is_numpys_overflow_error():
    small = torch.tensor([1, 2], dtype=torch.uint8)
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        python_int_beside_uint8(small, 300)


@ctx.batch
def cube_root(x):
    return np.cbrt(x) * 2


@ctx.batch
def torch_and_host_only_numpy(x):
    return torch.sin(np.cbrt(x))


def test_a_numpy_function_without_a_torch_rule_runs_on_the_host_as_numpy():
    backend = pcbatch.TorchBackend()
    x = torch.tensor([8.0, -27.0], dtype=torch.float32)
    _same(cube_root(x, backend=backend), cube_root(x.numpy()))
    assert list(backend.host_primitives.values()) == ["np.cbrt"]


def test_torch_beside_a_numpy_function_only_the_host_has_says_why():
    with pytest.raises(pcbatch.PcbatchError, match=r"in torch_and_host_only_numpy(.|\n)*"
                       r"runs on the host with NumPy(.|\n)*np.cbrt"):
        torch_and_host_only_numpy(torch.tensor([1.0]))


def test_python_numbers_reach_torch_functions_as_torch_takes_them():
    # torch.where(c, float32_x, 0.5) is float32 in torch: a Python number is weak there too
    x, n = torch.tensor([0.25, 3.0], dtype=torch.float32), torch.tensor([2, 3])
    batched, dry = torch_beside_python_numbers(x, n), torch_beside_python_numbers(x, n,
                                                                                  dry_run=True)
    assert batched.dtype == dry.dtype == torch.float32
    torch.testing.assert_close(batched, dry, rtol=0, atol=0)


def test_a_torch_function_torch_cannot_batch_fails_at_the_users_line():
    with pytest.raises(pcbatch.PcbatchError, match=r"test_torch_backend.py:\d+ in calls_nonzero"
                       r"(.|\n)*torch.nonzero on per-example values(.|\n)*torch.func.vmap"):
        calls_nonzero(torch.tensor([[1.0, 0.0]]))


def test_a_dtype_numpy_lacks_is_refused():
    with pytest.raises(TypeError, match=r"depth\(\): argument 'n': (.|\n)*torch.bfloat16 "
                       r"tensors(.|\n)*to\(torch.float32\)"):
        depth(torch.tensor([1, 2], dtype=torch.bfloat16))


@ctx.batch
def halve_down(x, n):
    while n > 0:
        x = x / 2 + np.sqrt(n)
        n -= 1
    return x, n / 2


def test_dry_run_on_torch_arguments_means_numpy_and_leaves_them_alone():
    # Per example, n is a NumPy value: n / 2 is float64, and n -= 1 rebinds n instead of
    # decrementing the caller's tensor in place (as a torch scalar view would).
    x, n = torch.tensor([1.0, 2.0], dtype=torch.float32), torch.tensor([1, 3])
    expected = halve_down(x.numpy(), n.numpy(), dry_run=True)
    dry = halve_down(x, n, dry_run=True)
    assert n.tolist() == [1, 3] and x.tolist() == [1.0, 2.0]
    _same(dry, expected)
    _same(halve_down(x, n), expected)
    assert n.tolist() == [1, 3] and x.tolist() == [1.0, 2.0]
