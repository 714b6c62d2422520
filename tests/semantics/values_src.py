"""Per-example programs over the ndarray API and Python's builtins (tests/semantics/test_values.py).

Each function is written for ONE example; parameters by name: ``v`` a float vector (3,),
``m`` a float matrix (2, 3), ``x`` and ``y`` float scalars, ``n`` an int scalar.
"""

# ruff: noqa: E731
import random

import numpy as np

import pcbatch.mcmc.random as counter_random

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - the suite runs TensorFlow's cases where it is
    tf = None

# -- attributes ------------------------------------------------------------------


def shape_tuple(m):
    return np.zeros(m.shape) + m


def shape_index(v):
    return v.shape[0] * v


def shape_negative_index(m):
    return m.shape[-1] * m


def ndim_attr(m):
    return m.ndim + m


def size_attr(m):
    return m.size * m


def dtype_attr(v):
    return np.zeros(3, dtype=v.dtype) + v


def transpose_attr(m):
    return m.T


def real_imag(v):
    return v.real + v.imag


# -- methods ---------------------------------------------------------------------


def flatten(m):
    return m.flatten()


def ravel(m):
    return m.ravel()


def reshape_args(m):
    return m.reshape(3, 2)


def reshape_tuple(m):
    return m.reshape((6,))


def reshape_minus_one(m):
    return m.reshape(-1)


def astype(v):
    return v.astype(np.int32)


def sum_all(m):
    return m.sum()


def sum_axis(m):
    return m.sum(axis=0)


def sum_keepdims(m):
    return m.sum(axis=1, keepdims=True)


def mean_negative_axis(m):
    return m.mean(axis=-1)


def min_all(m):
    return m.min()


def max_axis(m):
    return m.max(axis=0)


def prod_all(m):
    return m.prod()


def any_all(m):
    return (m > 0).any(), (m > 0).all(axis=1)


def argmax_all(m):
    return m.argmax()


def argmax_axis(m):
    return m.argmax(axis=1)


def argmin_vector(v):
    return v.argmin()


def std_var(m):
    return m.std(), m.var(axis=0)


def cumsum_all(m):
    return m.cumsum()


def cumsum_axis(m):
    return m.cumsum(axis=1)


def copy_method(v):
    return v.copy() * 2


def item_float(x):
    return x.item()


def item_int(n):
    return n.item()


def clip_method(v):
    return v.clip(-0.5, 0.5)


def round_method(v):
    return v.round(1)


def dot_vector(v):
    return v.dot(v)


def dot_matrix(m, v):
    return m.dot(v)


def transpose_method(m):
    return m.transpose()


def transpose_axes(m):
    return m.transpose(1, 0)


def squeeze_method(m):
    return m[None].squeeze()


def squeeze_axis(v):
    return v[None, :].squeeze(0)


def more_methods(m, v):
    return (
        m.cumprod(axis=1),
        v.argsort(),
        v.repeat(2),
        v.take(2),
        m.trace(),
        m.diagonal(),
        m.swapaxes(0, 1),
        v.conj(),
    )


def sort_in_place(v):
    return v.sort()


# -- builtins --------------------------------------------------------------------


def len_vector(v):
    return len(v) * v


def len_matrix(m):
    return len(m) + m


def abs_vector(v):
    return abs(v)


def abs_scalar(x):
    return abs(x)


def round_scalar(x):
    return round(x)


def round_ndigits(x):
    return round(x, 1)


def round_int(n):
    return round(n)


def min_two(x, y):
    return min(x, y)


def max_with_number(x):
    return max(x, 0.5)


def min_three(x, y, n):
    return min(x, y, n)


def min_of_vector(v):
    return min(v)


def max_of_vector(v):
    return max(v)


def float_of_int(n):
    return float(n)


def int_of_float(x):
    return int(x)


def bool_of_float(x):
    return bool(x)


def float_of_string(x):
    return min(x, float("inf"))


# -- indexing and operators --------------------------------------------------------


def index_int(v):
    return v[0], v[-1]


def index_slices(v):
    return v[1:], v[::-1], v[-2:]


def index_matrix(m):
    return m[0, -1], m[-1], m[:, 1:]


def index_ellipsis(m):
    return m[..., 0]


ORDER = np.array([2, 0, 1])


def index_integer_arrays(v, m):
    # NumPy's integer-array indexing: TensorFlow's own indexing has none
    return v[np.array([0, 2])], v[[-1, 0, 0]], v[ORDER], m[:, [2, 0]], m[[1, 0], [2, 2]]


def index_integer_arrays_apart(m):
    # advanced parts apart: NumPy puts the index's axes first (a batch's axis was put
    # after them on NumPy and Torch, and Torch's ints are no advanced index)
    t = np.stack([m, m * 2.0], axis=2)
    return t[0, :, [1, 0]], t[[0, 1], :, [1, 0]], t[[1, 0], ..., 1], t[:, 0, [1, 0]]


def index_none(v, m):
    return v[None], m[:, None], m[None, ..., None]


def comparisons(v, x, y):
    return v < x, v == v, x >= y, v != 0.5


def matmul(m, v):
    return m @ v, v @ v, m @ m.T


def unary(v):
    return -v, +v, abs(-v)


# -- rejected: Python raises on one example too ------------------------------------


def round_vector(v):
    return round(v)


def float_of_vector(v):
    return float(v)


def min_of_vectors(v):
    return min(v, v + 1)


def len_of_scalar(x):
    return len(x) + x


def item_of_vector(v):
    return v.item()


# -- plain helpers that look at shapes, called on per-example scalars (D9) ---------


def norm(v):
    return np.sqrt(np.sum(v * v)) if np.ndim(v) > 0 else abs(v)


def helper_norm(x):
    return norm(x)


def scaled_by_size(v):
    return v * np.size(v)


def helper_size(x):
    return scaled_by_size(x)


def helper_len_shape(x):
    return x + len(np.shape(x))


def helper_size_attribute(x):
    return x * x.size


def helper_ndim(x, y):
    return x * np.ndim(y) + y


# -- randomness ----------------------------------------------------------------------


def counter_based_uniform(n):
    return counter_random.uniform(7, n, 0, 1, 0, np.float64)


def numpy_global_normal(x):
    return x + np.random.normal()  # ERROR


rng = np.random.default_rng(0)


def numpy_generator_normal(x):
    return x + rng.normal()  # ERROR


def numpy_default_rng(x):
    return x + np.random.default_rng(1).uniform()  # ERROR


def python_random(x):
    return x + random.random()  # ERROR


def numpy_random_in_condition(x):
    if np.random.uniform() < x:  # ERROR
        return x
    return -x


def tensorflow_stateful_normal(x):
    return x + tf.random.normal([], dtype=tf.float64)  # ERROR



def as_python_float(v):
    return float(v) * 2.0


def helper_float(x):
    return as_python_float(x)


# -- integer arrays as indices (a gather per example) --------------------------------


def gather_by_integer_arrays(v, m, k):
    """``k`` a per-example integer vector (2,): fancy indexing of per-example arrays."""
    return v[k], m[:, k], m[k % 2, 1], v[k[::-1]] * 2.0


def equals_none_scalar(x):
    # Python: False per example (NumPy's scalars), as a bool that adds as an int
    if x == None:  # noqa: E711
        return x + 1.0
    return (x != None) + x  # noqa: E711


def equals_none_int(n):
    return (None == n) * 3 + (None != n) * n  # noqa: E711, SIM300 (None on the left)


def equals_none_vector(v):
    # NumPy compares an array with None elementwise: all False
    return np.sum(v == None), v != None  # noqa: E711


def _kept_unless_none(a):  # a plain helper: runs on the library's per-example values
    return (a != None) * a  # noqa: E711


def _plus_is_none(a):
    return (None == a) + a  # noqa: E711, SIM300 (None on the left)


def equals_none_in_helpers(x, n, v):
    return _kept_unless_none(x) + 1.0, _plus_is_none(n) * 2, np.sum(_kept_unless_none(v))


def builtin_any_all(v):
    return any(v > 0), all(v > -3.0)


def builtin_any_in_condition(v, x):
    if any(v < x):  # Python's any over a vector's items, a Python bool
        return 1.0
    return 0.0


def builtin_all_of_a_tuple(x, y):
    return all((x > 0, y)), any([x > 1, y > 1])  # y's NaN is true, as in Python


def any_of_scalar(x):
    return any(x)


def any_of_matrix(m):
    return any(m > 0)  # each item is a row: Python cannot tell its truth


def assign_by_a_list(v):
    u = v.copy()
    u[[0, 2]] = 5.0  # ERROR
    return u


def assign_by_an_array(v):
    u = np.zeros(4)
    u[np.array([3, 1])] = v[:2]  # ERROR
    return u


def add_by_columns(m):
    u = m.copy()
    u[:, [1, 0]] += 1.0  # ERROR
    return u


ALLOWED = {3, 7}


def membership_in_arrays(v, x, n, m):
    # an array: NumPy's (v == x).any(); a global set: Python's == with each item
    return x in v, x not in m, 0.7 in v, n in ALLOWED, x in ORDER


def membership_in_a_number(x, y):
    return x in y


def determinant(v):
    return np.linalg.det(np.outer(v, v) + np.eye(3))  # ERROR


def order_statistics(v, m, y):
    # TensorFlow's NumPy has none of them (pcbatch/backends/tensorflow_numpy.py)
    w = v * y  # NaN for the example whose y is NaN: the statistics are NaN there
    return (np.median(v), np.median(v[:2]), np.median(w), np.percentile(v, 25.0),
            np.quantile(w, 0.9), np.percentile(v, [10.0, 50.0, 100.0]), np.median(m, axis=1),
            np.percentile(m, 30, axis=0), np.median((v * 3).astype(np.int64)))


def nan_reductions(v):
    w = np.where(v > 2.0, np.nan, v)
    return np.nansum(w), np.nanmax(w), np.nanmin(w), np.nanmean(w), np.nansum(v)


def trapezoid_and_searchsorted(v, x):
    ordered = np.sort(v)
    return (np.trapezoid(v), np.trapezoid(v, dx=0.5), np.trapezoid(v, np.array([0.0, 1.0, 3.0])),
            np.searchsorted(ordered, x), np.searchsorted(ordered, x, side="right"))


def lists_as_operands(v):
    # NumPy reads a list of numbers as an array (float64, int64: not a weak scalar); JAX
    # refused lists, TensorFlow's maximum too
    f = v.astype(np.float32)
    return (v * [1.0, 2.0, 3.0], [1, 2, 3] + v, np.maximum(v, [0.0, 1.0, 2.0]),
            np.where(v > 1, [1.0, 2.0, 3.0], v), np.concatenate([v, [7.0]]),
            np.stack([v, [1.0, 1.0, 1.0]]), (v == [0.3, 0.0, 0.7]).any(), f * [1.0, 2.0, 3.0],
            f + [1, 2, 3], np.percentile(v, [10, 90]), np.dot(f, [1.0, 0.0, -1.0]))


def methods_with_arguments(v, m):
    # ndarray.clip takes one bound alone; item(k) indexes the flattened array; ddof=
    # (TensorFlow's NumPy has none)
    return (v.clip(0), v.clip(max=1.0), v.clip(-1, 1), v.item(1), m.item(1, 2), m.item(4),
            v.std(ddof=1), v.var(ddof=1), m.var(axis=0, ddof=1), m.std(axis=1), np.var(v))


def sum_where(v):
    return v.sum(where=v > 0)  # ERROR


KNOTS = np.array([-1.0, 0.0, 0.0, 2.0, 3.5])


def interpolation(v, x, y):
    # at the knots, between them, outside (left/right), a repeated knot, NaN (y)
    return (np.interp(x, KNOTS, [1.0, 2.0, 5.0, -1.0, 0.5]), np.interp(v, KNOTS, KNOTS * 2),
            np.interp(x, [0.0, 1.0], [10.0, 20.0], left=-7.0, right=7.0),
            np.interp(y, [-1.0, 1.0], [0.0, 1.0]), np.interp(x, [0.25], [3.0]))
