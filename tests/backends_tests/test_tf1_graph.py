"""TF1-style graph mode (issue 25, item 6): the seed's TensorFlowBackend is a graph backend.

Inside ``with tf.Graph().as_default():`` a batched call builds its run into the graph,
and ``tf.compat.v1.Session.run`` computes it: the values of the same function run one
example at a time (``dry_run=True``, eagerly), with XLA and without. Failures that an
eager call raises (a stack overflow) raise when the session runs the graph.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch

tf = pytest.importorskip("tensorflow")

from pcbatch.backends.tensorflow import TensorFlowBackend  # noqa: E402

ctx = pcbatch.Context()


@ctx.batch
def plus1(x):
    return x + 1


@ctx.batch
def branch(x):
    if x > 1.5:  # noqa: SIM108 - a branch of statements is what is tested
        y = x * 2.0
    else:
        y = x - 1.0
    return y


@ctx.batch
def doubling(x):
    steps = 0
    while x < 10.0:
        x = x * 2.0 + 1.0
        steps += 1
    return x, steps


@ctx.batch
def fib(n):
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch
def centred(v):
    # Per-example TensorFlow code (item 7) in a TF1 graph.
    return v - tf.reduce_mean(v, axis=-1, keepdims=True) * tf.cast(tf.shape(v)[0], v.dtype)


@ctx.batch
def compared(v):
    # TF1 graphs keep TF1's rule that == on two tensors is object identity; pcbatch
    # traces the run outside the caller's graph, so this compares, as per example.
    return tf.reduce_max(v) == v, tf.where(tf.abs(v) != 3.0, v, 0.0)


PROGRAMS = {
    "plus1": (plus1, np.array([1.0, 2.0, 3.0])),
    "branch": (branch, np.array([1.0, 2.0, 3.0])),
    "while": (doubling, np.array([0.5, 3.0, 12.0])),
    "fibonacci": (fib, np.array([1, 5, 7, 10])),
    "tf_ops": (centred, np.array([[1.0, 2.0, 6.0], [0.0, -3.0, 3.0]])),
    "tf_compare": (compared, np.array([[1.0, 3.0, 6.0], [3.0, -3.0, 3.0]])),
}

_BACKENDS: dict = {}


def _backend(xla: bool) -> TensorFlowBackend:
    if xla not in _BACKENDS:
        _BACKENDS[xla] = TensorFlowBackend(jit_compile=xla)
    return _BACKENDS[xla]


def _assert_same(actual, expected):
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-12)


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_session_run_gives_the_per_example_values(program, xla):
    function, x = PROGRAMS[program]
    expected = function(x, dry_run=True)
    with tf.Graph().as_default():
        out = function(tf.constant(x), backend=_backend(xla))
        assert all(tf.is_symbolic_tensor(t) for t in tf.nest.flatten(out))
        with tf.compat.v1.Session() as sess:
            _assert_same(sess.run(out), expected)


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_placeholders_fed_at_run_and_graphs_one_after_another(xla):
    """One compiled program serves every graph and eager calls, in any order."""
    backend = _backend(xla)
    n = np.array([2, 6, 9])
    eager = fib(tf.constant(n), backend=backend)
    for _ in range(2):
        with tf.Graph().as_default():
            fed = tf.compat.v1.placeholder(tf.int64, [3])
            out = fib(fed, backend=backend)
            with tf.compat.v1.Session() as sess:
                np.testing.assert_array_equal(sess.run(out, {fed: n}), [1, 8, 34])
                np.testing.assert_array_equal(sess.run(out, {fed: n + 1}), [2, 13, 55])
    np.testing.assert_array_equal(fib(tf.constant(n), backend=backend).numpy(), eager.numpy())


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_stack_overflow_raises_at_session_run(xla):
    with tf.Graph().as_default():
        out = fib(tf.constant([3, 12]), backend=_backend(xla), max_stack_depth=4)
        with tf.compat.v1.Session() as sess, pytest.raises(
            tf.errors.OpError, match="exceeded max_stack_depth=4"
        ):
            sess.run(out)


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_return_status_is_a_graph_tensor(xla):
    with tf.Graph().as_default():
        result, status = fib(
            tf.constant([3, 12]), backend=_backend(xla), max_stack_depth=4, return_status=True
        )
        with tf.compat.v1.Session() as sess:
            values, codes = sess.run((result, status))
    assert values[0] == 2 and list(codes) == [
        int(pcbatch.LaneStatus.OK), int(pcbatch.LaneStatus.STACK_OVERFLOW)
    ]


def test_v1_tensorshape_is_rejected_at_the_call_with_the_fix():
    """``tf.compat.v1.disable_v2_behavior()`` also turns TensorShape's dimensions into
    ``Dimension`` objects, which the backend does not compute with: the call says to turn
    v2 TensorShape back on (the rest of v1 behaviour works with it)."""
    tf.compat.v1.disable_v2_tensorshape()
    try:
        with tf.Graph().as_default(), pytest.raises(
            pcbatch.PcbatchError, match="enable_v2_tensorshape"
        ):
            plus1(tf.constant([1.0]), backend=_backend(False))
    finally:
        tf.compat.v1.enable_v2_tensorshape()


def test_placeholder_with_an_unknown_dimension_is_rejected_at_the_call():
    with tf.Graph().as_default():
        fed = tf.compat.v1.placeholder(tf.float64, [None])
        with pytest.raises(pcbatch.BatchSizeError, match="placeholder whose shape is fully known"):
            plus1(fed, backend=_backend(False))


#: a tensor of the caller's graph, which `scaled` reads as a global
graph_scale = None


@ctx.batch
def scaled(x):
    return x * graph_scale


@ctx.batch
def scaled_and_compared(x):
    return tf.reduce_max(x * graph_scale) == x * graph_scale


@ctx.batch
def compared_with(x, s):
    return tf.reduce_max(x * s) == x * s


@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("kind", ["placeholder", "variable"])
def test_per_example_code_reads_the_graphs_tensors_and_variables(kind, xla):
    """Such code is traced nested in the caller's graph, which alone can capture them."""
    global graph_scale
    with tf.Graph().as_default():
        if kind == "placeholder":
            graph_scale = tf.compat.v1.placeholder(tf.float64, [])
            feed = {graph_scale: 3.0}
        else:
            graph_scale = tf.Variable(3.0, dtype=tf.float64)
            feed = {}
        out = scaled(tf.constant([1.0, 2.0], tf.float64), backend=_backend(xla))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(out, feed), [3.0, 6.0])
    graph_scale = None


def test_identity_comparison_in_code_traced_in_the_graph_is_rejected():
    """Traced in the caller's TF1 graph (it reads the graph's placeholder), ``==`` on two
    tensors would be object identity there: rejected at the line, saying what to write;
    the same code given the tensor as an argument compares."""
    global graph_scale
    v = np.array([[1.0, 3.0], [2.0, 2.0]])
    expected = compared_with(v, 3.0, dry_run=True)
    with tf.Graph().as_default():
        graph_scale = tf.compat.v1.placeholder(tf.float64, [])
        with pytest.raises(pcbatch.PcbatchError, match=r"tf\.equal\(a, b\)"):
            scaled_and_compared(tf.constant(v), backend=_backend(False))
        out = compared_with(tf.constant(v), graph_scale, backend=_backend(False))
        with tf.compat.v1.Session() as sess:
            np.testing.assert_array_equal(sess.run(out, {graph_scale: 3.0}), expected)
    graph_scale = None


def test_a_scalar_tensor_argument_is_broadcast_inside_a_tf_function():
    """Broadcast like a leading dimension of size 1, without a NumPy value (symbolic)."""
    backend = _backend(False)
    doubled = tf.function(lambda x, s: compared_with(x, s, backend=backend))
    v = np.array([[1.0, 3.0], [2.0, 2.0]])
    result = doubled(tf.constant(v), tf.constant(3.0, tf.float64))
    np.testing.assert_array_equal(result.numpy(), compared_with(v, 3.0, dry_run=True))
