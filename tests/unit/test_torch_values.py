"""Torch's per-example values (`pcbatch.backends.torch_values`) against NumPy, op by op.

Every ufunc the Torch backend runs as a torch kernel, on every pair of dtypes it holds
and beside Python scalars (weak, NEP 50), and the array functions and methods it runs
natively, must give NumPy's dtype and values (NaN, signed zero and integer edge values
included) or NumPy's error; what it leaves to the host (`NotNative`) is skipped here:
the host is NumPy. A value differing in its last float32 bit is allowed (torch's own
kernels).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pcbatch.backends.torch_values import NotNative, TorchBatched  # noqa: E402

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64]
SCALARS = (3, -2, 2.5, 300, True, 0, -1, -0.0)


def _values(dtype) -> np.ndarray:
    """Six values per dtype: zeros, small ones and the edges (extremes, inf, NaN, -0.0)."""
    if dtype == np.bool_:
        return np.array([True, False, True, False, True, False])
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return np.array([0, 1, 3, info.max, info.min, 7 if info.min == 0 else -5], dtype=dtype)
    return np.array([0.0, -0.0, 1.5, -2.5, np.inf, np.nan], dtype=dtype)


def _outcome(function, *args):
    """(result as NumPy, None) or (None, the exception's type); None if not native."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            result = function(*args)
        except NotNative:
            return None
        except Exception as error:  # noqa: BLE001 - compared with NumPy's own outcome
            return None, type(error)
    if isinstance(result, TorchBatched):
        result = result.data.numpy()
    return np.asarray(result), None


def _mismatch(got, want, rtol=0.0) -> str | None:
    if got is None:
        return None  # runs on the host: NumPy itself
    (g, g_error), (w, w_error) = got, want
    if g_error or w_error:
        return None if bool(g_error) == bool(w_error) else f"errors {g_error} / {w_error}"
    if g.dtype != w.dtype or g.shape != w.shape:
        return f"{g.dtype}{g.shape} != {w.dtype}{w.shape}"
    if w.dtype.kind == "f":
        zeros = (w == 0) & (g == 0)
        if not np.array_equal(np.signbit(g[zeros]), np.signbit(w[zeros])):
            return f"signed zeros {g} != {w}"
        atol = 1e-6 if w.dtype == np.float32 else 0.0
        return None if np.allclose(g, w, rtol=max(rtol, 1e-6), atol=atol, equal_nan=True) \
            else f"{g} != {w}"
    return None if np.array_equal(g, w) else f"{g} != {w}"


def _ufunc_cases():
    for ufunc in (getattr(np, n) for n in dir(np)):
        if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1 or ufunc.nin not in (1, 2):
            continue
        if ufunc.nin == 1:
            yield from ((ufunc, (d,)) for d in DTYPES)
        else:
            yield from ((ufunc, pair) for pair in itertools.product(DTYPES, DTYPES))
            yield from ((ufunc, (d, s)) for d in DTYPES for s in SCALARS)


def test_every_native_ufunc_gives_numpys_dtype_values_and_errors():
    mismatches = []
    for ufunc, operands in _ufunc_cases():
        arrays = [o if type(o) in (int, float, bool) else _values(o) for o in operands]
        if len(arrays) == 2 and isinstance(arrays[1], np.ndarray):
            arrays[1] = arrays[1][::-1].copy()  # every value meets several others
        batched = [TorchBatched(torch.as_tensor(a)) if isinstance(a, np.ndarray) else a
                   for a in arrays]
        problem = _mismatch(_outcome(ufunc, *batched), _outcome(ufunc, *arrays))
        if problem:
            mismatches.append(f"np.{ufunc.__name__}{operands}: {problem}")
    assert not mismatches, "\n".join(mismatches)


FUNCTIONS = {
    "sum": lambda x: np.sum(x), "sum over an axis": lambda x: np.sum(x, axis=0),
    "sum keepdims": lambda x: np.sum(x, axis=-1, keepdims=True),
    "prod": lambda x: np.prod(x, axis=1), "mean": lambda x: np.mean(x),
    "mean of axes": lambda x: np.mean(x, axis=(0, 1)), "max": lambda x: np.max(x, axis=0),
    "min": lambda x: np.min(x), "any": lambda x: np.any(x, axis=1), "all": lambda x: np.all(x),
    "std": lambda x: np.std(x), "var ddof": lambda x: np.var(x, axis=1, ddof=1),
    "argmax": lambda x: np.argmax(x), "argmin": lambda x: np.argmin(x, axis=0),
    "cumsum": lambda x: np.cumsum(x), "cumprod": lambda x: np.cumprod(x, axis=0),
    "where": lambda x: np.where(x > 1, x, 0.5), "where int": lambda x: np.where(x > 1, 2, x),
    "clip": lambda x: np.clip(x, 1, 50), "clip above": lambda x: np.clip(x, 0.5, None),
    "round": lambda x: np.round(x, 1), "stack": lambda x: np.stack([x, x * 2], axis=1),
    "concatenate": lambda x: np.concatenate([x, x], axis=-1),
    "dot": lambda x: np.dot(x[0], x[1]), "matmul": lambda x: x.T @ x,
    "norm": lambda x: np.linalg.norm(x[0]), "reshape": lambda x: np.reshape(x, (2, 3)),
    "squeeze": lambda x: np.squeeze(x[:1]), "transpose": lambda x: x.T,
    "negative step": lambda x: x[1:, ::-1], "item": lambda x: x[0, 0].item(),
    "astype": lambda x: x.astype(np.int16).astype(np.float32) * 2,
    "len": lambda x: x * len(x),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_native_array_functions_give_numpys_results(name):
    function = FUNCTIONS[name]
    rng = np.random.RandomState(0)
    mismatches = []
    for dtype in DTYPES:
        if dtype == np.bool_:
            data = rng.rand(4, 3, 2) > 0.5
        elif np.dtype(dtype).kind in "iu":
            data = rng.randint(0, 100, size=(4, 3, 2)).astype(dtype)
        else:
            data = (rng.randn(4, 3, 2) * 10).astype(dtype)
            data[1, 0, 1] = data[2, 2, 0] = np.nan  # reductions and arg-reductions of NaN
        want = _outcome(lambda d: np.stack([np.asarray(function(row)) for row in d]), data)
        got = _outcome(function, TorchBatched(torch.as_tensor(data)))
        problem = _mismatch(got, want)
        if problem:
            mismatches.append(f"{dtype.__name__}: {problem}")
    assert not mismatches, "\n".join(mismatches)


# -- what is worked out once (per-op overhead), and stays right ---------------------------


def test_a_literal_becomes_a_tensor_once(monkeypatch):
    # ``x % 7`` at every block: the literal's tensor is made at the first only.
    x = TorchBatched(torch.arange(6))
    np.remainder(x, 7)
    made = []
    real = torch.as_tensor
    monkeypatch.setattr(torch, "as_tensor", lambda *a, **k: made.append(a) or real(*a, **k))
    result = np.remainder(x, 7)
    assert made == []
    np.testing.assert_array_equal(result.data.numpy(), np.arange(6) % 7)


def test_literals_keep_their_sign_and_dtype_apart():
    # 0.0 == -0.0 == 0 == False as keys of a cache; NumPy's results differ.
    x = TorchBatched(torch.tensor([1.0, 2.0]))
    assert not np.signbit((x * 0.0).data.numpy()).any()
    assert np.signbit((x * -0.0).data.numpy()).all()
    i = TorchBatched(torch.tensor([3, 4]))
    assert (i * 0).dtype == np.int64 and (i * 0.0).dtype == np.float64
    assert (i * False).dtype == np.int64


def test_an_int_literal_out_of_range_raises_every_time():
    x = TorchBatched(torch.tensor([1, 2], dtype=torch.uint8))
    for _ in range(2):
        with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
            np.add(x, 300)


def test_array_function_dtypes_follow_their_operands_types():
    # np.where's dtype is worked out once per operand types: a weak view, a float
    # literal and an int literal each decide anew.
    c = TorchBatched(torch.tensor([True, False]))
    x = TorchBatched(torch.tensor([1, 2], dtype=torch.int8))
    assert np.where(c, x, 2).dtype == np.int8
    assert np.where(c, x, 2.5).dtype == np.float64
    weak = TorchBatched(torch.tensor([1, 2], dtype=torch.int8)).as_weak()
    assert np.where(c, weak, x).dtype == np.int8
    assert np.where(c, x, weak).dtype == np.int8


def test_integer_division_by_a_literal_is_numpys():
    data = np.array([7, -7, 0, np.iinfo(np.int64).min, 5])
    x = TorchBatched(torch.as_tensor(data))
    for divisor in (2, -3, 1, -1):
        for ufunc in (np.floor_divide, np.remainder, np.fmod):
            with np.errstate(all="ignore"):
                want = ufunc(data, divisor)
            got = ufunc(x, divisor).data.numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{ufunc.__name__} {divisor}")
