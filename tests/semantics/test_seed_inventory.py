"""Inventory of the seed pages' names: every one, and whether pcbatch has it.

The seed (``tfp.experimental.auto_batching``) is documented by five reference pages
(``shared/seeds/000_*.txt`` ... ``004_*.txt``; their README says which is which). ``ROWS``
below lists, page by page, every module, class, function, method, property, field,
constructor argument and call option those pages name, with what pcbatch does about it:

- ``yes``: pcbatch has it under that name, and it means what the page says;
- ``differs``: pcbatch has it, but its meaning differs from the page (the note says how,
  and ``docs/migrating-from-tfp.md`` must say so too: ``doc`` is a phrase found there);
- ``absent``: pcbatch does not have it, deliberately (the note gives the reason, and the
  migration guide must say so: ``doc``).

Each row is checked: the name resolves from ``import pcbatch`` (or, for ``absent``, does
not); a callable accepts every documented parameter by keyword (``**kwargs`` counts),
with the page's default where the page shows one; for a ``yes`` callable the documented
parameters also come first, in the page's order, and whatever pcbatch adds has a default,
so a call written against the page works unchanged. ``MEANING`` holds a short check of
what the name does, for the rows whose page says what that is.

``docs/seed-api-inventory.md`` is rendered from ``ROWS``: after changing the table, run
``PYTHONPATH=. python tests/semantics/test_seed_inventory.py`` to rewrite it (a test
fails while the file and the table disagree).

TensorFlow is imported only by the rows marked ``tf`` (skipped where it is missing).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
import sys
import types

import numpy as np
import pytest

import pcbatch

ROOT = pathlib.Path(__file__).resolve().parents[2]
INVENTORY_DOC = ROOT / "docs" / "seed-api-inventory.md"
MIGRATION_DOC = ROOT / "docs" / "migrating-from-tfp.md"

PAGES = {
    "000": "`Context`, the older page",
    "001": "`Context`, the newer page",
    "002": "the package `tfp.experimental.auto_batching`",
    "003": "`PrimOp`",
    "004": "`NumpyBackend`",
    "issue 25": "backend constructor arguments (not on the pages)",
}

#: the seed pages' files (in ``shared/seeds/``)
PAGE_FILES = {
    "000": "000_a0b6a59be3366d36.txt",
    "001": "001_71d6dcd3954b5b06.txt",
    "002": "002_4069189d0350af2d.txt",
    "003": "003_8c94c6baafb22f3d.txt",
    "004": "004_8c7cf1144fe76680.txt",
}

STATUSES = ("yes", "differs", "absent")

#: an option is a keyword the batched function takes; an argument, a constructor's keyword
KINDS = ("module", "class", "constructor", "function", "method", "property", "field", "option",
         "argument")


@dataclasses.dataclass(frozen=True)
class Row:
    page: str  # a key of PAGES
    kind: str  # one of KINDS
    name: str  # as the page writes it
    path: str  # where pcbatch has it, from ``import pcbatch``
    params: tuple | None = ()  # documented parameters ("name" or "name=default"); None
    #                            where the page elides them; for a field, option or
    #                            argument, its name
    status: str = "yes"
    note: str = ""
    doc: str = ""  # for differs/absent: a phrase docs/migrating-from-tfp.md contains
    tf: bool = False  # needs TensorFlow

    @property
    def key(self) -> str:
        """The pcbatch name this row is about (the same on every page that names it)."""
        if self.kind in ("option", "argument", "field"):
            return f"{self.path}:{self.params[0]}"
        return self.path


def _rows_context(page: str, optional_sig: bool) -> list[Row]:
    """The rows of a `Context` page (000 and 001 name the same things)."""
    sig = ("main", "sig=None", "backend=None") if optional_sig else ("main", "sig", "backend")
    shown = ", ".join(sig)
    compiled_status, compiled_note, compiled_doc = (
        ("yes", "the typed, optimized program before lowering, which the stackless "
         "machine runs; type inference is skipped when `sig` or `backend` is None", "")
        if optional_sig else
        ("differs", "pcbatch returns the program before lowering, as the newer page (001) "
         "says; this page says it is lowered too. `program_lowered` gives the lowered one",
         "`program_compiled` stops before lowering")
    )
    return [
        Row(page, "class", "Context", "pcbatch.Context",
            note="also `pcbatch.frontend.Context`"),
        Row(page, "class", "frontend.Context", "pcbatch.frontend.Context",
            note="the same class as `pcbatch.Context`"),
        Row(page, "constructor", "Context()", "pcbatch.Context", note="takes no arguments"),
        Row(page, "method", "Context.batch(type_inference)", "pcbatch.Context.batch",
            ("type_inference",), "differs",
            "`type_inference` is keyword-only and optional; a positional `def` function is "
            "decorated (pcbatch's bare `@ctx.batch`), a positional lambda is still read as "
            "`type_inference`. A name already batched in the Context is a ValueError, as "
            "the page says",
            "Positional `ctx.batch(f)` decorates `f`"),
        Row(page, "method", "Context.batch_uncurried(function, type_inference)",
            "pcbatch.Context.batch_uncurried", ("function", "type_inference"),
            note="`type_inference` may be omitted (types are then inferred); a lambda is a "
            "ValueError"),
        Row(page, "method", "Context.function_names()", "pcbatch.Context.function_names",
            note="a list, in the order the functions were decorated"),
        Row(page, "method", "Context.lowered_for_args(name, args, backend)",
            "pcbatch.Context.lowered_for_args", ("name", "args", "backend"),
            note="`backend` may be omitted: `NumpyBackend()`"),
        Row(page, "method", "Context.module()", "pcbatch.Context.module",
            note="an `instructions.Module`"),
        Row(page, "method", "Context.program(main)", "pcbatch.Context.program", ("main",),
            note="`self.module().program(main)`; a `main` not batched is a ValueError"),
        Row(page, "method", f"Context.program_compiled({shown})",
            "pcbatch.Context.program_compiled", sig, compiled_status, compiled_note,
            compiled_doc),
        Row(page, "method", f"Context.program_lowered({shown})",
            "pcbatch.Context.program_lowered", sig,
            note="lowered, cached per signature and backend; untyped (for reading) when "
            "`sig` or `backend` is None"),
        Row(page, "option", "dry_run", "pcbatch.Context.batch", ("dry_run",),
            note="runs the plain Python function one example at a time"),
        Row(page, "option", "stackless", "pcbatch.Context.batch", ("stackless",),
            note="the stackless interpreter; it runs on NumPy (not in a TensorFlow graph)"),
        Row(page, "option", "max_stack_depth", "pcbatch.Context.batch", ("max_stack_depth",),
            note="default 15; deeper recursion is a `StackOverflowError` (a ValueError); "
            "ignored by `stackless`"),
        Row(page, "option", "backend", "pcbatch.Context.batch", ("backend",), "differs",
            "takes `NumpyBackend()` or `TensorFlowBackend()` (also `JaxBackend()` or a "
            "name); when omitted it follows the arguments (NumPy arrays: NumPy; "
            "`tf.Tensor`: TensorFlow), where the page makes TensorFlow the default",
            "The default backend follows the arguments"),
        Row(page, "option", "block_code_cache", "pcbatch.Context.batch", ("block_code_cache",),
            note="a dict (or None) where compiled backends keep block code across calls; "
            "NumPy and `stackless` ignore it"),
        Row(page, "class", "instructions.Module", "pcbatch.instructions.Module"),
        Row(page, "method", "instructions.Module.program(main)",
            "pcbatch.instructions.Module.program", ("main",)),
        Row(page, "class", "instructions.Program", "pcbatch.instructions.Program"),
        Row(page, "class", "instructions.Type", "pcbatch.instructions.Type",
            note="the same class as `pcbatch.Type`"),
        Row(page, "class", "instructions.TensorType", "pcbatch.instructions.TensorType",
            note="the same class as `pcbatch.TensorType`"),
    ]


_MODULE_NOTES = {
    "allocation_strategy": "re-exports pcbatch's variable-allocation pass",
    "dsl": "pcbatch's builder for IR programs",
    "frontend": "the Python-source frontend; has `Context` and `truthy`",
    "instructions": "the IR: `Module`, `Program`, `PrimOp`, `Type`, `TensorType`, ...",
    "liveness": "re-exports pcbatch's liveness analysis",
    "lowering": "re-exports pcbatch's call lowering",
    "numpy_backend": "has `NumpyBackend`",
    "tf_backend": "has `TensorFlowBackend`; importing it imports TensorFlow",
    "type_inference": "re-exports pcbatch's type inference pass",
    "virtual_machine": "pcbatch's stack machine: `execute`, `run`, ...",
    "xla": "`compile_nested_output`; TensorFlow is imported when it is called",
}

_NUMPY_METHODS = [
    ("any", ("t", "name=None"), "NumPy's `any`"),
    ("assert_matching_dtype", ("expected_dtype", "val", "message=''"),
     "a ValueError when the dtypes differ"),
    ("batch_size", ("val", "name=None"), "the size of the first dimension"),
    ("broadcast_to_shape_of", ("val", "target", "name=None"),
     "`val` with `target`'s shape (and dtype)"),
    ("cond", ("pred", "true_fn", "false_fn", "name=None"),
     "calls one of the two (argument-less) callables"),
    ("create_variable", ("name", "alloc", "type_", "max_stack_depth", "batch_size"),
     "a zero-initialized variable; a `FULL` one has a stack"),
    ("equal", ("t1", "t2", "name=None"), ""),
    ("full_mask", ("size", "name=None"), "all True, shape `[size]`"),
    ("initial_program_counter", ("size", "dtype", "name=None"),
     "zeros of shape `[size]` in `dtype` (int64 when `dtype` is None)"),
    ("merge_dtypes", ("dt1", "dt2"), "NumPy promotion (int64 over int32); with a None, the other"),
    ("merge_shapes", ("s1", "s2"), "the broadcast shape; a ValueError when incompatible"),
    ("not_equal", ("t1", "t2", "name=None"), ""),
    ("prepare_for_cond", ("state",), "returns `state` unchanged"),
    ("reduce_min", ("t", "name=None"), ""),
    ("run_on_dummies", ("primitive_callable", "input_types"),
     "calls it on arrays of the given types (pcbatch adds `fill`, default 1)"),
    ("static_value", ("t",), "`t` itself (NumPy values are already known)"),
    ("switch_case", ("branch_selector", "branch_callables", "name=None"),
     "calls the selected (argument-less) callable"),
    ("type_of", ("t", "preferred_dtype=None"),
     "a `TensorType` of `t`'s whole shape; `preferred_dtype` applies to Python constants"),
    ("where", ("condition", "x", "y", "name=None"),
     "a per-row `condition` selects whole rows; `y` may broadcast"),
    ("while_loop", ("cond", "body", "loop_vars", "name=None"), "a Python loop"),
    ("wrap_straightline_callable", ("f",), "returns `f` (nothing to compile on NumPy)"),
]

ROWS: list[Row] = [
    *_rows_context("000", optional_sig=False),
    *_rows_context("001", optional_sig=True),
    # -- 002: the package page -----------------------------------------------------------
    *[
        Row("002", "module", name, f"pcbatch.{name}", note=_MODULE_NOTES[name],
            tf=name == "tf_backend")
        for name in _MODULE_NOTES
    ],
    Row("002", "class", "Context", "pcbatch.Context"),
    Row("002", "class", "NumpyBackend", "pcbatch.NumpyBackend"),
    Row("002", "class", "TensorFlowBackend", "pcbatch.TensorFlowBackend",
        note="imports TensorFlow when first named", tf=True),
    Row("002", "class", "TensorType(dtype, shape)", "pcbatch.TensorType", ("dtype", "shape"),
        note="a namedtuple; the shape is per example (no batch dimension)"),
    Row("002", "class", "Type(tensors,)", "pcbatch.Type", ("tensors",),
        note="a namedtuple; `tensors` is a pattern of `TensorType`s"),
    Row("002", "function", "truthy(...)", "pcbatch.truthy", None,
        note="a value with only size-1 dimensions becomes one bool; anything larger is a "
        "`ConditionShapeError`; NumPy, JAX and TensorFlow values"),
    # -- 003: PrimOp ----------------------------------------------------------------------
    Row("003", "class", "PrimOp(vars_in, vars_out, function, skip_push_mask)",
        "pcbatch.instructions.PrimOp", ("vars_in", "vars_out", "function", "skip_push_mask"),
        "differs",
        "a frozen dataclass that indexes, unpacks, has `len` 4, `_fields` and `_replace` as "
        "the page's namedtuple, but is not a `tuple`; three more fields (`loc`, `name`, "
        "`per_example`) are read by name. The page gives no module: pcbatch keeps it in "
        "`instructions`",
        "`isinstance(op, tuple)` is False"),
    *[
        Row("003", "field", f"PrimOp.{field}", "pcbatch.instructions.PrimOp", (field,),
            note=f"field {i}")
        for i, field in enumerate(("vars_in", "vars_out", "function", "skip_push_mask"))
    ],
    Row("003", "method", "PrimOp.replace(vars_out)", "pcbatch.instructions.PrimOp.replace",
        ("vars_out",), note="a copy with `vars_out` replaced (the op itself when None)"),
    # -- 004: NumpyBackend ------------------------------------------------------------------
    Row("004", "class", "NumpyBackend", "pcbatch.NumpyBackend"),
    Row("004", "class", "numpy_backend.NumpyBackend", "pcbatch.numpy_backend.NumpyBackend",
        note="the same class as `pcbatch.NumpyBackend`"),
    Row("004", "property", "NumpyBackend.variable_class", "pcbatch.NumpyBackend.variable_class",
        note="a class attribute: the class of the variables `create_variable` makes"),
    *[
        Row("004", "method", f"NumpyBackend.{name}({', '.join(params)})",
            f"pcbatch.NumpyBackend.{name}", params, note=note)
        for name, params, note in _NUMPY_METHODS
    ],
    Row("004", "class", "VariableAllocation", "pcbatch.instructions.VariableAllocation",
        note="the kind of `create_variable`'s `alloc` (`NULL`, `TEMPORARY`, `REGISTER`, "
        "`FULL`); also `pcbatch.VariableAllocation`"),
    Row("004", "class", "instructions.Type", "pcbatch.instructions.Type"),
    Row("004", "class", "instructions.TensorType", "pcbatch.instructions.TensorType"),
    # -- issue 25 item 8: constructor arguments the pages do not show ---------------------
    Row("issue 25", "argument", "NumpyBackend(safety_checks)", "pcbatch.NumpyBackend",
        ("safety_checks",),
        note="accepted; NumPy raises as errors happen, so it changes nothing"),
    Row("issue 25", "argument", "TensorFlowBackend(safety_checks)",
        "pcbatch.TensorFlowBackend", ("safety_checks",),
        note="checks stack overflow and the step limit after each run", tf=True),
    Row("issue 25", "argument", "TensorFlowBackend(while_parallel_iterations)",
        "pcbatch.TensorFlowBackend", ("while_parallel_iterations",),
        note="`parallel_iterations` of the machine's `tf.while_loop` (a positive int)",
        tf=True),
    Row("issue 25", "argument", "TensorFlowBackend(basic_block_xla_device)",
        "pcbatch.TensorFlowBackend", ("basic_block_xla_device",), "differs",
        "the device the XLA-compiled run is placed on; pcbatch compiles the whole program, "
        "not each basic block",
        "the whole program is XLA-compiled and placed on that device", tf=True),
]


# -- resolving names -----------------------------------------------------------------------

_MISSING = object()


def resolve(path: str):
    """The object ``path`` names from ``import pcbatch``, or ``_MISSING``."""
    first, *rest = path.split(".")
    obj = importlib.import_module(first)
    for part in rest:
        try:
            obj = getattr(obj, part)
        except (AttributeError, ImportError):
            return _MISSING
    return obj


def _parameter(text: str) -> tuple[str, object]:
    """``"name=default"`` -> (name, default); ``"name"`` -> (name, _MISSING)."""
    name, sep, default = text.partition("=")
    return name, (ast.literal_eval(default) if sep else _MISSING)


def _signature_parameters(obj) -> list[inspect.Parameter]:
    params = list(inspect.signature(obj).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return params


def check_signature(row: Row, obj) -> None:
    """Every documented parameter of ``row`` is accepted by keyword, with the page's
    default where it shows one; for a ``yes`` row the documented ones come first, in order,
    and pcbatch's additions have defaults. (An ``argument`` row names one keyword of a
    constructor whose signature the pages do not show: accepted by keyword is enough.)"""
    if row.params is None:  # the page shows no parameters
        return
    params = _signature_parameters(obj)
    by_name = {p.name: p for p in params}
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    documented = [_parameter(text) for text in row.params]
    for name, default in documented:
        p = by_name.get(name)
        if p is None:
            assert takes_kwargs, f"{row.name}: no parameter {name!r}"
            continue
        assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), (row.name, p)
        if default is not _MISSING:
            assert p.default == default, f"{row.name}: {name} defaults to {p.default!r}"
    if row.status == "yes" and row.kind != "argument":
        names = [name for name, _ in documented]
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert positional[: len(names)] == names, (row.name, positional)
        for p in params:
            if p.name not in names and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                assert p.default is not p.empty, f"{row.name}: pcbatch adds {p.name!r}"


# -- a batched function for the call options -------------------------------------------------

def _same_type(arg_types):
    return [arg_types[0]]


def inventory_fib(n):
    if n <= 1:
        return n
    return inventory_fib(n - 1) + inventory_fib(n - 2)


FIB_IN = np.array([3, 5, 7])
FIB_OUT = np.array([2, 5, 13])


def _fresh():
    """A new Context with ``inventory_fib`` batched, and the batched function."""
    ctx = pcbatch.Context()
    return ctx, ctx.batch_uncurried(inventory_fib, _same_type)


def _option_value(option: str):
    return {
        "dry_run": True,
        "stackless": True,
        "max_stack_depth": 15,
        "backend": pcbatch.NumpyBackend(),
        "block_code_cache": {},
    }[option]


def check_option(row: Row) -> None:
    """The batched function takes the option, and gives the same answer with it."""
    _, fib = _fresh()
    (option,) = row.params
    np.testing.assert_array_equal(fib(FIB_IN, **{option: _option_value(option)}), FIB_OUT)


# -- what the names do (where the page says) --------------------------------------------------

MEANING: dict = {}


def _agrees(row: Row, agrees: bool) -> None:
    """For a point where pcbatch may differ from the page: the row's status says whether
    it does (so that the table cannot claim agreement, or a difference, that is not so)."""
    claimed = row.status == "yes"
    assert agrees == claimed, (
        f"{_id(row)}: the table says {row.status!r}, but pcbatch "
        f"{'agrees with' if agrees else 'differs from'} the page here"
    )


def meaning(*keys: str):
    """Registers a check of what the rows with these keys do."""

    def register(check):
        for key in keys:
            assert key not in MEANING, key
            MEANING[key] = check
        return check

    return register


@meaning("pcbatch.Context")
def _context(row):
    ctx = pcbatch.Context()
    assert ctx.function_names() == []


@meaning("pcbatch.frontend.Context")
def _frontend_context(row):
    assert pcbatch.frontend.Context is pcbatch.Context
    assert pcbatch.frontend.truthy is pcbatch.truthy


@meaning("pcbatch.Context.batch")
def _batch(row):
    def declared(arg_types):
        return [arg_types[0]]

    def first(x):
        return x

    def second(x):
        return x

    ctx = pcbatch.Context()
    decorator = ctx.batch(type_inference=declared)  # by keyword: never the batched function
    assert callable(decorator) and ctx.function_names() == []
    decorator(first)
    assert ctx.function_names() == ["first"]
    ctx.batch(lambda arg_types: arg_types)(second)  # a positional lambda: type_inference
    assert ctx.function_names() == ["first", "second"]
    other = pcbatch.Context()
    decorated = other.batch(declared)  # the page: a positional argument is type_inference
    _agrees(row, other.function_names() == [])
    assert other.function_names() == ["declared"] and callable(decorated)
    with pytest.raises(ValueError):  # the page: a name clash is a ValueError
        ctx.batch(type_inference=declared)(first)


@meaning("pcbatch.Context.batch_uncurried")
def _batch_uncurried(row):
    _, fib = _fresh()
    np.testing.assert_array_equal(fib(FIB_IN), FIB_OUT)
    with pytest.raises(ValueError):  # batched functions are defined with def
        pcbatch.Context().batch_uncurried(lambda x: x, _same_type)


@meaning("pcbatch.Context.function_names")
def _function_names(row):
    def b(x):
        return x

    def a(x):
        return x

    ctx = pcbatch.Context()
    ctx.batch_uncurried(b, _same_type)
    ctx.batch_uncurried(a, _same_type)
    assert ctx.function_names() == ["b", "a"]


@meaning("pcbatch.Context.module", "pcbatch.instructions.Module",
         "pcbatch.instructions.Module.program", "pcbatch.instructions.Program")
def _module(row):
    ctx, _ = _fresh()
    module = ctx.module()
    assert isinstance(module, pcbatch.instructions.Module)
    program = module.program("inventory_fib")
    assert isinstance(program, pcbatch.instructions.Program)
    assert program.main == "inventory_fib"


@meaning("pcbatch.Context.program")
def _program(row):
    ctx, _ = _fresh()
    program = ctx.program("inventory_fib")
    assert isinstance(program, pcbatch.instructions.Program)
    assert program.main == "inventory_fib"
    assert [f.name for f in program.functions] == [
        f.name for f in ctx.module().program("inventory_fib").functions
    ]
    with pytest.raises(ValueError):  # main was not decorated
        ctx.program("not_batched")


def _int_signature():
    return [pcbatch.TensorType(np.dtype(np.int64), ())], pcbatch.NumpyBackend()


@meaning("pcbatch.Context.program_compiled")
def _program_compiled(row):
    ctx, _ = _fresh()
    sig, backend = _int_signature()
    typed = ctx.program_compiled("inventory_fib", sig, backend)
    assert isinstance(typed, pcbatch.instructions.Program)
    assert not typed.lowered
    _agrees(row, typed.lowered == {"000": True, "001": False}[row.page])  # the pages differ
    untyped = ctx.program_compiled("inventory_fib")  # page 001: sig and backend optional
    assert isinstance(untyped, pcbatch.instructions.Program)


@meaning("pcbatch.Context.program_lowered")
def _program_lowered(row):
    ctx, _ = _fresh()
    sig, backend = _int_signature()
    lowered = ctx.program_lowered("inventory_fib", sig, backend)
    assert isinstance(lowered, pcbatch.instructions.Program) and lowered.lowered
    assert ctx.program_lowered("inventory_fib", sig, backend) is lowered  # cached on types
    assert isinstance(ctx.program_lowered("inventory_fib"), pcbatch.instructions.Program)


@meaning("pcbatch.Context.lowered_for_args")
def _lowered_for_args(row):
    ctx, _ = _fresh()
    program = ctx.lowered_for_args("inventory_fib", [FIB_IN], pcbatch.NumpyBackend())
    assert isinstance(program, pcbatch.instructions.Program) and program.lowered


_SEEN: list = []


def inventory_record(x):
    _SEEN.append(x)  # plain Python: only a dry run executes it as written
    return x


@meaning("pcbatch.Context.batch:dry_run")
def _dry_run(row):
    record = pcbatch.Context().batch_uncurried(inventory_record, _same_type)
    _SEEN.clear()
    np.testing.assert_array_equal(record(FIB_IN, dry_run=True), FIB_IN)
    assert [np.ndim(x) for x in _SEEN] == [0, 0, 0]  # once per example, unbatched


@meaning("pcbatch.Context.batch:stackless")
def _stackless(row):
    _, fib = _fresh()
    # recursion deeper than max_stack_depth: the stackless machine keeps no stack to bound
    np.testing.assert_array_equal(fib(np.array([9]), stackless=True, max_stack_depth=2), [34])


@meaning("pcbatch.Context.batch:max_stack_depth")
def _max_stack_depth(row):
    assert pcbatch.virtual_machine.DEFAULT_MAX_STACK_DEPTH == 15
    _, fib = _fresh()
    with pytest.raises(ValueError):  # StackOverflowError is a ValueError
        fib(np.array([9]), max_stack_depth=2)
    np.testing.assert_array_equal(fib(np.array([9]), stackless=True, max_stack_depth=2), [34])


@meaning("pcbatch.Context.batch:backend")
def _backend(row):
    _, fib = _fresh()
    out = fib(FIB_IN)  # no backend given: NumPy arrays in, NumPy out
    assert isinstance(out, np.ndarray)
    _agrees(row, not isinstance(out, np.ndarray))  # the page: TensorFlow by default


@meaning("pcbatch.Context.batch:block_code_cache")
def _block_code_cache(row):
    _, fib = _fresh()
    cache: dict = {}
    np.testing.assert_array_equal(fib(FIB_IN, block_code_cache=cache), FIB_OUT)
    np.testing.assert_array_equal(fib(FIB_IN, block_code_cache=None), FIB_OUT)


@meaning(*[f"pcbatch.{name}" for name in _MODULE_NOTES])
def _module_attribute(row):
    name = row.path.split(".")[1]
    assert getattr(pcbatch, name) is importlib.import_module(f"pcbatch.{name}")


@meaning("pcbatch.NumpyBackend")
def _numpy_backend(row):
    assert pcbatch.numpy_backend.NumpyBackend is pcbatch.NumpyBackend
    assert isinstance(pcbatch.NumpyBackend(), pcbatch.NumpyBackend)


@meaning("pcbatch.numpy_backend.NumpyBackend")
def _numpy_backend_alias(row):
    assert pcbatch.numpy_backend.NumpyBackend is pcbatch.NumpyBackend


@meaning("pcbatch.TensorFlowBackend")
def _tensorflow_backend(row):
    assert pcbatch.tf_backend.TensorFlowBackend is pcbatch.TensorFlowBackend
    assert isinstance(pcbatch.TensorFlowBackend(), pcbatch.TensorFlowBackend)


@meaning("pcbatch.TensorType", "pcbatch.instructions.TensorType")
def _tensor_type(row):
    assert pcbatch.instructions.TensorType is pcbatch.TensorType
    t = pcbatch.TensorType(np.dtype(np.float32), (2, 3))
    assert pcbatch.TensorType._fields == ("dtype", "shape")
    assert tuple(t) == (np.dtype(np.float32), (2, 3)) and t.shape == (2, 3)


@meaning("pcbatch.Type", "pcbatch.instructions.Type")
def _type(row):
    assert pcbatch.instructions.Type is pcbatch.Type
    leaf = pcbatch.TensorType(np.dtype(np.int32), ())
    t = pcbatch.Type((leaf, leaf))
    assert pcbatch.Type._fields == ("tensors",) and t.tensors == (leaf, leaf)


@meaning("pcbatch.truthy")
def _truthy(row):
    assert pcbatch.truthy(np.array([True])).shape == ()
    assert bool(pcbatch.truthy(np.array([[True]])))
    assert not bool(pcbatch.truthy(np.array([0])))
    with pytest.raises(pcbatch.ConditionShapeError):
        pcbatch.truthy(np.array([True, False]))


PRIMOP_FIELDS = ("vars_in", "vars_out", "function", "skip_push_mask")


@meaning("pcbatch.instructions.PrimOp")
def _primop(row):
    op = pcbatch.instructions.PrimOp(("a",), ("b",), np.negative, frozenset({"b"}))
    vars_in, vars_out, function, skip = op
    assert (vars_in, vars_out, function, skip) == (("a",), ("b",), np.negative, {"b"})
    assert len(op) == 4 and op._fields == PRIMOP_FIELDS
    assert op._replace(vars_in=("c",)).vars_in == ("c",)
    _agrees(row, isinstance(op, tuple))  # the page: a namedtuple


@meaning(*[f"pcbatch.instructions.PrimOp:{field}" for field in PRIMOP_FIELDS])
def _primop_field(row):
    (field,) = row.params
    index = PRIMOP_FIELDS.index(field)
    op = pcbatch.instructions.PrimOp(("a",), ("b",), np.negative, frozenset())
    assert op[index] is getattr(op, field)


@meaning("pcbatch.instructions.PrimOp.replace")
def _primop_replace(row):
    op = pcbatch.instructions.PrimOp(("a",), ("b",), np.negative)
    copy = op.replace(vars_out=("c",))
    assert copy.vars_out == ("c",) and op.vars_out == ("b",) and copy.vars_in == ("a",)


@meaning("pcbatch.instructions.VariableAllocation")
def _variable_allocation(row):
    allocation = pcbatch.instructions.VariableAllocation
    assert allocation is pcbatch.VariableAllocation
    assert {a.name for a in allocation} == {"NULL", "TEMPORARY", "REGISTER", "FULL"}


def _np():
    return pcbatch.NumpyBackend()


def _tensor_type_of(dtype, shape):
    return pcbatch.TensorType(np.dtype(dtype), shape)


_NUMPY_CHECKS = {
    "variable_class": lambda b: isinstance(b.variable_class, type),
    "any": lambda b: b.any(np.array([False, True])) and not b.any(np.zeros(2, bool)),
    "batch_size": lambda b: b.batch_size(np.zeros((4, 2))) == 4,
    "broadcast_to_shape_of": lambda b: (
        b.broadcast_to_shape_of(np.float64(2.0), np.zeros((3, 2))).shape == (3, 2)
    ),
    "cond": lambda b: b.cond(True, lambda: 1, lambda: 2) == 1
    and b.cond(False, lambda: 1, lambda: 2) == 2,
    "create_variable": lambda b: isinstance(
        b.create_variable("v", _variable_full(), _tensor_type_of(np.int64, ()), 15, 3),
        b.variable_class,
    ),
    "equal": lambda b: b.equal(np.array([1, 2]), np.array([1, 3])).tolist() == [True, False],
    "not_equal": lambda b: b.not_equal(np.array([1, 2]), np.array([1, 3])).tolist()
    == [False, True],
    "full_mask": lambda b: b.full_mask(3).dtype == bool and b.full_mask(3).tolist() == [True] * 3,
    "initial_program_counter": lambda b: (
        b.initial_program_counter(3, np.int64).tolist() == [0, 0, 0]
        and b.initial_program_counter(3, np.int64).dtype == np.int64
    ),
    "merge_dtypes": lambda b: b.merge_dtypes(np.int32, np.int64) == np.int64
    and b.merge_dtypes(None, np.int32) == np.int32,
    "prepare_for_cond": lambda b: b.prepare_for_cond(state := (np.zeros(2),)) is state,
    "reduce_min": lambda b: b.reduce_min(np.array([3, 1, 2])) == 1,
    "run_on_dummies": lambda b: b.run_on_dummies(
        lambda x: x * 2, [_type_of_leaf(np.float32, (2,))]
    ).shape == (2,),
    "static_value": lambda b: b.static_value(np.array(5)) == 5,
    "switch_case": lambda b: b.switch_case(1, [lambda: "a", lambda: "b"]) == "b",
    "type_of": lambda b: b.type_of(np.zeros((2, 3), np.float32)).dtype == np.float32
    and b.type_of(1, preferred_dtype=np.int32).dtype == np.int32,
    "where": lambda b: b.where(np.array([True, False]), np.ones((2, 3)), 0.0).tolist()
    == [[1.0] * 3, [0.0] * 3],
    "while_loop": lambda b: tuple(b.while_loop(lambda i: i < 3, lambda i: (i + 1,), (0,)))
    == (3,),
    "wrap_straightline_callable": lambda b: b.wrap_straightline_callable(abs)(-2) == 2,
}


def _variable_full():
    return pcbatch.VariableAllocation.FULL


def _type_of_leaf(dtype, shape):
    return pcbatch.Type(_tensor_type_of(dtype, shape))


@meaning(*[f"pcbatch.NumpyBackend.{name}" for name in _NUMPY_CHECKS])
def _numpy_method(row):
    name = row.path.rsplit(".", 1)[1]
    assert _NUMPY_CHECKS[name](_np()), row.name


@meaning("pcbatch.NumpyBackend.assert_matching_dtype")
def _assert_matching_dtype(row):
    b = _np()
    b.assert_matching_dtype(np.int32, np.array([1], np.int32))
    with pytest.raises(ValueError):
        b.assert_matching_dtype(np.int32, np.array([1.0]), "the message")


@meaning("pcbatch.NumpyBackend.merge_shapes")
def _merge_shapes(row):
    b = _np()
    assert list(b.merge_shapes([1, 2], [3, 2])) == [3, 2]
    assert list(b.merge_shapes([None, 2], [2])) == [None, 2]
    with pytest.raises(ValueError):
        b.merge_shapes([2], [3])


@meaning("pcbatch.NumpyBackend:safety_checks")
def _numpy_safety_checks(row):
    for flag in (True, False):
        _, fib = _fresh()
        out = fib(FIB_IN, backend=pcbatch.NumpyBackend(safety_checks=flag))
        np.testing.assert_array_equal(out, FIB_OUT)


@meaning("pcbatch.TensorFlowBackend:safety_checks")
def _tf_safety_checks(row):
    assert pcbatch.TensorFlowBackend(safety_checks=False).safety_checks is False


@meaning("pcbatch.TensorFlowBackend:while_parallel_iterations")
def _tf_while_parallel_iterations(row):
    assert pcbatch.TensorFlowBackend(while_parallel_iterations=4).while_parallel_iterations == 4
    with pytest.raises(ValueError):
        pcbatch.TensorFlowBackend(while_parallel_iterations=0)


@meaning("pcbatch.TensorFlowBackend:basic_block_xla_device")
def _tf_basic_block_xla_device(row):
    backend = pcbatch.TensorFlowBackend(basic_block_xla_device="/cpu:0")
    assert backend.basic_block_xla_device == "/cpu:0" and backend.jit_compile


# -- the tests ------------------------------------------------------------------------------------

def _id(row: Row) -> str:
    return f"{row.page}:{row.name}"


def test_the_table_is_well_formed():
    seen = set()
    for row in ROWS:
        assert row.page in PAGES and row.kind in KINDS and row.status in STATUSES, row
        assert (row.page, row.name) not in seen, f"listed twice: {_id(row)}"
        seen.add((row.page, row.name))
        if row.status != "yes":
            assert row.note and row.doc, f"{_id(row)}: say how and where it is documented"
        if row.kind in ("option", "argument", "field"):
            assert len(row.params) == 1, row
    assert set(MEANING) <= {row.key for row in ROWS}, set(MEANING) - {r.key for r in ROWS}


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_pcbatch_has_the_name(row: Row):
    if row.tf:
        pytest.importorskip("tensorflow")
    obj = resolve(row.path)
    if row.status == "absent":
        assert obj is _MISSING, f"{_id(row)}: pcbatch has it now; update the table"
        return
    assert obj is not _MISSING, f"{_id(row)}: pcbatch has no {row.path}"
    if row.kind == "module":
        assert isinstance(obj, types.ModuleType)
    elif row.kind == "class":
        assert isinstance(obj, type)
        if row.params:
            check_signature(row, obj)
    elif row.kind in ("constructor", "function", "method", "argument"):
        assert callable(obj)
        check_signature(row, obj)
    elif row.kind == "field":
        (field,) = row.params
        assert field in obj._fields
    elif row.kind == "option":
        check_option(row)


@pytest.mark.parametrize("row", [r for r in ROWS if r.key in MEANING], ids=_id)
def test_the_name_means_what_the_table_says(row: Row):
    if row.tf:
        pytest.importorskip("tensorflow")
    MEANING[row.key](row)


def test_differences_are_in_the_migration_guide():
    guide = MIGRATION_DOC.read_text()
    for row in ROWS:
        if row.status != "yes":
            assert row.doc in guide, f"{_id(row)}: {MIGRATION_DOC.name} lacks {row.doc!r}"
    assert INVENTORY_DOC.name in guide


def test_the_inventory_document_is_current():
    assert INVENTORY_DOC.read_text() == render(), (
        "docs/seed-api-inventory.md is out of date: run "
        "PYTHONPATH=. python tests/semantics/test_seed_inventory.py"
    )


# -- the document ---------------------------------------------------------------------------------

def counts(rows) -> dict:
    return {status: sum(r.status == status for r in rows) for status in STATUSES}


def distinct_counts() -> dict:
    """Per pcbatch name (a name on several pages counted once, by its worst row)."""
    worst: dict = {}
    for row in ROWS:
        if row.page == "issue 25":
            continue
        rank = STATUSES.index(row.status)
        worst[row.key] = max(worst.get(row.key, 0), rank)
    return {status: sum(rank == i for rank in worst.values()) for i, status in
            enumerate(STATUSES)}


_KIND_SHOWN = {"option": "call option", "argument": "constructor argument"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    lines = [
        "# The seed's API, name by name",
        "",
        "Every name that the five reference pages of `tfp.experimental.auto_batching` (the",
        "seed pcbatch re-implements) document: modules, classes, functions, methods,",
        "properties, fields and call options, with their parameters, and whether pcbatch",
        "has each one. The [migration guide](migrating-from-tfp.md) explains the",
        "differences.",
        "",
        "In the third column, **yes** means pcbatch has the name (from `import pcbatch`) and",
        "it means what the page says; **differs** means pcbatch has it but its meaning",
        "differs, as the note says; **absent** means pcbatch leaves it out, for the reason",
        "given. Where a page shows parameters, pcbatch accepts each by name with the",
        "page's default, and for a **yes** row they come first in the page's order",
        "(pcbatch's own additions have defaults), so a call written against the page runs",
        "as written.",
        "",
        "This file is generated from the table in `tests/semantics/test_seed_inventory.py`,",
        "which checks every row (and a short check of the behaviour where the page",
        "describes it); to change it, edit the table there and run",
        "`PYTHONPATH=. python tests/semantics/test_seed_inventory.py`.",
        "",
        "## Summary",
        "",
        "| page | rows | yes | differs | absent |",
        "| --- | --- | --- | --- | --- |",
    ]
    for page, title in PAGES.items():
        c = counts([r for r in ROWS if r.page == page])
        label = f"{page}: {title}" if page != "issue 25" else f"issue 25: {title}"
        lines.append(f"| {label} | {sum(c.values())} | {c['yes']} | {c['differs']} | "
                     f"{c['absent']} |")
    d = distinct_counts()
    lines += [
        "",
        "Counted once each (a name several pages document counts once, as **differs** if",
        f"any page's row differs), the pages document {sum(d.values())} names: "
        f"{d['yes']} yes, {d['differs']} differ, {d['absent']} absent.",
    ]
    for page, title in PAGES.items():
        heading = ("## Issue 25: backend constructor arguments" if page == "issue 25" else
                   f"## Page {page} (`{PAGE_FILES[page]}`): {title}")
        lines += ["", heading, ""]
        if page == "issue 25":
            lines += [
                "The pages show no constructor for either backend. Issue 25 (item 8) asks",
                "for these arguments; they are listed here, apart, and not counted among",
                "the pages' names above.",
                "",
            ]
        lines += ["| name | kind | pcbatch | note |", "| --- | --- | --- | --- |"]
        for row in ROWS:
            if row.page == page:
                status = f"**{row.status}**"
                kind = _KIND_SHOWN.get(row.kind, row.kind)
                lines.append(f"| `{_cell(row.name)}` | {kind} | {status} | "
                             f"{_cell(row.note)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    INVENTORY_DOC.write_text(render())
    print(f"wrote {INVENTORY_DOC.relative_to(ROOT)}", file=sys.stderr)
