"""The TensorFlow backend: the batched program as one ``tf.while_loop`` in a ``tf.function``.

Same staged machine as JAX (``pcbatch/vm/staged.py``). Under XLA a step picks its
block through a row of loops that run at most once, so the state is updated in place
(``dispatch="switch"``: one ``tf.switch_case``); without XLA through
``tf.switch_case``. Pushes and pops write one entry per batch row with
``tf.tensor_scatter_nd_update`` (never a copy of the whole stack per step). By default
the function is compiled with XLA (``jit_compile=True``); ``jit_compile=False`` keeps a
graph without XLA. Primitives written with NumPy run on ``tf.experimental.numpy``;
per-example primitives are vectorized with ``tf.vectorized_map``, except those that are
only elementwise ops on per-example scalars, which run on the batch as written
(`_ElementwiseCheck`); TensorFlow's own functions take the per-example values too
(``tf.reduce_sum(x, axis=-1)``: `pcbatch.backends.numpy_dispatch.Dispatched.__tf_tensor__`).
Called eagerly, inside a tf.function, or building a TF1-style graph run by a Session
(`_in_tf1_graph`). Works with today's TensorFlow release; one TensorFlow-internal
function is used, to tell whether a caller's tf.function is XLA-compiled
(`in_xla_context`: there is no public test).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from pcbatch.backends import base, numpy_dispatch
from pcbatch.backends import compaction as compaction_option
from pcbatch.backends.compile_cache import ProgramCache
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import PcbatchError
from pcbatch.ir.setitem import StaticSlice
from pcbatch.ir.types import TensorType, Type, map_pattern

__all__ = ["TensorFlowBackend"]


def _np_dtype(dtype) -> np.dtype:
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


#: TensorFlow ops that act element by element on operands of one shape or broadcast
#: scalars: on scalars they compute one example, on vectors every example at once
#: (Bitcast between dtypes of one size: one of another size makes no scalar).
_ELEMENTWISE_OPS = frozenset(
    """Abs Acos Acosh Add AddN AddV2 Asin Asinh Atan Atan2 Atanh Bitcast BitwiseAnd BitwiseOr
    BitwiseXor Cast Ceil ClipByValue Const Cos Cosh Digamma Div DivNoNan Equal Erf Erfc
    Exp Expm1 Floor FloorDiv FloorMod Greater GreaterEqual Identity Inv IsFinite IsInf
    IsNan LeftShift Less LessEqual Lgamma Log Log1p LogicalAnd LogicalNot LogicalOr
    Maximum Minimum Mod Mul MulNoNan Neg NextAfter NoOp NotEqual Placeholder Pow RealDiv
    Reciprocal Relu RightShift Rint Round Rsqrt Select SelectV2 Sigmoid Sign Sin Sinh
    Softplus Sqrt Square SquaredDifference Sub Tan Tanh TruncateDiv TruncateMod Xdivy
    Xlog1py Xlogy""".split()  # noqa: SIM905 (a list of names, read as text)
)


class _OwnBitcastNotice:
    """Drops TensorFlow's notice that ``tf.vectorized_map`` loops over a Bitcast or a
    NextAfter: pcbatch's own ``np.signbit``/``np.copysign``/``np.spacing``
    (`numpy_dispatch`) use them, inside a primitive that also reduces
    (``np.signbit(v).sum()``); the loop gives the same values."""

    def filter(self, record) -> bool:
        message = record.getMessage()
        return not ("while_loop for converting" in message
                    and ("Bitcast" in message or "NextAfter" in message))


tf.get_logger().addFilter(_OwnBitcastNotice())


_DISPATCHES = ("loops", "switch")

#: the op seed of `TensorFlowBackend.jit`'s anchor (fixed, so that a user's op determinism
#: setting accepts it; the value drawn is never used)
_ANCHOR_SEED = 7


#: one-example traces by the NumPy-written function they adapt, then by argument specs
_EXAMPLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _one_example(function: Callable, specs: Sequence) -> tuple:
    """``function`` traced on one example of ``specs``: (its graph, its outputs there).

    Traced once per function and specs: type inference and `_ElementwiseCheck` ask for
    the same trace, each through an adapter of their own (``__wrapped__`` names the
    function both adapt). Into a plain graph, not a tf.function: nothing runs it, and a
    tf.function costs about twice as much to trace (Fibonacci: 5 traces, 31 ms -> 16 ms)
    for the same checks (a batched value used as a Python bool raises in both).

    Except where a result is a Python bool: in a plain graph TensorFlow keeps TF1's rule
    that ``==``/``!=`` on two tensors is object identity, so a user's
    ``tf.reduce_max(x) == x`` gives False there, where the run compares. Such a
    function is traced again in a function graph, as the run traces it (outside a
    caller's TF1-style graph: `_outside_tf1_graph`). And where the function reads
    tensors or variables from outside (eager ones, or a caller's TF1-style graph's),
    which only a function graph nested where they live can capture.
    """
    by_specs = _EXAMPLES.setdefault(getattr(function, "__wrapped__", function), {})
    key = repr(tf.nest.map_structure(lambda s: (tuple(s.shape), s.dtype.name), list(specs)))
    if key not in by_specs:
        def as_tensors(*args):
            results = function(*args)
            _identity_compared(results)
            # As tensors, Python numbers take the dtypes tf.vectorized_map gives them.
            return map_pattern(tf.convert_to_tensor, results)

        wrap = lambda: tf.compat.v1.wrap_function(as_tensors, list(specs))
        try:
            graph = tf.Graph()
            with graph.as_default():
                placeholder = lambda s: tf.compat.v1.placeholder(s.dtype, s.shape)
                results = function(*tf.nest.map_structure(placeholder, list(specs)))
                if any(type(r) is bool for r in tf.nest.flatten(results)):
                    raise _ComparedByIdentity
                outputs = map_pattern(tf.convert_to_tensor, results)
        except _ComparedByIdentity:
            traced = _outside_tf1_graph(wrap)
            graph, outputs = traced.graph, traced.structured_outputs
        except (RuntimeError, ValueError) as error:
            if not _captures(error):
                raise
            traced = wrap()  # nested here: it captures what the function reads
            graph, outputs = traced.graph, traced.structured_outputs
        by_specs[key] = (graph, outputs)
    return by_specs[key]


class _ComparedByIdentity(Exception):
    """A one-example trace in a plain graph gave a Python bool (see `_one_example`)."""


def _identity_compared(results) -> None:
    """Refuses a function graph's trace that gave a Python bool under TF1's rules (in a
    caller's TF1-style graph, where a function that reads that graph's tensors must be
    traced): there ``==``/``!=`` on two tensors is object identity, not a comparison."""
    if tf.compat.v1.executing_eagerly_outside_functions():
        return
    if any(type(r) is bool for r in tf.nest.flatten(results)):
        from pcbatch.backends.scalars import OtherLibraryError

        raise OtherLibraryError(
            "this per-example code reads tensors or variables of your TF1-style graph, so "
            "it is traced in that graph, where TensorFlow compares two tensors with == or "
            "!= by object identity (a Python bool, not a comparison): write "
            "tf.equal(a, b) / tf.not_equal(a, b), or pass those tensors to the batched "
            "function as arguments"
        )


#: what TensorFlow raises where a graph uses a tensor or variable it cannot capture: an
#: eager one in a plain graph, or one of a TF1-style graph in a graph not nested in it
_CAPTURE_ERRORS = (
    "Attempting to capture an EagerTensor",
    "must be from the same graph",
    "is not an element of this graph",
)


def _captures(error: BaseException | None) -> bool:
    """Whether ``error`` (or one it was raised in handling) is a failed capture."""
    for _ in range(8):
        if error is None:
            return False
        if isinstance(error, (RuntimeError, ValueError, TypeError)) and any(
            text in str(error) for text in _CAPTURE_ERRORS
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


class _ElementwiseCheck:
    """Whether a per-example primitive may skip ``tf.vectorized_map`` for these arguments.

    It may when every argument is a per-example value of one shape (scalars, or arrays
    of one shape) and the function, traced on one example, is only elementwise ops on
    that shape (and on constant scalars), and traced on the batch it builds the very
    same graph: then each op computes every example's result at once.
    The second trace is what makes it sound: a function may look at its arguments'
    shapes (``np.ndim(v)``, ``v.size``, a plain helper branching on them) and so do
    something else on the whole batch, such as reduce over it. tf.vectorized_map costs
    about 7 ms of graph building a use, nearly half of a small program's trace
    (Fibonacci: 9 uses, 0.06 of 0.14 s), and is kept for everything else. Decided once
    per signature.
    """

    def __init__(self, function: Callable):
        self.function = function
        self.verdicts: dict = {}

    def __call__(self, args) -> bool:
        leaves = [tf.convert_to_tensor(a) for a in tf.nest.flatten(args)]
        if not leaves or any(
            leaf.shape.rank == 0 or not leaf.shape.is_fully_defined() for leaf in leaves
        ):
            return False
        if len({tuple(leaf.shape) for leaf in leaves}) != 1:
            return False  # one example's values of several shapes would broadcast otherwise
        key = (tuple(leaves[0].shape), *(leaf.dtype for leaf in leaves))
        if key not in self.verdicts:
            self.verdicts[key] = self._scalar_ops_only(args, key[0], key[1:])
        return self.verdicts[key]

    def _scalar_ops_only(self, args, shape: tuple, dtypes) -> bool:
        """Every op elementwise on one example's shape (or on constant scalars), and the
        batch's trace the same graph."""

        def specs(shape):
            leaves = iter([tf.TensorSpec(shape, dtype) for dtype in dtypes])
            return tf.nest.map_structure(lambda _: next(leaves), args)

        try:
            example, example_outputs = _one_example(self.function, specs(shape[1:]))
            whole, whole_outputs = _one_example(self.function, specs(shape))
        except Exception:  # the vectorized map raises it again, with its context
            return False
        item = tf.TensorShape(shape[1:])
        scalar_ops = all(
            op.type in _ELEMENTWISE_OPS
            and all(t.shape.rank == 0 or t.shape == item for t in op.outputs)
            for op in example.get_operations()
        )
        return scalar_ops and _fingerprint(example, example_outputs) == _fingerprint(
            whole, whole_outputs
        )

    def call(self, args):
        """The function on the batch's vectors; a result that is a constant is broadcast."""
        size = tf.nest.flatten(args)[0].shape[:1]  # a constant is one number per example
        spread = lambda v: tf.broadcast_to(v, size) if v.shape.rank == 0 else v
        results = self.function(*args)
        return map_pattern(lambda v: spread(tf.convert_to_tensor(v)), results)


def _fingerprint(graph, outputs) -> tuple:
    """A graph's ops (types, attributes, wiring) and outputs, without its placeholders'
    shapes: equal for two traces that ran the same operations on the same constants."""
    ops = graph.get_operations()
    index = {op.name: i for i, op in enumerate(ops)}
    source = lambda t: (index.get(t.op.name), t.value_index)

    def attributes(op):
        if op.type == "Placeholder":
            return ()
        return tuple(
            (name, value.SerializeToString(deterministic=True))
            for name, value in sorted(op.node_def.attr.items())
        )

    described = tuple(
        (op.type, tuple(source(t) for t in op.inputs), attributes(op)) for op in ops
    )
    return described, tuple(source(t) for t in tf.nest.flatten(outputs))


def _foldable(tensor) -> bool:
    """Whether tf2xla may fold ``tensor`` into a constant: it depends on no argument of
    the traced function and no stateful op (the anchor of `TensorFlowBackend.jit` is
    needed for such values only)."""
    seen, todo = set(), [tensor.op]
    while todo:
        op = todo.pop()
        if op.type == "Placeholder" or op.op_def.is_stateful:
            return False
        for source in op.inputs:
            if source.op.name not in seen:
                seen.add(source.op.name)
                todo.append(source.op)
    return True


@contextlib.contextmanager
def _quiet_autograph():
    """Under XLA, tf.vectorized_map wraps its loop in a tf.function of its own with
    AutoGraph on, whatever pcbatch asks, and on Python 3.13 AutoGraph's AST library
    (gast) warns of a deprecated keyword for each node it builds: dozens of
    DeprecationWarnings about TensorFlow's own code reached the user on the first call.
    Silenced while pcbatch traces its program, and only these."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*unexpected keyword argument '___pyct_anno'",
            category=DeprecationWarning,
        )
        yield


def _without_control_dependencies(function: Callable) -> Callable:
    """``function``, traced into a graph of its own that TensorFlow adds no automatic
    control dependencies to, and called from the caller's graph.

    A `tf.function` chains every stateful op of its trace, loop bodies included, in
    program order, and its bookkeeping visits every op: Fibonacci x100 traced in 0.095
    s against 0.119 s. Under XLA nothing needs the chain: the program has no stateful
    op but the anchor of `TensorFlowBackend.jit` (and XLA runs host callbacks in the
    order of their data dependencies anyway)."""

    def call(*args):
        tensors = [leaf for leaf in tf.nest.flatten(args) if leaf is not None]
        specs = [tf.TensorSpec(t.shape, t.dtype) for t in tensors]

        def from_tensors(*leaves):
            leaves = iter(leaves)
            flat = [None if leaf is None else next(leaves) for leaf in tf.nest.flatten(args)]
            return function(*tf.nest.pack_sequence_as(args, flat))

        return tf.compat.v1.wrap_function(from_tensors, specs)(*tensors)

    return call


def _in_tf1_graph() -> bool:
    """Whether the call builds into a TF1-style graph (``with tf.Graph().as_default():``,
    run by a ``tf.compat.v1.Session``) rather than running eagerly or tracing a
    tf.function. There the staged program is the same tf.function, traced outside the
    graph (`_outside_tf1_graph`) and called from it; what differs is TF1's rules for
    the code around the call: ``==`` on tensors is object identity (pcbatch compares
    with `TensorFlowBackend.equal`), and an eager tensor cannot enter the graph
    (`_graph_arguments`)."""
    return not tf.executing_eagerly() and not tf.inside_function()


def _graph_arguments(tree):
    """``tree`` with its eager tensors as NumPy arrays, which a TF1-style graph takes as
    constants (an eager tensor there raises "Attempting to capture an EagerTensor")."""
    eager = lambda v: isinstance(v, tf.Tensor) and not tf.is_symbolic_tensor(v)
    return tf.nest.map_structure(lambda v: v.numpy() if eager(v) else v, tree)


def _outside_tf1_graph(trace: Callable):
    """``trace()``, run as from eager code although the caller builds a TF1-style graph.

    In a TF1-style graph TensorFlow keeps TF1's rules even inside the functions traced
    there: ``t == u`` on tensors is object identity (False), not a comparison, and
    ``tf.reduce_max(x) == x`` in a user's per-example code would quietly give False per
    example. Traced in a thread of its own (TensorFlow's default graph and execution
    mode are per thread; a new thread starts eager), a function means what it means
    eagerly and in a tf.function; the caller's graph then calls it like any function.
    The thread carries the caller's batched run (`pcbatch.running`), so a batched call
    from a primitive is refused there as here. Elsewhere ``trace()`` runs here.

    A function that reads tensors or variables of the caller's graph can only be traced
    nested in it: that trace runs here, under TF1's rules (`_identity_compared` refuses
    the comparisons they would silently turn into False)."""
    if not _in_tf1_graph():
        return trace()
    from pcbatch import running

    caller, outcome = running.current(), {}

    def run():
        try:
            with running.inside(caller) if caller else contextlib.nullcontext():
                outcome["value"] = trace()
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="pcbatch-trace")
    thread.start()
    thread.join()
    if "error" in outcome:
        if not _captures(outcome["error"]):
            raise outcome["error"]
        return trace()
    return outcome["value"]


def _trace_outside_graph(function, placed: Callable, args: tuple):
    """``function``'s concrete function for ``args`` (tensors or NumPy arrays of a
    caller's TF1-style graph), traced from their specs outside that graph
    (`_outside_tf1_graph`)."""
    spec = lambda v: None if v is None else tf.TensorSpec(v.shape, _np_dtype(v.dtype))
    specs = tf.nest.map_structure(spec, args)

    def trace():
        with placed():
            return function.get_concrete_function(*specs)

    return _outside_tf1_graph(trace)


def in_xla_context() -> bool:
    """Whether the graph being built will be compiled by XLA: a tf.function with
    jit_compile=True is tracing it, or one of the graphs it is nested in. (TensorFlow's
    own test, the one tf.function makes: there is no public one.)"""
    from tensorflow.python.ops import control_flow_util

    graph = tf.compat.v1.get_default_graph()
    return control_flow_util.GraphOrParentsInXlaContext(graph)


class TensorFlowBackend:
    """Runs batched programs as one TensorFlow graph (XLA-compiled by default).

    Args:
      safety_checks: check stack overflow and the step limit after each run
        (one small device-to-host read; inside a caller's graph, a py function that
        raises when it runs); False skips them for raw speed (failed lanes' results
        are still fill values: NaN, the smallest integer).
      jit_compile: compile the staged program with XLA.
      compaction: ``None`` (default): every block runs full width under a mask.
        ``"auto"`` or a sequence of bucket widths: a block with at most ``k`` active
        threads runs on ``k`` gathered rows (`pcbatch.vm.compact`; same results).
      while_parallel_iterations: the seed's option: ``parallel_iterations`` of the
        program's ``tf.while_loop`` (default 10, TensorFlow's).
      basic_block_xla_device: the seed's option: a device name (e.g. ``"/cpu:0"``);
        the seed compiles each basic block with XLA there, pcbatch compiles the whole
        program with XLA (implies ``jit_compile=True``) and runs it there.
      dispatch: how a step picks its block under XLA (see `switch`). ``"loops"``
        (default): a row of loops that run at most once, updating the state in place;
        fastest per step. ``"switch"``: one ``tf.switch_case``, which copies the state
        every step but compiles a little faster (Fibonacci x100, first call: 0.42-0.55 s
        against 0.52-0.60 s). Without XLA the dispatch is always ``"switch"``.
    """

    name = "tensorflow"
    gathers_active_rows = False
    staged = True
    index_dtype = np.dtype(np.int32)

    def __init__(
        self,
        safety_checks: bool = True,
        jit_compile: bool = True,
        compaction=None,
        dispatch: str = "loops",
        while_parallel_iterations: int = 10,
        basic_block_xla_device: str | None = None,
    ):
        compaction_option.check_option(compaction)
        if not (isinstance(while_parallel_iterations, int) and while_parallel_iterations > 0):
            raise ValueError(
                "TensorFlowBackend(while_parallel_iterations=...): expected a positive int, "
                f"got {while_parallel_iterations!r}"
            )
        self.while_parallel_iterations = while_parallel_iterations
        # The seed compiles each basic block with XLA on this device; pcbatch compiles
        # the whole program with XLA, placed there.
        self.basic_block_xla_device = basic_block_xla_device
        if basic_block_xla_device is not None:
            jit_compile = True
        if dispatch not in _DISPATCHES:
            raise ValueError(
                f"TensorFlowBackend(dispatch={dispatch!r}): expected one of {_DISPATCHES}"
            )
        self.dispatch = dispatch
        self.compaction = compaction
        self.safety_checks = safety_checks
        self.jit_compile = jit_compile
        self._types = NumpyBackend()
        self.compile_cache = ProgramCache()
        self.traces = 0
        #: run the staged machine op by op, not as a graph (`pcbatch.fuzz.eager`)
        self.run_eagerly = False
        # While tracing under XLA (see `jit`): per thread, as two threads may trace on
        # one backend at once.
        self._tracing = threading.local()

    def check_environment(self) -> None:
        """Raises where TensorFlow is set up in a way this backend cannot build under:
        TensorFlow's v1 shapes (``tf.compat.v1.disable_v2_behavior()`` or
        ``disable_v2_tensorshape()``), whose dimensions are ``Dimension`` objects where
        the backend computes with ints. The rest of v1 behaviour is fine: TF1-style
        graphs and Sessions, eager execution disabled, TF1's tensor equality."""
        if not isinstance(tf.TensorShape([1])[0], int):
            raise PcbatchError(
                "pcbatch's TensorFlowBackend needs TensorFlow 2's TensorShape (dimensions "
                "that are ints), which tf.compat.v1.disable_v2_behavior() or "
                "disable_v2_tensorshape() turned off: call "
                "tf.compat.v1.enable_v2_tensorshape() after them (TF1-style graphs, "
                "Sessions and the rest of v1 behaviour work with it)"
            )

    # -- types ------------------------------------------------------------------
    def type_of(self, t, preferred_dtype=None) -> TensorType:
        dtype = getattr(t, "dtype", None)
        dtype = _np_dtype(dtype) if dtype is not None else np.asarray(t).dtype
        return TensorType(dtype, tuple(int(d) for d in np.shape(t)))

    def run_on_dummies(self, primitive_callable: Callable, input_types: Sequence[Type], fill=1):
        dummy = lambda t: tf.constant(np.full(t.shape, fill, _np_dtype(t.dtype)))
        args = [map_pattern(dummy, t.tensors) for t in input_types]
        return primitive_callable(*args)

    def example_result_types(self, function: Callable, input_types: Sequence[Type]):
        """The result types of a per-example primitive, from tracing it on one example.

        Tracing the vectorized primitive (`vectorize`) costs about 20 ms, most of it
        tf.vectorized_map's conversion; the plain function traces in a fraction of that
        and fails the same way on Python control flow over tensor values. None where a
        result's shape is not static (then type inference runs the vectorized primitive).
        """
        spec = lambda t: tf.TensorSpec(t.shape, _np_dtype(t.dtype))
        specs = [map_pattern(spec, t.tensors) for t in input_types]
        _, outputs = _one_example(function, specs)
        leaves = tf.nest.flatten(outputs)
        if not all(leaf.shape.is_fully_defined() for leaf in leaves):
            return None
        as_type = lambda leaf: TensorType(_np_dtype(leaf.dtype), tuple(leaf.shape.as_list()))
        return map_pattern(as_type, outputs)

    def merge_dtypes(self, dt1, dt2):
        return self._types.merge_dtypes(dt1, dt2)

    def merge_shapes(self, s1, s2):
        return self._types.merge_shapes(s1, s2)

    def adapt(self, function: Callable) -> Callable:
        """A primitive written with NumPy, run on tensors (``np.f`` -> ``tnp.f``)."""
        return numpy_dispatch.adapt(function, "tensorflow.experimental.numpy")

    def vectorize(self, function: Callable) -> Callable:
        function = self.adapt(function)
        vectorized = lambda *args: tf.vectorized_map(lambda xs: function(*xs), args)
        # Called eagerly (type inference, an eager run), tf.vectorized_map traces a new
        # graph every call (about 24 ms); traced once per signature, a call costs about
        # 0.3 ms. (Traced with the batch size left open, calls cost several ms, and the
        # traces no less.) Inside a trace the map is inlined.
        traced: dict = {}

        def eager(args):
            args = tf.nest.map_structure(tf.convert_to_tensor, args)
            key = tf.nest.map_structure(lambda a: (a.dtype, tuple(a.shape)), args)
            if key not in traced:
                graph = tf.function(vectorized, autograph=False)
                traced[key] = graph.get_concrete_function(*args)
            return traced[key](*args)

        elementwise = _ElementwiseCheck(function)

        def batched(*args):
            if not args:
                return map_pattern(lambda v: tf.convert_to_tensor(v)[None], function())
            if elementwise(args):
                return elementwise.call(args)
            return eager(args) if tf.executing_eagerly() else vectorized(*args)

        return batched

    # -- staged VM operations ----------------------------------------------------
    def zeros(self, shape, dtype):
        return tf.zeros(shape, _np_dtype(dtype))

    def full_pc(self, size: int, value: int):
        return tf.fill([size], tf.constant(value, tf.int32))

    def full_mask(self, size: int):
        return tf.ones([size], tf.bool)

    def false(self):
        return tf.constant(False)

    def scalar_int(self, value: int):
        return tf.constant(value, tf.int32)

    def scalar_float(self, value: float):
        return tf.constant(value, tf.float32)

    def float(self, x):
        return tf.cast(x, tf.float32)

    def count(self, mask):
        return tf.reduce_sum(tf.cast(mask, tf.int32))

    def add_at(self, counts, index: int, amount):
        return tf.tensor_scatter_nd_add(counts, [[index]], [amount])

    def where(self, mask, if_true, if_false):
        """``mask ? if_true : if_false``, a mask of rows applied along the leading axis."""
        if_true, if_false = tf.convert_to_tensor(if_true), tf.convert_to_tensor(if_false)
        mask = tf.convert_to_tensor(mask)
        rank = max(if_true.shape.rank, if_false.shape.rank)
        if mask.shape.rank and rank > mask.shape.rank:
            trailing = [1] * (rank - mask.shape.rank)
            if mask.shape.is_fully_defined():
                mask = tf.reshape(mask, mask.shape.as_list() + trailing)
            else:
                mask = tf.reshape(mask, tf.concat([tf.shape(mask), trailing], 0))
        # tf.where broadcasts its three operands (a staged machine's shapes are static,
        # so nothing is computed at run time to broadcast them).
        return tf.where(mask, if_true, if_false)

    def truth(self, value):
        value = tf.convert_to_tensor(value)
        return value if value.dtype == tf.bool else tf.not_equal(value, 0)

    def any(self, x):
        return tf.reduce_any(x)

    def equal(self, a, b):
        """``a == b`` by element; the staged machine never writes ``==`` on tensors, which
        in a TF1-style graph (``tf.Graph().as_default()``) is object identity."""
        return tf.equal(a, b)

    def not_equal(self, a, b):
        return tf.not_equal(a, b)

    def minimum(self, a, b):
        return tf.minimum(a, b)

    def maximum(self, a, b):
        return tf.maximum(a, b)

    def reduce_min(self, x):
        return tf.reduce_min(x)

    def arange(self, size: int):
        return tf.range(size, dtype=tf.int32)

    def bincount(self, x, length: int):
        """Per value in ``[0, length)``, how many entries of ``x`` hold it (others: none).

        Under XLA, small, as a product with a one-hot table (`base.ONE_HOT_MAX`); else a
        segment sum (not tf.math.bincount, whose length XLA cannot take as a constant).
        """
        if self._under_xla and x.shape.num_elements() * length <= base.ONE_HOT_MAX:
            onehot = tf.cast(tf.equal(x[:, None], tf.range(length, dtype=x.dtype)), tf.int32)
            return tf.linalg.matvec(onehot, tf.ones_like(x, tf.int32), transpose_a=True)
        return tf.math.unsorted_segment_sum(tf.ones_like(x, tf.int32), x, length)

    def argmax(self, x):
        return tf.cast(tf.argmax(tf.convert_to_tensor(x), output_type=tf.int64), tf.int32)

    def any_from(self, mask, matrix):
        """Per column j: whether some row i has ``mask[i]`` and ``matrix[i, j]``."""
        columns = tf.constant(np.asarray(matrix, np.int32).T)
        return tf.linalg.matvec(columns, tf.cast(mask, tf.int32)) > 0

    @property
    def _under_xla(self) -> bool:
        return self.jit_compile and not self.run_eagerly

    @property
    def sanitize_inactive(self) -> bool:
        """Whether primitives must not see inactive rows' junk: TensorFlow's kernels raise
        on some values (an integer division by zero, an index out of range), XLA's never
        do, so only a run without XLA pays for `fill_inactive`."""
        return not self._under_xla

    def first_active(self, mask):
        """The index of ``mask``'s first active row (0 if none), for `fill_inactive`."""
        return tf.argmax(tf.cast(mask, tf.int32), output_type=tf.int32)

    def fill_inactive(self, value, mask, first_active):
        """``value`` with inactive rows replaced by row ``first_active``'s (`first_active`
        of ``mask``, found once per block: each input costs one gather and one select)."""
        value = tf.convert_to_tensor(value)
        return self.where(mask, value, tf.gather(value, first_active))

    def _row_indices(self, stack, depth, rows=None, clip: bool = True):
        if rows is None:  # a constant: one op to trace, where tf.range is four
            rows = np.arange(stack.shape[1], dtype=np.int32)
        if clip:
            depth = tf.clip_by_value(depth, 0, stack.shape[0] - 1)
        return tf.stack([depth, tf.cast(rows, tf.int32)], axis=1)

    def scatter_rows(self, stack, depth, values, rows=None):
        """``stack[depth[b], rows[b]] = values[b]`` (``rows``: all, in order, if None;
        distinct); entries whose depth is out of range keep theirs."""
        values = tf.cast(values, stack.dtype)
        if rows is None and self._under_xla and stack.shape.num_elements() <= base.SELECT_WRITE_MAX:
            return self._select_rows(stack, depth, values)
        if self._under_xla:  # XLA's scatter skips indices out of range
            indices = self._row_indices(stack, depth, rows, clip=False)
            return tf.tensor_scatter_nd_update(stack, indices, values)
        # TensorFlow's own kernel raises on them instead: write back what is there.
        indices = self._row_indices(stack, depth, rows)
        current = tf.gather_nd(stack, indices)
        updates = self.where(depth < stack.shape[0], values, current)
        return tf.tensor_scatter_nd_update(stack, indices, updates)

    def _select_rows(self, stack, depth, values):
        """`scatter_rows` as one select over the whole stack (`base.SELECT_WRITE_MAX`)."""
        trailing = [1] * (stack.shape.rank - 2)
        levels = np.arange(stack.shape[0], dtype=np.int32).reshape([-1, 1, *trailing])
        hit = tf.equal(levels, tf.reshape(tf.cast(depth, tf.int32), [1, -1, *trailing]))
        return tf.where(hit, tf.expand_dims(values, 0), stack)

    def take(self, array, index):
        """``array[index]`` along the first axis (``index`` in range)."""
        return tf.gather(array, index)

    def scatter(self, buffer, index, values):
        """``buffer[index[b]] = values[b]`` for distinct, in-range ``index``."""
        return tf.tensor_scatter_nd_update(buffer, index[:, None], tf.cast(values, buffer.dtype))

    def cumulative_count(self, mask):
        """Per row, how many rows up to and including it are set."""
        return tf.cumsum(tf.cast(mask, tf.int32))

    def gather_rows(self, stack, depth, rows=None):
        return tf.gather_nd(stack, self._row_indices(stack, depth, rows))

    # -- compaction (`pcbatch.vm.compact`) ----------------------------------------
    def active_rows(self, mask, width: int):
        """``width`` distinct rows, the set rows of ``mask`` first, padded with unset rows.

        (Not padded with an out-of-range row as on JAX: TensorFlow's scatters do not
        drop those, and an unset row written back with its own values changes nothing.)
        """
        order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), stable=True)
        return tf.cast(order[:width], tf.int32)

    def take_rows(self, array, rows):
        return tf.gather(array, rows)

    def put_rows(self, array, rows, values):
        """``array[rows] = values`` for distinct, in-range ``rows``."""
        return self.scatter(array, rows, values)

    def as_index(self, flag):
        return tf.cast(flag, tf.int32)

    def set_items(self, setitem, target, value, indices, mask):
        """``target[rows, *index] = value`` for the threads in ``mask`` (all if None).

        TensorFlow scatters only along leading axes, so the indexed axes move to the
        front for the scatter and back after it.
        """
        target = tf.convert_to_tensor(target)
        rank, dims = target.shape.rank, target.shape[1:]
        indexed = [1 + a for a, part in enumerate(setitem.index) if part is None]
        rest = [a for a in range(1, rank) if a not in indexed]
        perm = [0] + indexed + rest
        moved = tf.transpose(target, perm)
        # Out of bounds (a thread that fails `SetItem.faulting`, stopped after the
        # step): item 0, as a scatter out of bounds fails the whole run on CPU.
        wrap = lambda i, a: tf.where(
            (i < -dims[a]) | (i >= dims[a]), tf.zeros_like(i), tf.where(i < 0, i + dims[a], i)
        )
        rows = tf.range(tf.shape(target)[0], dtype=tf.int64)
        indices = [tf.cast(tf.convert_to_tensor(i), tf.int64) for i in indices]
        coords = tf.stack(
            [k for k in setitem.key(rows, indices, wrap) if not isinstance(k, slice)], 1
        )
        current = tf.gather_nd(moved, coords)
        value = tf.cast(tf.convert_to_tensor(value), target.dtype)
        missing = setitem.rest_rank(rank) - (value.shape.rank - 1)
        if missing > 0:
            shape = tf.concat([tf.shape(value)[:1], [1] * missing, tf.shape(value)[1:]], 0)
            value = tf.reshape(value, shape)
        elif missing < 0:  # leading unit axes of one example's value, which NumPy drops
            kept = tf.concat([tf.shape(value)[:1], tf.shape(value)[1 - missing:]], 0)
            value = tf.reshape(value, kept)
        updates = _written(setitem, value, current, rest)
        if mask is not None:
            updates = self.where(mask, updates, current)
        moved = tf.tensor_scatter_nd_update(moved, coords, updates)
        return tf.transpose(moved, np.argsort(perm))

    def place(self, value, batch_size: int, type_: TensorType, leading_batch: bool):
        array = tf.convert_to_tensor(value)
        if leading_batch:
            missing = len(type_.shape) - (array.shape.rank - 1)
            if missing > 0:
                shape = tf.concat([tf.shape(array)[:1], [1] * missing, tf.shape(array)[1:]], 0)
                array = tf.reshape(array, shape)
        dtype = tf.as_dtype(_np_dtype(type_.dtype))
        if array.dtype != dtype:
            array = tf.cast(array, dtype)
        shape = [batch_size, *type_.shape]
        return array if array.shape == shape else tf.broadcast_to(array, shape)

    def while_loop(self, cond, body, state):
        tracing = self._tracing
        anchor, depth = getattr(tracing, "anchor", None), getattr(tracing, "depth", 0)
        if anchor is not None and not depth:  # the outermost loop (see `jit`)
            anchored = lambda t: tf.where(anchor, t, t) if _foldable(t) else t
            state = tf.nest.map_structure(anchored, state)
        tracing.depth = depth + 1
        try:
            loop = tf.while_loop(
                cond, lambda s: (body(s),), (state,),
                parallel_iterations=self.while_parallel_iterations,
            )
            return loop[0]
        finally:
            tracing.depth = depth

    def switch(self, index, branches, state, offset: int = 0):
        """Runs ``branches[index - offset]`` on ``state``.

        Under XLA: a flat row of loops that run at most once (`base.guarded_switch`),
        updated in place. ``tf.switch_case`` copies every part of the state a step
        passes through, twice (into the branch's outputs and back into the loop's), and
        XLA's CPU runtime spreads those copies over threads: Fibonacci x100 took 8.6 ms
        warm in most processes and 23 ms in others, against 2.3-3.8 ms; NUTS (100
        chains, 50 draws) 15.6 s against 1.0 s. A binary tree of such loops, as on JAX,
        runs as fast, but tf2xla's cost grows steeply with the loops' nesting (NUTS
        compiled in 94 s against 17.5 s flat, 11.6 s with ``tf.switch_case``).

        Each block's loop carries only the registers the block reads or writes
        (`pcbatch.vm.staged._Registers`): every value a TF loop carries costs tracing
        and tf2xla time, and NUTS (100 chains) compiled in 10.3-12.0 s against 22.0-22.6
        s, at the same warm speed (1.63-1.71 s against 1.68 s, 6 runs). (Not on JAX:
        there it ran 2.2x slower warm in some processes.)

        In graph mode without XLA: one ``tf.switch_case`` (there the loops made every
        step slower: a NUTS test took 21.2 s against 5.3 s).
        """
        if not self._under_xla or self.dispatch == "switch":
            index = index - offset if offset else index
            return tf.switch_case(index, [lambda b=b: b(state) for b in branches])
        return base.guarded_switch(
            self, index, branches, state, fan_out=len(branches), narrow=True, offset=offset
        )

    def jit(self, function: Callable) -> Callable:
        def anchored(inputs, *rest):
            # tf2xla folds constants into loop bodies, and fails ("Cannot find body
            # function ..._const_0") when a constant reaches a loop through a row of
            # earlier loops that pass it on unchanged, as the flat dispatch does with the
            # state a block leaves alone. The outermost loop's initial state is therefore
            # selected by a value tf2xla does not fold: a test on a stateful random draw.
            # The draw is empty, so XLA, which folds what has no elements, reduces the
            # test to True and the selects to nothing (a scalar draw cost a kernel per
            # constant leaf, each repeating the generator). A normal draw, not a uniform
            # one: tf2xla logs a warning that seeds are ignored for every
            # RandomUniform it compiles (the user would see it on the first call).
            if self._under_xla:
                draw = tf.random.normal([0], seed=_ANCHOR_SEED)  # stateful: never folded
                self._tracing.anchor = tf.reduce_all(draw >= 0.0)
            try:
                return function(inputs, *rest)
            finally:
                self._tracing.anchor = None

        body = _without_control_dependencies(anchored) if self.jit_compile else anchored
        compiled = tf.function(body, jit_compile=self.jit_compile, autograph=False)

        traces: dict = {}

        def call(inputs, *rest):
            tf1_graph = _in_tf1_graph()
            if tf1_graph:
                inputs, rest = _graph_arguments((inputs, rest))
            # tf.function traces NumPy arrays apart from tensors of the same shape and
            # dtype; as tensors, both kinds share one trace.
            inputs = tf.nest.map_structure(tf.convert_to_tensor, inputs)
            if self.run_eagerly:
                return function(inputs, *rest)
            # The traced function itself, not the tf.function, whose matching of the
            # arguments to its traces took 0.19 ms of a 0.6 ms even/odd call.
            leaves = tf.nest.flatten((inputs, *rest))
            signature = tuple((t.shape, t.dtype) for t in leaves if t is not None)
            device = self.basic_block_xla_device
            placed = lambda: tf.device(device) if device is not None else contextlib.nullcontext()
            if signature not in traces:
                with _quiet_autograph():
                    if tf1_graph:
                        traces[signature] = _trace_outside_graph(compiled, placed,
                                                                 (inputs, *rest))
                    else:
                        with placed():
                            traces[signature] = compiled.get_concrete_function(inputs, *rest)
            with placed():
                return traces[signature](inputs, *rest)

        call.traced = compiled  # the tf.function, for inspection (its XLA program)
        return call

    def from_host(self, tree):
        """NumPy arrays as tensors, made eagerly even while a caller's function traces;
        kept as NumPy in a TF1-style graph (the graph's constants belong to it, and the
        compiled program, with what this makes for it, serves every graph)."""
        if _in_tf1_graph():
            return tree
        with tf.init_scope():
            return tf.nest.map_structure(tf.convert_to_tensor, tree)

    def to_host(self, value) -> Any:
        return np.asarray(value)

    def fail_on_read(self, values, pc, raise_failures: Callable, function: str):
        """``values``, from a run traced into a caller's graph, whose failed lanes
        (`pcbatch.vm.staged.lane_status`) raise when the graph runs: a py function of
        ``pc`` calls ``raise_failures`` and the results depend on it; TensorFlow reports
        pcbatch's error as its own (``InvalidArgumentError`` or ``UnknownError``) with the
        message kept. Under XLA nothing can call the host, and nothing can raise at run
        time (XLA ignores asserts): a call there must take the status
        (``return_status=True``), or is refused while tracing."""
        from pcbatch.errors import UncheckedFailureError

        if in_xla_context():
            raise UncheckedFailureError(
                f"{function}: called inside a tf.function(jit_compile=True), where XLA "
                "cannot raise a stack overflow or step limit when the run executes, and "
                "a failed batch member's result would be a fill value (NaN, or the "
                "smallest integer). Call it with return_status=True and check the "
                "status it returns (0 per batch member: finished), or call it from a "
                "tf.function without jit_compile=True (the run is still XLA-compiled, "
                "and it raises), or eagerly; TensorFlowBackend(safety_checks=False) "
                "turns the check off"
            )

        def check(pcs):
            raise_failures(pcs)
            return np.asarray(True)

        checked = tf.numpy_function(check, [pc], tf.bool, name="pcbatch_check")
        with tf.control_dependencies([checked]):
            return tf.nest.map_structure(tf.identity, values)

    def is_tracing(self, values) -> bool:
        return not tf.executing_eagerly() or any(
            tf.is_symbolic_tensor(v) for v in tf.nest.flatten(values) if isinstance(v, tf.Tensor)
        )


def _written(setitem, value, current, rest: list):
    """The items ``current`` (``[batch, *the target's axes in rest]``) with ``value``
    written where the assignment's static slices point (`StaticSlice`): ``value``
    broadcast to the slices' items, each sliced axis then gathered back to its full
    length, the items outside the slices kept. No static slice: ``value`` broadcast."""
    slices = {
        position: setitem.index[axis - 1].as_slice()
        for position, axis in enumerate(rest, 1)
        if axis - 1 < len(setitem.index) and isinstance(setitem.index[axis - 1], StaticSlice)
    }
    if not slices:
        return tf.broadcast_to(value, tf.shape(current))
    region = [len(range(*slices[p].indices(n))) if p in slices else n
              for p, n in enumerate(current.shape)][1:]
    if 0 in region:
        return current  # an empty slice: nothing is written
    value = tf.broadcast_to(value, tf.concat([tf.shape(current)[:1], region], 0))
    kept = None
    for position, items in slices.items():
        size = current.shape[position]
        source, hit = np.zeros(size, np.int64), np.zeros(size, bool)
        for k, j in enumerate(range(*items.indices(size))):
            source[j], hit[j] = k, True
        value = tf.gather(value, source, axis=position)
        hit = tf.constant(hit.reshape([size if a == position else 1
                                       for a in range(current.shape.rank)]))
        kept = hit if kept is None else kept & hit
    return tf.where(kept, value, current)

