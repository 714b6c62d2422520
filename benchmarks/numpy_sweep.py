"""NumPy's functions at their edges, every backend against the per-example run.

    python benchmarks/numpy_sweep.py                      # JAX, TensorFlow, Torch
    python benchmarks/numpy_sweep.py --backends tensorflow --functions sign heaviside
    python benchmarks/numpy_sweep.py --all                # the documented differences too

Each function of the lists below is called in a batched function of its own, one ufunc
or reduction per program, on inputs that hold nan, -0.0, 0.0, inf, -inf, values near
float64's range and ordinary numbers, in float64, float32, int8, uint8 and bool. The
batched result is compared with ``dry_run`` (NumPy per example): the dtype and shape
exactly, integers and booleans exactly, floats up to 4 units in the last place, where
nan lies and the signs of zeros. Prints one line per difference (``python raises`` where
NumPy raises and the backend gave a value, ``REFUSED`` where the backend raised) and a
count, and exits 1 if a difference is not in `DOCUMENTED`.

The inputs leave out subnormal floats (|x| < 2.2e-308): JAX and TensorFlow flush them
to zero on the CPU (`docs/semantics.md`), which differs in almost every function.
The first run (2026-11-29, commit 2345399) found ten silent differences, fixed there;
six functions added later (``modf``, ``frexp``, ``ldexp``, ``sinc``, ``i0``, ``divmod``)
found four more on JAX (fixed in session 34).
A run takes about 20 minutes for the three backends on a 2-core machine (``--functions``
and ``--backends`` cut it down).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import tempfile
import warnings

import numpy as np

_HERE = pathlib.Path(__file__).resolve().parent
ROOT = _HERE.parent
# Run as a script, this folder comes first on sys.path, where ``import torch`` would find
# benchmarks/torch.py
sys.path[:] = [str(ROOT)] + [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]

import pcbatch  # noqa: E402
from tests.backends import backend  # noqa: E402

UNARY = """abs absolute negative positive sign sqrt cbrt square exp exp2 expm1 log log2 log10 log1p
sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor ceil trunc
rint round around isnan isinf isfinite signbit reciprocal deg2rad rad2deg degrees
radians logical_not invert spacing nan_to_num real imag conj angle fabs sinc i0 modf
frexp""".split()  # noqa: SIM905
REDUCTIONS = """sum prod max min amax amin mean std var median argmax argmin all any cumsum
cumprod ptp nansum nanprod nanmax nanmin nanmean nanstd nanvar nanargmax nanargmin count_nonzero
sort argsort diff average""".split()  # noqa: SIM905
BINARY = """add subtract multiply divide true_divide floor_divide power float_power remainder mod
fmod maximum minimum fmax fmin arctan2 hypot copysign nextafter logaddexp logaddexp2
heaviside greater greater_equal less less_equal equal not_equal logical_and logical_or
logical_xor bitwise_and bitwise_or bitwise_xor left_shift right_shift gcd lcm divmod
ldexp""".split()  # noqa: SIM905

#: differences known and documented (`docs/semantics.md`): (backend, function, dtype)
#: with ``*`` for any backend or dtype. The last bits of a product's reduction order,
#: the order of equal keys in a sort, and functions rarely used on these dtypes.
DOCUMENTED = {
    ("*", "positive", "bool"),  # NumPy refuses +bool; the libraries give it
    ("jax", "sign", "*"),  # the sign of sign(-0.0)
    ("tensorflow", "cbrt", "*"),  # the sign of cbrt(-0.0), last bits
    ("jax", "reciprocal", "*"),  # integers: NumPy's integer reciprocal
    ("jax", "spacing", "*"),
    ("tensorflow", "prod", "float64"),  # inf * 0 in another order: nan, NumPy -0.0
    ("tensorflow", "nanprod", "float64"),
    ("*", "sort", "float32"),  # -0.0 and 0.0 (equal) in either order
    ("*", "argsort", "float32"),
    ("*", "nextafter", "*"),  # integers and booleans: NumPy's float16 loop
    ("tensorflow", "hypot", "float64"),
    ("tensorflow", "reciprocal", "float64"),
}

_FLOATS = np.array([
    [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.5, 0.5],
    [2.0, -1.0, 3.0, 0.0, 1e308, -1e-300, 7.0, -7.5],
])
_OTHER_FLOATS = np.array([
    [1.0, -0.0, np.nan, np.inf, 2.0, -0.0, 0.5, 3.0],
    [0.0, 2.0, -3.0, np.inf, 1e308, 2.0, -2.0, 0.5],
])
_INT8 = np.array([[-128, 127, 0, -1, 5, 3, -7, 2], [1, 2, 3, 4, -5, 6, 100, -100]], np.int8)
_OTHER_INT8 = np.array([[3, -2, 1, 1, 2, 3, 2, -3], [0, 1, -2, 3, 2, 1, 3, 7]], np.int8)
_UINT8 = np.array([[0, 255, 1, 128, 7, 3, 9, 200], [5, 4, 3, 2, 1, 0, 250, 6]], np.uint8)
_BOOL = np.array([[True, False, True, True, False, False, True, False], [False] * 8])
INPUTS = {
    "float64": (_FLOATS, _OTHER_FLOATS),
    "float32": (_FLOATS.astype(np.float32), _OTHER_FLOATS.astype(np.float32)),
    "int8": (_INT8, _OTHER_INT8),
    "uint8": (_UINT8, _UINT8[::-1]),
    "bool": (_BOOL, _BOOL[::-1]),
}


def _programs(names: list[str]):
    """A module with one function per NumPy function (pcbatch compiles from source)."""
    lines = ["import numpy as np", ""]
    for name in names:
        args = "v, w" if name in BINARY else "v"
        lines += [f"def {name}_of({args}):", f"    return np.{name}({args})", ""]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="numpy_sweep_"))
    path = folder / "sweep_programs.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location("sweep_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def difference(got, want) -> str | None:
    """What differs between one result and NumPy's, or None."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{got.shape}, NumPy {want.dtype}{want.shape}"
    if want.dtype.kind not in "fc":
        return None if np.array_equal(got, want) else f"{got.tolist()}, NumPy {want.tolist()}"
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return f"nan at other places: {got.tolist()}, NumPy {want.tolist()}"
    kept = ~np.isnan(want)
    ulp = np.finfo(want.dtype).eps
    if not np.allclose(got[kept], want[kept], rtol=4 * ulp, atol=0):
        return f"{got.tolist()}, NumPy {want.tolist()}"
    zeros = kept & (want == 0)
    if not np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])):
        return f"signs of zeros: {got.tolist()}, NumPy {want.tolist()}"
    return None


def _outcome(call):
    try:
        return call(), None
    except Exception as error:  # noqa: BLE001 - every failure is reported as found
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:100]}"


def check(function, args, backend_name: str) -> str | None:
    """How ``function``'s batched run on ``backend_name`` differs from NumPy's, or None."""
    batched = pcbatch.Context().batch(function)
    want, numpy_error = _outcome(lambda: batched(*args, dry_run=True))
    got, error = _outcome(lambda: batched(*args, backend=backend(backend_name)))
    if numpy_error is not None:
        return None if error is not None else f"python raises ({numpy_error}), got a value"
    if error is not None:
        return f"REFUSED {error}"
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, tuple) else (got,)
    return next((d for g, w in zip(gots, wants) if (d := difference(g, w))), None)


def _documented(backend_name: str, function: str, dtype: str) -> bool:
    return any(
        b in ("*", backend_name) and f == function and d in ("*", dtype)
        for b, f, d in DOCUMENTED
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow", "torch"])
    parser.add_argument("--functions", nargs="+", default=UNARY + REDUCTIONS + BINARY)
    parser.add_argument("--dtypes", nargs="+", default=list(INPUTS))
    parser.add_argument("--all", action="store_true", help="print documented ones too")
    options = parser.parse_args()
    programs = _programs(options.functions)
    new = 0
    warnings.simplefilter("ignore")
    for name in options.functions:
        function = getattr(programs, f"{name}_of")
        for dtype in options.dtypes:
            v, w = INPUTS[dtype]
            args = (v, w) if name in BINARY else (v,)
            for backend_name in options.backends:
                found = check(function, args, backend_name)
                if found is None:
                    continue
                documented = _documented(backend_name, name, dtype)
                new += not documented and not found.startswith("REFUSED")
                if options.all or not documented:
                    print(f"{backend_name:10s} {name:13s} {dtype:7s} {found[:240]}", flush=True)
    print(f"{new} difference(s) not documented (refusals are clear errors, not counted)")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
