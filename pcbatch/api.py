"""The user API: `Context` and the batched functions it makes.

Usage::

    ctx = pcbatch.Context()

    @ctx.batch
    def fib(n):
        if n <= 2:
            return 1
        return fib(n - 1) + fib(n - 2)

    fib(np.array([6, 7, 8]))            # array([ 8, 13, 21])
    fib(np.array([6, 7, 8]), dry_run=True)   # the same, one example at a time

Functions are compiled from their source on first call: the function called and
every function of the context it can reach, decorated in any order before the call
(so they may call each other in any order; an unrelated function's mistakes wait for
its own call), and the lowered program is cached per argument
signature and backend. A call compiles again when a global or closure value the
functions read has changed since (`pcbatch.frontend.snapshot`), as Python reads
globals anew at every call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import sys
import threading
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from pcbatch import running, tracebacks
from pcbatch.analysis.assignment import maybe_unassigned_reads
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.dsl import ModuleBuilder
from pcbatch.errors import BatchSizeError, NestedBatchedCallError
from pcbatch.frontend import (
    comprehensions,
    desugar,
    fence,
    local_functions,
    loop_else,
    statics,
    unbound,
)
from pcbatch.frontend.parse import ParsedFunction, parse_function
from pcbatch.frontend.snapshot import Snapshot, names_read
from pcbatch.frontend.statics import Specialised, Statics, is_static_value
from pcbatch.frontend.to_ir import Translator
from pcbatch.ir.nodes import Function, Module, Program, SourceLoc
from pcbatch.ir.types import is_pattern_node, is_python_scalar, map_pattern, rebuild
from pcbatch.passes import order_blocks, pipeline
from pcbatch.vm import refill, runner
from pcbatch.vm.failures import DEFAULT_MAX_STACK_DEPTH

CALL_OPTIONS = (
    "dry_run",
    "stackless",
    "max_stack_depth",
    "backend",
    "block_code_cache",
    "max_steps",
    "schedule",
    "return_status",
)

#: options of `BatchedFunction.map` besides the call options
MAP_OPTIONS = ("width", "group", "priority")

#: the backends ``backend=`` takes by name
BACKEND_NAMES = ("numpy", "jax", "tensorflow", "torch")

_dry_run = threading.local()

_T = TypeVar("_T")


def _in_dry_run() -> bool:
    return getattr(_dry_run, "depth", 0) > 0


def _not_for_autograph(entity: _T) -> _T:
    """Marks ``entity`` (a class, for calls of its instances, or a method) for
    TensorFlow's AutoGraph to call as written.

    A user's `tf.function` converts the Python it calls by default, pcbatch's compiler
    and machine included: converted, a batched Fibonacci x100 took 13 s to trace inside
    one, against 0.55 s as written. The mark is the attribute that
    ``tf.autograph.experimental.do_not_convert`` sets; it is set here so that pcbatch
    need not import TensorFlow."""
    entity.autograph_info__ = frozenset()  # type: ignore[attr-defined]
    return entity


@_not_for_autograph
class BatchedFunction:
    """A function decorated by `Context.batch`: call it on a batch.

    Arguments bind as in Python (positional, keyword, keyword-only, positional-only).
    An argument passed is a batch: arrays (or numbers) with a leading batch dimension,
    or 0-d values shared by every example; a list of numbers or of equally shaped
    arrays is read as ``np.asarray`` reads it; a tuple (or namedtuple) is a structured
    per-example value, one batch per field. A parameter not passed takes its default,
    the same value for every example. A None or text argument (passed or by default)
    is fixed for the call: the function is compiled for that value, and tests on it
    choose their branch when compiling (`pcbatch.frontend.statics`). None is no batched
    value elsewhere (see docs/semantics/calls.md).

    Call options (keyword-only, besides the function's own arguments):
      dry_run: run the plain Python function on each batch member separately
        (its values without the batch dimension) and stack the results.
      stackless: use the stackless interpreter (recursion through Python).
      max_stack_depth: the deepest recursion allowed (default 15); a non-negative
        int. On JAX and TensorFlow the stacks are allocated whole up front, so a
        depth whose stacks would not fit in memory is a ValueError.
      backend: the array backend: a backend object, or "numpy", "jax" or
        "tensorflow" (default: from the arguments; NumPy arrays give `NumpyBackend`).
      block_code_cache: a dict for compiled block code to live across calls
        (used by compiled backends; accepted and ignored on NumPy).
      max_steps: stop with `StepLimitError`, naming the lines where threads still
        run, after this many VM steps (a non-negative int; default None: no bound).
      schedule: the scheduling policy, "most_threads" (default), "lowest_pc" or
        "returns_first" (see `pcbatch.passes.order_blocks`); results are the same
        under every policy.
      return_status: return ``(results, status)``, status one `pcbatch.LaneStatus`
        per batch member (0: finished); a member whose recursion overflowed or that
        max_steps stopped raises nothing and gets a fill value (NaN, the smallest
        integer) while the others' results stay right. Without it a failure raises:
        at once, or, inside your ``jax.jit`` or ``tf.function``, when the run executes
        (docs/semantics/failures.md).

    A keyword naming one of the function's own parameters goes to that parameter,
    as in Python, even where it is also an option's name: for ``def newton(a,
    max_steps=50)``, ``newton(a, max_steps=1000)`` runs 1000 iterations. Such an
    option is given through `with_options`:
    ``newton.with_options(max_steps=10_000)(a, max_steps=1000)``.
    """

    #: how the compiler recognizes a batched function without importing this module
    is_batched_function = True

    def __init__(
        self,
        context: Context,
        function: Callable[..., Any],
        type_inference: Callable[..., Any] | None,
    ) -> None:
        self.context = context
        self.python_function = function
        self.type_inference = type_inference
        self.name = function.__name__
        self.signature = inspect.signature(function)
        functools.update_wrapper(self, function)

    def __repr__(self) -> str:
        return f"<batched function {self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _in_dry_run():
            return self.python_function(*args, **kwargs)
        self._check_not_nested()
        try:
            return self._call(args, kwargs, {})
        except Exception as e:
            _drop_internal_frames(e)
            raise

    def with_options(self, **options: Any) -> OptionedFunction:
        """This function with call options fixed: ``fn.with_options(max_steps=1000)(x)``.

        The way to pass an option whose name is also one of the function's own
        parameters (a keyword argument goes to the parameter, as in Python). Takes the
        call options and map's ``width``, ``group`` and ``priority``; the result is
        called, or ``.map``-ed, as the function is."""
        _check_option_names(self.name, options, CALL_OPTIONS + MAP_OPTIONS)
        _checked_options(self.name, options)
        return OptionedFunction(self, options)

    @_not_for_autograph
    def map(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the function on N independent inputs through ``width`` lanes, refilling.

        Call as ``fn.map(*args, width=B, group=None, priority=None, **kwargs)``.
        Arguments are given as for a batched call, each with a leading dimension N
        (the number of inputs; a value without it is shared by every input), and
        the same call options apply. The run uses ``min(width, N)`` lanes: when a
        lane's thread returns, the lane takes the next pending input in the same run
        loop, so lanes stay busy while long inputs finish. Results
        come back in input order, equal to ``self(*args)``. For example,
        ``collatz.map(np.arange(1, 100_001), width=1000)`` runs 100,000 inputs
        through 1,000 lanes. Free lanes are refilled together once ``group`` of them
        are free (default: a tenth of the lanes; 1 refills each lane at once), so new
        threads run main's first blocks together. ``stackless=True`` is not supported
        (ValueError).

        ``priority`` (one number per input, e.g. an estimate of its cost) sets the
        order in which inputs start: highest first, ties in input order. Starting
        the longest inputs first keeps the run from ending on a few long threads
        with every other lane idle (Fibonacci over n in [5, 22]: occupancy 0.67 in
        input order, 0.99 with ``priority=n``). Results stay in input order.

        If the function has a parameter named ``width``, ``group`` or ``priority``,
        that keyword goes to the function; give map's through `with_options`.
        """
        if _in_dry_run():
            raise TypeError(f"{self.name}.map() cannot be called inside a batched function")
        self._check_not_nested(".map")
        try:
            return self._map(args, kwargs, {})
        except Exception as e:
            _drop_internal_frames(e)
            raise

    def _check_not_nested(self, method: str = "") -> None:
        """Refuses a call from plain code that a running batched program calls."""
        outer = running.current()
        if outer is None:
            return
        outer_name, outer_context = outer
        caller = sys._getframe(2)  # the helper's frame: __call__ or map is between
        at = f"{caller.f_code.co_filename}, line {caller.f_lineno}, in {caller.f_code.co_name}"
        same = "" if outer_context is self.context else f"{self.name!r} and "
        raise NestedBatchedCallError(
            f"the batched function {self.name!r} was called ({self.name}{method}(...) at "
            f"{at}) while the batched function {outer_name!r} runs: from a plain helper (or "
            f"a lambda or comprehension) that {outer_name!r} calls, which runs on the whole "
            "batch at once, so this call would start a batched run of its own instead of "
            f"the per-example call written. Decorate {same}that helper with the same "
            f"ctx.batch as {outer_name!r} (then {self.name!r} is a batched call); or, if "
            f"{self.name!r} has no control flow and calls no batched function, call "
            f"{self.name}.python_function(...) there"
        )

    # -- calling -------------------------------------------------------------------
    def _option_keywords(
        self, kwargs: dict[str, Any], names: Sequence[str], preset: dict[str, Any]
    ) -> dict[str, Any]:
        """Pops the call options out of ``kwargs``: a keyword naming one of the
        function's own parameters stays the function's, as in Python."""
        options = dict(preset)
        for name in names:
            if name in kwargs and not self._takes_keyword(name):
                if name in preset:
                    raise TypeError(
                        f"{self.name}(): call option {name!r} given twice (in with_options "
                        "and in the call)"
                    )
                options[name] = kwargs.pop(name)
        return _checked_options(self.name, options)

    def _takes_keyword(self, name: str) -> bool:
        param = self.signature.parameters.get(name)
        return param is not None and param.kind != inspect.Parameter.POSITIONAL_ONLY

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any], preset: dict[str, Any]) -> Any:
        kwargs = dict(kwargs)
        options = self._option_keywords(kwargs, CALL_OPTIONS, preset)
        misplaced = [k for k in MAP_OPTIONS if k in options]
        if misplaced:
            raise TypeError(
                f"{self.name}(): option {misplaced[0]!r} belongs to {self.name}.map(); "
                "a call takes only the call options"
            )
        bound = self._bind(args, kwargs)
        if options.get("dry_run"):
            results = _dry_run_call(self, bound)
            if options.get("return_status"):  # a plain run has no limits to fail
                size = _batch_size(bound.values, self.name)
                return results, np.zeros(size, np.int32)
            return results
        results = self.context._run(self.name, bound.batched_values(), options, bound.statics)
        if _one_example_under_vmap(bound):
            return map_pattern(lambda leaf: leaf[0], results)
        return results

    def _map(self, args: tuple[Any, ...], kwargs: dict[str, Any], preset: dict[str, Any]) -> Any:
        kwargs = dict(kwargs)
        options = self._option_keywords(kwargs, CALL_OPTIONS + MAP_OPTIONS, preset)
        if "width" not in options:
            raise TypeError(
                f"{self.name}.map() needs width=... (the number of lanes)"
                + (
                    f"; {self.name} has a parameter named 'width', so give map's through "
                    f"{self.name}.with_options(width=...).map(...)"
                    if self._takes_keyword("width")
                    else ""
                )
            )
        width = refill.check_width(options.pop("width"))
        group = options.pop("group", None)
        refill.group_size(group, width)
        priority = options.pop("priority", None)
        bound = self._bind(args, kwargs)
        if options.get("stackless"):
            raise ValueError(f"{self.name}.map() runs on the stack machine; drop stackless=True")
        if options.get("dry_run"):
            return _dry_run_call(self, bound)
        refill_plan = (width, group, priority)
        return self.context._run(
            self.name, bound.batched_values(), options, bound.statics, refill=refill_plan
        )

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(
                f"{self.name}(): {e}. Call options are: {', '.join(CALL_OPTIONS)}"
            ) from None
        values: list[Any] = []
        statics: list[tuple[str, Any]] = []
        passed = bound.arguments
        for name, param in self.signature.parameters.items():
            what = f"{self.name}(): argument {name!r}"
            value = passed.get(name, param.default)
            if is_static_value(value):
                # None or text: the same for every example, so the program is compiled
                # for this value (`pcbatch.frontend.statics`), as Python's branches on it
                # would go the same way for every example
                values.append(value)
                statics.append((name, value if value is None else str(value)))  # np.str_ too
            elif name in passed:
                values.append(_as_array_pattern(value, what))
            else:
                values.append(_default_value(self.name, name, param.default))
        return Bound(self.signature, values, dict(passed), tuple(statics))


@dataclasses.dataclass(frozen=True)
class Bound:
    """A call's arguments: ``values`` (one per parameter, in order, defaults included,
    as the batched run takes them) and ``passed`` (the caller's own, by name)."""

    signature: inspect.Signature
    values: list[Any]
    passed: dict[str, Any]
    #: (name, value) of each parameter whose value is None or text, in parameter order:
    #: fixed for the whole call, compiled in (`pcbatch.frontend.statics`)
    statics: tuple[tuple[str, Any], ...] = ()

    def batched_values(self) -> list[Any]:
        """``values`` without the static ones: what the compiled program takes."""
        static = {name for name, _ in self.statics}
        return [v for v, name in zip(self.values, self.signature.parameters) if name not in static]

    def python_call(self, i: int) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) calling the plain function on example ``i``: only what the
        caller passed, so Python applies the defaults itself."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for k, (name, param) in enumerate(self.signature.parameters.items()):
            if name not in self.passed:
                continue
            value = _example(self.values[k], i)
            if param.kind == inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[name] = value
        return args, kwargs


@_not_for_autograph
class OptionedFunction:
    """A batched function with call options fixed (`BatchedFunction.with_options`)."""

    def __init__(self, batched: BatchedFunction, options: dict[str, Any]) -> None:
        self.batched = batched
        self.options = dict(options)

    def __repr__(self) -> str:
        return f"<batched function {self.batched.name} with options {self.options}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _in_dry_run():
            raise TypeError(
                f"{self.batched.name}.with_options(...) cannot be called inside a batched "
                f"function; call {self.batched.name}(...) there"
            )
        try:
            return self.batched._call(args, kwargs, self.options)
        except Exception as e:
            _drop_internal_frames(e)
            raise

    @_not_for_autograph
    def map(self, *args: Any, **kwargs: Any) -> Any:
        """`BatchedFunction.map` with these options."""
        if _in_dry_run():
            raise TypeError(f"{self.batched.name}.map() cannot be called inside a batched function")
        try:
            return self.batched._map(args, kwargs, self.options)
        except Exception as e:
            _drop_internal_frames(e)
            raise

    def with_options(self, **options: Any) -> OptionedFunction:
        _check_option_names(self.batched.name, options, CALL_OPTIONS + MAP_OPTIONS)
        _checked_options(self.batched.name, options)
        return OptionedFunction(self.batched, {**self.options, **options})


def _drop_internal_frames(error: Exception) -> None:
    """Drops pcbatch's frames below the API entry from ``error``'s traceback, so that it
    ends in the user's code."""
    error.__traceback__ = tracebacks.without_internal_frames(error.__traceback__)


def _one_example_under_vmap(bound: Bound) -> bool:
    """Whether ``jax.vmap`` calls the function on one example: every argument passed is
    0-d and some is vmap's tracer. Python numbers and 0-d arrays are a batch of one
    (results with a leading axis of 1), but under ``jax.vmap(f)(xs)`` each call is one
    example of ``xs``, so the results drop that axis and ``vmap(f)(xs)`` equals
    ``f(xs)`` (shape ``(n,)``, not ``(n, 1)``). JAX has no public test for vmap's
    tracer; its class name is stable across releases."""
    leaves = [leaf for name in bound.passed for leaf in _leaves(bound.passed[name])]
    return (
        bool(leaves)
        and all(np.ndim(leaf) == 0 for leaf in leaves)
        and any(_vmap_tracer(leaf) for leaf in leaves)
    )


def _vmap_tracer(leaf: Any) -> bool:
    """vmap's tracer, or a forward-mode tracer around one (``vmap`` of ``jvp``)."""
    for _ in range(8):
        if type(leaf).__name__ == "BatchTracer":
            return True
        leaf = getattr(leaf, "primal", None)
        if leaf is None:
            return False
    return False


def _default_value(function: str, param: str, default: Any) -> Any:
    """A parameter's default as a batched argument: the same value for every example
    (a leading axis of size 1, which broadcasts over the batch)."""
    if default is inspect.Parameter.empty:  # bind() has checked that it was passed
        raise AssertionError(f"{function}(): {param!r} has no value")
    value = _as_array_pattern(default, f"{function}(): the default of {param!r}")
    return map_pattern(lambda leaf: leaf if np.ndim(leaf) == 0 else leaf[None], value)


def _checked_options(function: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked, each a TypeError or ValueError naming the option."""
    checked = dict(options)
    for flag in ("dry_run", "stackless", "return_status"):
        if flag in options and not isinstance(options[flag], (bool, np.bool_)):
            raise TypeError(f"{function}(): {flag} takes True or False, got {options[flag]!r}")
    if "max_stack_depth" in options:
        checked["max_stack_depth"] = runner.check_count(
            function, "max_stack_depth", options["max_stack_depth"]
        )
    if options.get("max_steps") is not None:
        checked["max_steps"] = runner.check_count(
            function, "max_steps", options["max_steps"], "or None"
        )
    if "backend" in options:
        _check_backend(function, options["backend"])
    cache = options.get("block_code_cache")
    if cache is not None and not isinstance(cache, dict):
        raise TypeError(f"{function}(): block_code_cache takes a dict or None, got {cache!r}")
    if "schedule" in options:
        schedule = options["schedule"]
        if not isinstance(schedule, str):
            raise TypeError(f"{function}(): schedule takes a policy's name, got {schedule!r}; "
                            f"choose one of {', '.join(order_blocks.POLICIES)}")
        order_blocks.check_policy(schedule)
    if "width" in options:
        refill.check_width(options["width"])
    if options.get("group") is not None:
        refill.check_width(options["group"], "group")
    return checked


def _check_backend(function: str, backend: Any) -> None:
    if backend is None or (isinstance(backend, str) and backend in BACKEND_NAMES):
        return
    if not isinstance(backend, str) and all(
        hasattr(backend, a) for a in ("type_of", "run_on_dummies", "vectorize")
    ):
        return
    raise TypeError(
        f"{function}(): backend takes None, a name ({', '.join(map(repr, BACKEND_NAMES))}), "
        f"or a backend object (pcbatch.NumpyBackend(), pcbatch.JaxBackend(), "
        f"pcbatch.backends.tensorflow.TensorFlowBackend(), pcbatch.TorchBackend()); got {backend!r}"
    )


def _check_option_names(function: str, options: dict[str, Any], names: Sequence[str]) -> None:
    unknown = [k for k in options if k not in names]
    if unknown:
        raise TypeError(
            f"{function}.with_options(): unknown option {unknown[0]!r}; the options are: "
            f"{', '.join(names)}"
        )


# Array kinds a primitive can compute on: bool, signed and unsigned ints, floats, complex.
_NUMERIC_KINDS = "biufc"


def _as_array_pattern(value: Any, what: str = "argument") -> Any:
    """``value`` with every leaf an array: a tuple (or namedtuple) is a pattern of
    per-example fields, a list is one array (as ``np.asarray`` makes it)."""
    if isinstance(value, list):
        return _list_as_array(value, what)
    if is_pattern_node(value):
        return rebuild(value, [_as_array_pattern(v, what) for v in value])
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        if (type(value).__module__ or "").startswith("torch"):
            _check_torch_dtype(value, what)
        if isinstance(value, np.ndarray) and not value.dtype.isnative:
            # big-endian data read from a file: Torch and JAX take only native byte order
            return value.astype(value.dtype.newbyteorder("="))
        return value  # an array of some library: the backend takes it as it is
    if is_python_scalar(value):
        return value  # the same number in every example, weak as in Python (NEP 50)
    if value is None:
        raise TypeError(
            f"{what}: None is not a batched value; pass numbers or arrays (for an optional "
            "value, a boolean flag beside it, or a sentinel number such as np.nan)"
        )
    if isinstance(value, dict):
        raise TypeError(
            f"{what}: a dict is not a batched argument; pass its arrays as a namedtuple "
            f"(collections.namedtuple('Params', {sorted(map(str, value))!r})(**params)) "
            "or a tuple, whose fields a batched function reads as p.name or p[0]"
        )
    try:
        array = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - any conversion failure is the user's input
        raise TypeError(f"{what}: cannot use {value!r} as a batched argument: {e}") from None
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{what}: cannot use {_short(value)} as a batched argument: it becomes a NumPy "
            f"array of dtype {array.dtype}, not of numbers or booleans"
            + (_STRING_ADVICE if array.dtype.kind in "SU" else "")
        )
    return array


_STRING_ADVICE = (
    "; a string is no per-example value: to choose between modes, use a boolean or int "
    "flag (fast=True, mode=0), or read a module-level constant (MODE = 'fast')"
)


def _check_torch_dtype(value: Any, what: str) -> None:
    """A tensor of a dtype NumPy lacks (bfloat16) has no NumPy meaning: refused, named."""
    from pcbatch.backends.torch import numpy_dtype

    try:
        numpy_dtype(value.dtype)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None


def _list_as_array(value: list[Any], what: str) -> np.ndarray[Any, Any]:
    """A list is a batch, one element per example, as ``np.asarray`` reads it."""
    advice = (
        "a list is read as one array (a batch, one element per example); pass an array, "
        "or a tuple for a structured value (one batch per field)"
    )
    if any(isinstance(v, tuple) for v in value):
        raise TypeError(f"{what}: a list of tuples is not a batched argument; {advice}")
    try:
        array = np.asarray(value)
    except Exception as e:  # noqa: BLE001 - ragged or unconvertible: the user's input
        raise TypeError(f"{what}: cannot use {_short(value)} as a batched argument ({e}); "
                        f"{advice}") from None
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{what}: cannot use {_short(value)} as a batched argument: it becomes a NumPy "
            f"array of dtype {array.dtype}, not of numbers or booleans; {advice}"
        )
    return array


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _batch_size(values: list[Any], function: str = "", params: Sequence[str] = ()) -> int:
    """The common batch size of ``values`` (size-1 and 0-d leaves broadcast)."""
    sizes: dict[int, str] = {}
    for k, value in enumerate(values):
        for leaf in _leaves(value):
            if np.ndim(leaf) >= 1 and np.shape(leaf)[0] != 1:
                name = params[k] if k < len(params) else f"#{k}"
                sizes.setdefault(int(np.shape(leaf)[0]), name)
    if len(sizes) > 1:
        (n1, a1), (n2, a2) = list(sizes.items())[:2]
        raise BatchSizeError(
            f"{function}(): argument {a1!r} has batch size {n1} but argument {a2!r} has "
            f"batch size {n2}; give every argument the same batch size, or size 1 to broadcast"
        )
    return next(iter(sizes)) if sizes else 1


def _leaves(value: Any) -> list[Any]:
    if is_pattern_node(value):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _example(value: Any, i: int) -> Any:
    """Batch member ``i`` of an argument (no batch dimension); size-1 batches broadcast.

    A NumPy member is a copy of its own, not a view: the plain function may change it in
    place (``x += 1``, ``x[0] = 5``), and that must reach neither the caller's array nor
    the other examples (a shared 0-d or size-1 batch), as it reaches neither in a
    batched run."""
    if is_pattern_node(value):
        return rebuild(value, [_example(v, i) for v in value])
    shared = np.ndim(value) == 0 or np.shape(value)[0] == 1
    member = value if np.ndim(value) == 0 else value[0 if shared else i]
    return member.copy() if isinstance(member, np.ndarray) else member


def _stack(results: list[Any]) -> Any:
    """The per-example results as one batch. Where some examples return a Python number
    and others an array, the numbers are weak (NEP 50), as in the batched run: ``0``
    beside a float32 is stored as float32."""
    first = results[0]
    if is_pattern_node(first):
        return rebuild(first, [_stack([r[k] for r in results]) for k in range(len(first))])
    if any(is_python_scalar(r) for r in results) and not all(
        is_python_scalar(r) for r in results
    ):
        try:
            # One operand per distinct dtype or Python type: result_type takes few.
            kinds = {type(r): r for r in results if is_python_scalar(r)}
            dtypes = {np.asarray(r).dtype for r in results if not is_python_scalar(r)}
            dtype = np.result_type(*dtypes, *kinds.values())
            return np.stack([np.asarray(r, dtype) for r in results])
        except (TypeError, ValueError, OverflowError):
            pass  # a number the arrays' dtype cannot hold: NumPy's default stacking
    return np.stack([np.asarray(r) for r in results])


def _dry_run_call(batched: BatchedFunction, bound: Bound) -> Any:
    """Runs the plain function on each batch member alone and stacks the results.

    An empty batch has no example to run; its (empty) results take their dtypes and
    shapes from the compiled program on NumPy, as a batched run's would.
    """
    values = bound_values = bound.values
    device = _torch_device(values)
    if device is not None:  # per-example values are NumPy's (the plain function's meaning)
        values = [map_pattern(_torch_on_host, v) for v in values]
        bound = Bound(bound.signature, values, bound.passed, bound.statics)
    size = _batch_size(values, batched.name, tuple(batched.signature.parameters))
    if size == 0:
        host = [map_pattern(lambda x: x if is_python_scalar(x) else np.asarray(x), v)
                for v in bound.batched_values()]
        return batched.context._run(
            batched.name, host, {"backend": NumpyBackend()}, bound.statics
        )
    try:
        results = _each_example(batched, bound, size)
    except TypeError as error:
        if device is None:
            raise
        from pcbatch.backends import torch as torch_backend

        if not torch_backend.calls_torch_on_numpy(error):
            raise
        # The code calls torch functions on per-example values: each example becomes a
        # one-example torch view, whose NumPy calls mean what they mean on NumPy.
        views = [map_pattern(torch_backend.examples_of, v) for v in bound_values]
        views_bound = Bound(bound.signature, views, bound.passed, bound.statics)
        results = _each_example(batched, views_bound, size)
        results = [torch_backend.example_result(r) for r in results]
    if device is None:
        return _stack(results)
    import torch

    return map_pattern(lambda r: torch.as_tensor(r, device=device), _stack(results))


def _each_example(batched: BatchedFunction, bound: Bound, size: int) -> list[Any]:
    """The plain function's results on each batch member alone."""
    _dry_run.depth = getattr(_dry_run, "depth", 0) + 1
    try:
        results = []
        for i in range(size):
            args, kwargs = bound.python_call(i)
            results.append(batched.python_function(*args, **kwargs))
        return results
    finally:
        _dry_run.depth -= 1


def _torch_device(values: list[Any]) -> Any:
    """The device of the first torch tensor among the arguments, or None if there is none."""
    for value in values:
        for leaf in _leaves(value):
            if (type(leaf).__module__ or "").startswith("torch"):
                return leaf.device
    return None


def _torch_on_host(leaf: Any) -> Any:
    """A torch tensor as a NumPy array of its own (so the plain function's in-place
    operations never reach the caller's tensor); anything else as it is."""
    if (type(leaf).__module__ or "").startswith("torch"):
        return np.array(leaf.detach().cpu().numpy())
    return leaf


class Context:
    """Batches Python functions together; see the module docstring."""

    def __init__(self) -> None:
        self._functions: dict[str, BatchedFunction] = {}
        # IR modules by the names of the functions they hold: `module` holds every
        # function, `program` only main and the batched functions main can reach
        # and main (None: no main), with, for a call with None or text arguments, main's
        # values of those, which the functions are compiled for (`pcbatch.frontend.statics`)
        self._modules: dict[tuple[frozenset[str], str | None, Specialised], Module] = {}
        self._snapshot: Snapshot | None = None  # the globals and closures it was built from
        self._programs: dict[tuple[str, Statics], Program] = {}
        self._cache = runner.CompileCache()
        # the backends whose compile caches hold our programs
        self._backends_used: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.RLock()

    # -- decorating --------------------------------------------------------------
    def batch(
        self,
        function: Callable[..., Any] | None = None,
        *,
        type_inference: Callable[..., Any] | None = None,
    ) -> Any:
        """Decorates a function to run batched: ``@ctx.batch`` or ``@ctx.batch(type_inference=f)``.

        Args:
          function: the function to batch (the bare-decorator form). A lambda here is
            read as the seed's positional ``type_inference`` (``@ctx.batch(lambda ts:
            ...)``), since a batched function cannot be a lambda.
          type_inference: optional; maps the list of argument `Type`s at a call site
            to the result's types (see `normalize_declared_types` for the forms
            accepted). Types are inferred when omitted.
        """
        if function is not None and _is_lambda(function):
            if type_inference is not None:
                raise TypeError("ctx.batch: type_inference given twice (positionally and "
                                "by keyword)")
            function, type_inference = None, function
        if function is None:
            return functools.partial(self._decorate, type_inference=type_inference)
        return self.batch_uncurried(function, type_inference)

    def _decorate(
        self, function: Callable[..., Any], type_inference: Callable[..., Any] | None = None
    ) -> BatchedFunction:
        return self.batch_uncurried(function, type_inference)

    def batch_uncurried(
        self, function: Callable[..., Any], type_inference: Callable[..., Any] | None = None
    ) -> BatchedFunction:
        """The non-decorator form of `batch`."""
        if not isinstance(function, types.FunctionType):
            raise TypeError(f"ctx.batch needs a function defined with def, got {function!r}")
        if function.__name__ == "<lambda>":
            raise ValueError("batched functions must be defined with def, not lambda")
        _check_plain_function(function)
        name = function.__name__
        with self._lock:
            if name in self._functions:
                raise ValueError(
                    f"a function named {name!r} is already batched in this Context; "
                    "rename one of them"
                )
            batched = BatchedFunction(self, function, type_inference)
            self._functions[name] = batched
            self._modules.clear()
            self._snapshot = None  # taken again, with the new function, at the next build
            self._programs.clear()
        return batched

    def function_names(self) -> list[str]:
        """Names of the functions decorated in this context, in decoration order."""
        return list(self._functions)

    # -- compiling -----------------------------------------------------------------
    def module(self) -> Module:
        """The IR `Module` of every function decorated so far (compiled once, then cached)."""
        return self._module_of(frozenset(self._functions))

    def _module_of(
        self, names: frozenset[str], main: str | None = None, specialised: Specialised = None
    ) -> Module:
        """The IR `Module` of the functions ``names`` (built once, then cached), called
        from Python through ``main``, with ``specialised`` = (main, its static values)
        compiled for those values."""
        key = (names, main, specialised)
        with self._lock:
            if key not in self._modules:
                if self._snapshot is None:
                    # Before the build: a value changed while it runs is noticed next call.
                    self._snapshot = Snapshot(self._functions.values())
                chosen = {n: bf for n, bf in self._functions.items() if n in names}
                self._modules[key] = _build_module(chosen, main, specialised)
            return self._modules[key]

    def _forget_if_globals_changed(self) -> None:
        """Rebuilds on the next use when a global or closure value the compiled functions
        read has changed since they were compiled, as Python would read the new value
        (see `pcbatch.frontend.snapshot` for what is noticed)."""
        snapshot = self._snapshot
        if snapshot is None or snapshot.changed() is None:
            return
        with self._lock:
            if self._snapshot is snapshot:
                self._modules.clear()
                self._snapshot = None
                self._programs.clear()
                # Entries of the old programs could never be hit again: drop them.
                self._drop_compiled(self._cache)
                self._cache = runner.CompileCache()

    def _drop_compiled(self, cache: runner.CompileCache) -> None:
        """Removes the compiled backends' entries for the programs in ``cache``."""
        lowered = {id(compiled) for _, compiled in list(cache._entries.values())}
        for backend in list(self._backends_used):
            stale = [
                key
                for key, entry in list(backend.compile_cache.items())
                if id(getattr(entry, "program", None)) in lowered
            ]
            for key in stale:
                backend.compile_cache.pop(key, None)

    def program(self, main: str, statics: Statics = ()) -> Program:
        """``self.module().program(main)``; raises ValueError if ``main`` is not decorated.

        ``statics``: (parameter, value) pairs of main's None or text arguments, which the
        program is compiled for (and does not take as inputs)."""
        self._forget_if_globals_changed()
        with self._lock:
            if main not in self._functions:
                known = ", ".join(self._functions) or "none"
                raise ValueError(
                    f"{main!r} is not a batched function of this Context (known: {known})"
                )
            key = (main, statics)
            if key not in self._programs:
                # Only what main can reach is compiled: a mistake in an unrelated
                # function of this Context is reported when that function is called.
                names = _reachable(self._functions, main)
                module = self._module_of(names, main, (main, statics) if statics else None)
                self._programs[key] = module.program(main)
            return self._programs[key]

    def program_compiled(
        self, main: str, sig: Sequence[Any] | None = None, backend: Any = None
    ) -> Program:
        """The typed, optimized structured program (what the stackless VM runs).

        With ``sig`` or ``backend`` None, type inference is skipped: the result
        is for inspection only.
        """
        return pipeline.compile_program(self.program(main), sig, backend, stop_after="allocate")

    def program_lowered(
        self, main: str, sig: Sequence[Any] | None = None, backend: Any = None
    ) -> Program:
        """The lowered program the stack machine runs (cached per signature and backend).

        With ``sig`` or ``backend`` None, type inference is skipped: the result
        is for inspection only.
        """
        program = self.program(main)
        if sig is None or backend is None:
            return pipeline.compile_program(program, None, None)
        return self._cache.get(program, list(sig), backend, lowered=True)

    def lowered_for_args(self, name: str, args: Sequence[Any], backend: Any = None) -> Program:
        """`program_lowered` for the signature of ``args``."""
        backend = backend or NumpyBackend()
        values = [_as_array_pattern(a) for a in args]
        return self.program_lowered(name, runner.signature_of(values, backend), backend)

    # -- running -----------------------------------------------------------------
    def _run(
        self,
        name: str,
        values: list[Any],
        options: dict[str, Any],
        statics: Statics = (),
        refill: tuple[Any, Any, Any] = (None, None, None),
    ) -> Any:
        backend = _backend_named(options.get("backend")) or _backend_for(values)
        if hasattr(backend, "compile_cache"):
            self._backends_used.add(backend)
        check = getattr(backend, "check_environment", None)
        if check is not None:  # settings of its library that it cannot run under
            check()
        program = self.program(name, statics)
        with running.inside((name, self)):
            return self._run_program(program, values, options, backend, refill)

    def _run_program(
        self,
        program: Program,
        values: list[Any],
        options: dict[str, Any],
        backend: Any,
        refill: tuple[Any, Any, Any],
    ) -> Any:
        return runner.run(
            program,
            values,
            backend=backend,
            max_stack_depth=options.get("max_stack_depth", DEFAULT_MAX_STACK_DEPTH),
            stackless=bool(options.get("stackless", False)),
            max_steps=options.get("max_steps"),
            cache=self._cache,
            block_code_cache=options.get("block_code_cache"),
            schedule=order_blocks.check_policy(options.get("schedule", order_blocks.DEFAULT)),
            width=refill[0],
            group=refill[1],
            priority=refill[2],
            return_status=bool(options.get("return_status", False)),
        )


def _is_lambda(function: Any) -> bool:
    return isinstance(function, types.FunctionType) and function.__name__ == "<lambda>"


def _check_plain_function(function: types.FunctionType) -> None:
    """Rejects what ctx.batch cannot batch, at decoration: async functions, generators
    and functions defined in a class body (methods)."""
    code = function.__code__
    where = f"{function.__qualname__} ({code.co_filename}:{code.co_firstlineno})"
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        raise TypeError(f"ctx.batch: async functions are not supported: {where}; define it "
                        "with a plain def")
    parts = function.__qualname__.split(".")
    if len(parts) > 1 and parts[-2] != "<locals>":
        raise TypeError(
            f"ctx.batch cannot decorate a function defined in a class body: {where}; "
            f"decorate a module-level function and call it from the method (pass what it "
            "needs of self as arguments)"
        )


def _backend_for(values: list[Any]) -> Any:
    """The backend the arguments' arrays belong to: JAX -> JAX, tf.Tensor -> TF,
    torch.Tensor -> Torch (on its device), else NumPy."""
    for value in values:
        for leaf in _leaves(value):
            module = type(leaf).__module__ or ""
            if module.startswith(("jax", "jaxlib")):
                return _shared_backend("jax")
            if module.startswith("tensorflow"):
                return _shared_backend("tensorflow")
            if module.startswith("torch"):
                from pcbatch.backends.torch import TorchBackend

                return TorchBackend(device=leaf.device)  # eager: nothing to share
    return NumpyBackend()


_SHARED: dict[str, Any] = {}


def _backend_named(backend: Any) -> Any:
    """``backend=``'s value: a backend, None, or a name in `BACKEND_NAMES`."""
    if not isinstance(backend, str):
        return backend
    if backend == "torch":
        from pcbatch.backends.torch import TorchBackend

        return TorchBackend()
    return NumpyBackend() if backend == "numpy" else _shared_backend(backend)


def _shared_backend(name: str) -> Any:
    """One instance per compiled backend, so its compile cache lives across calls."""
    if name not in _SHARED:
        if name == "jax":
            from pcbatch.backends.jax import JaxBackend

            _SHARED[name] = JaxBackend()
        else:
            from pcbatch.backends.tensorflow import TensorFlowBackend

            _SHARED[name] = TensorFlowBackend()
    return _SHARED[name]


def _reachable(functions: dict[str, BatchedFunction], main: str) -> frozenset[str]:
    """``main`` and the batched functions of its Context that it may call, directly or
    through one another: those whose name, or whose value as a global or closure
    variable, its code reads (a superset of what it calls, so never too few)."""
    ours = {id(bf): name for name, bf in functions.items()}
    ours.update({id(bf.python_function): name for name, bf in functions.items()})
    seen, todo = {main}, [main]
    while todo:
        function = functions[todo.pop()].python_function
        code = function.__code__
        values = [function.__globals__.get(n) for n in names_read(code)]
        for cell in function.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                values.append(cell.cell_contents)
        named = set(names_read(code) | set(code.co_freevars)) & functions.keys()
        for callee in named | {ours[id(v)] for v in values if id(v) in ours}:
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return frozenset(seen)


def _build_module(
    functions: dict[str, BatchedFunction], main: str | None, specialised: Specialised
) -> Module:
    parsed, contexts = {}, {}
    for name, bf in functions.items():
        fixed = dict(specialised[1]) if specialised and specialised[0] == name else {}
        outer, lifted = local_functions.lift(parse_function(bf.python_function), fixed)
        for p in (outer, *lifted):
            parsed[p.name] = desugar.for_loops(loop_else.flags(comprehensions.reductions(p)))
            contexts[p.name] = bf.context
    batched_names = frozenset(functions)
    for p in parsed.values():
        fence.check(p, batched_names)
    mb = ModuleBuilder()
    for name, p in parsed.items():
        static = statics.static_names(specialised, name)
        params = tuple(n for n in p.signature.parameters if n not in static)
        mb.declare(name, params=params, returns=1)
    for p in parsed.values():
        _define(mb, p, functions, contexts[p.name], main, specialised)
    module = mb.module()
    return Module(tuple(
        _finished(fn, functions[fn.name].type_inference if fn.name in functions else None)
        for fn in module.functions
    ))


def _define(
    mb: ModuleBuilder,
    p: ParsedFunction,
    functions: dict[str, BatchedFunction],
    context: Context,
    main: str | None,
    specialised: Specialised,
) -> None:
    loc = SourceLoc(p.filename, p.name, p.tree.lineno)

    by_python_function = {id(bf.python_function): bf for bf in functions.values()}

    def resolve(value: Any) -> BatchedFunction | ParsedFunction | None:
        """The batched function of this Context that ``value`` is, else None; also when
        ``value`` is its plain function (``ctx.batch_uncurried(fib)`` leaves the global
        ``fib`` plain, and a call through it is still a batched call), or the hidden name
        of a function defined inside one (its lifted `ParsedFunction`)."""
        if isinstance(value, local_functions.LocalFunction):
            return value.parsed  # a function defined inside one (`local_functions`)
        value = by_python_function.get(id(value), value)
        if isinstance(value, BatchedFunction) and value.context is context:
            return value
        return None

    with mb.define(p.name, loc=loc) as fb:
        Translator(p, fb, resolve, specialised, is_main=p.name == main).function_body()
    _, error = mb._defined[p.name]
    if error:
        last = p.tree.body[-1]
        raise p.syntax_error(
            last,
            "the function can reach the end of its body without returning a value; "
            "add a return statement",
        )


def _finished(fn: Function, type_inference: Callable[..., Any] | None) -> Function:
    """The built function with its declared types and Python's possibly-unbound locals."""
    fn = dataclasses.replace(
        fn,
        type_inference=type_inference if type_inference is not None else fn.type_inference,
        maybe_unbound=maybe_unassigned_reads(fn),
    )
    return unbound.guard(fn)


__all__ = ["BatchedFunction", "Context", "pipeline"]
