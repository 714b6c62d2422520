"""Type inference: give every variable of a structured program a `Type`.

Assumes: a verified structured program and the `Type` of each argument of
``main`` (the signature). Guarantees: ``program.var_types`` maps every
variable that is read or written to a Type (shapes without the batch
dimension), or a `TypeInferenceError` names the variable and where it is
defined.

Method: a fixpoint over the whole call graph. Argument types flow from call
sites into callee parameters, results flow back to call sites; a primitive's
result types are learned by running it on dummy inputs of its input types.
Definitions of one variable merge (NumPy dtype promotion, broadcast shapes),
so types only widen and the iteration ends.

Python scalars are weak, as in NumPy 2 (NEP 50): a literal, a ``range`` counter,
and a per-example primitive that gives a Python scalar from such values alone
are typed `WeakTensorType`; a definition merges into a strong one as NumPy
would convert the scalar (``acc = 0`` then ``acc = acc + x`` with float32 ``x``:
float32), and a primitive reading weak and strong values gets the weak ones
marked (`pcbatch.backends.weak`), so it computes as the user's code does on one
example (``uint8_x + i`` wraps in uint8). A literal that its variable's strong
dtype cannot hold is an error at its line.

Example: ``fib(n)`` with ``n: int64[]``: the base case's constant gives the
result ``int64[]`` on the first sweep, and the recursive branch's addition
then types on the next.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from pcbatch.backends import weak as weak_values
from pcbatch.errors import (
    ConditionShapeError,
    NestedBatchedCallError,
    SharedArrayError,
    TypeInferenceError,
    where,
)
from pcbatch.ir.nodes import ControlFlowGraph, FunctionCallOp, PrimOp, Program, reads, writes
from pcbatch.ir.setitem import FULL_SLICE, SetItem
from pcbatch.ir.types import (
    TensorType,
    Type,
    WeakTensorType,
    flatten,
    format_pattern,
    is_pattern_node,
    is_python_scalar,
    is_weak,
    map_pattern,
    merge_weak_dtypes,
    python_scalar_of,
    rebuild,
    same_structure,
    type_key,
)
from pcbatch.passes import item_values, masked_items, shape_branches

MAX_SWEEPS = 200
_DUMMY_BATCHES = (2, 3)  # two sizes tell a batched result from a broadcast constant


# What JAX and TensorFlow raise when traced code uses a batched value as a Python bool.
_BOOL_OF_TRACED = (
    "TracerBoolConversionError",
    "ConcretizationTypeError",
    "OperatorNotAllowedInGraphError",
)


def _advice(error: Exception) -> str:
    if _says_what_to_write(error):
        return ""  # pcbatch's own, which says what to write instead
    if type(error).__name__ in _BOOL_OF_TRACED:
        return (
            "A plain (undecorated) helper used a batched value as a Python bool (if, "
            "while, and/or, or recursion that stops on a value), which compiled backends "
            "cannot run: decorate the helper with ctx.batch, or use np.where in it."
        )
    if isinstance(error, OverflowError):  # a literal out of the range of the array it meets
        return (
            "NumPy 2 raises it per example too: keep the number in the array's range, or "
            "convert the array first (x.astype(np.int64))."
        )
    if "does not support item assignment" in str(error) or "has no counterpart" in str(error):
        return ""  # they say what to write
    if "are valid indices" in str(error):  # TensorFlow's indexing has no integer arrays
        return (
            "TensorFlow indexes with ints, slices and scalar integers only: an integer "
            "array as index is written tf.gather(v, k) (v[:, k]: tf.gather(v, k, axis=1))."
        )
    if _iterates_a_scalar(error):
        return (
            "Python raises this TypeError too, on each example: a number is not iterable and "
            "has no len() (any, all, sum, min, max, sorted, len, list, tuple, iter, enumerate, zip "
            "of it). Pass the array it came from (any(v), not any(v[0])), or use np.any(x)."
        )
    if isinstance(error, TypeError) and "unexpected keyword argument" in str(error):
        return (
            "The backend's version of this NumPy function lacks that argument: compute it "
            "another way (np.where(mask, v, 0).sum() for sum(where=mask)), or run this "
            "function on the NumPy or Torch backend."
        )
    if "None" in str(error):
        return (
            "If it made or took None: None is not a batched value; use a number or array "
            "(for an optional value, a boolean flag beside it, or a sentinel such as np.nan)."
        )
    return "Make it accept any value of those types, or give the function a type_inference."


def _iterates_a_scalar(error: Exception) -> bool:
    """Whether ``error`` is Python's (or a library's) refusal to iterate a 0-d value."""
    text = str(error)
    return isinstance(error, TypeError) and any(words in text for words in _ITERATES_A_SCALAR)


_ITERATES_A_SCALAR = (
    "not iterable",  # Python's, of a number
    "unsized object",  # NumPy's len()
    "iteration over a 0-d",  # NumPy's iter()
    "iterate over a scalar",  # TensorFlow's
    "per-example scalar",  # pcbatch's per-example views
    "has no len()",
)


def _says_what_to_write(error: BaseException | None) -> bool:
    """Whether ``error``, or the error it was raised in handling (a library that wraps
    the conversion error of `OtherLibraryError` in its own), is pcbatch's advice."""
    seen = 0
    while error is not None and seen < 8:
        if type(error).__name__ in ("BatchedValueError", "OtherLibraryError"):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _is_types_pattern(x: Any) -> bool:
    """A `TensorType`, or a (nested) tuple/list of them."""
    if isinstance(x, TensorType):
        return True
    if isinstance(x, Type) or not is_pattern_node(x) or not x:
        return False
    return all(_is_types_pattern(i) for i in x)


def _as_declared(x: Any) -> Type | None:
    if isinstance(x, Type):
        return x if _is_types_pattern(x.tensors) else None
    return Type(x) if _is_types_pattern(x) else None


def declared_types(function: str, returned: Any, results: int) -> list:
    """What a ``type_inference`` returned, as one `Type` per result variable.

    Accepted, for a function with one result variable (every frontend function: a
    tuple return is one pattern): the seed's list of `Type`s (several for a tuple
    return: they become its elements), one `Type`, one `TensorType`, or a (nested)
    tuple of `TensorType`s. Anything else is a `TypeInferenceError` naming the function.
    """
    single = _as_declared(returned)
    if single is not None and not isinstance(returned, list):
        candidates = [single]
    elif isinstance(returned, list) and returned:
        items = [_as_declared(x) for x in returned]
        candidates = items if all(t is not None for t in items) else None
    else:
        candidates = None
    if candidates is not None and len(candidates) > results == 1:
        candidates = [Type(tuple(t.tensors for t in candidates))]
    if candidates is None or len(candidates) != results:
        raise TypeInferenceError(
            f"the type_inference of {function!r} returned {returned!r}; expected a list of "
            f"{results} Type(s) (the seed's form), or one Type, one TensorType, or a tuple "
            "of TensorTypes for a function that returns a tuple"
        )
    return candidates


def as_type(t: Any) -> Type:
    """Accepts a Type, a TensorType or a pattern of TensorTypes."""
    return t if isinstance(t, Type) else Type(t)


#: why a variable may not hold different shapes on different paths
_SHAPES_DIFFER = (
    "Python's value would have a different shape on each path (say 0.0 before a loop "
    "and a vector after it), which one batch cannot hold: broadcasting it would change "
    "what len, .sum(), .shape and indexing give on the other path. Give the variable one "
    "shape on every path: acc = np.zeros_like(v) or np.zeros(3) rather than acc = 0.0, "
    "np.broadcast_to(x, v.shape) where a scalar meets a vector"
)


def _known(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


class _Inference:
    def __init__(self, program: Program, backend):
        self.program = program
        self.backend = backend
        self.types: dict = dict(program.var_types)
        self.first_loc: dict = {}
        self.prim_cache: dict = {}
        #: prim_cache key -> the run-time checks its primitive noted (a weak int
        #: converted narrowly, an integer power in a plain helper: `weak_values.Faults`)
        self.checks: dict = {}
        self.declared: dict = {}  # result types a function's type_inference fixes
        self.changed = False

    # -- merging -----------------------------------------------------------
    def merge_into(self, var: str, new: Type, loc) -> None:
        if var in self.declared:
            self.check_declared(var, new, loc)
            return
        old = self.types.get(var)
        self.first_loc.setdefault(var, loc)
        if old is None:
            self.types[var] = new
            self.changed = True
            return
        merged = self.merge(var, old, new, loc)
        if type_key(merged) != type_key(old):
            self.types[var] = merged
            self.changed = True

    def declare(self, var: str, declared: Type, fn) -> None:
        declared = as_type(declared)
        if self.declared.get(var) == declared:
            return
        if var in self.types:
            self.declared[var] = declared
            self.check_declared(var, self.types[var], fn.loc)
        self.declared[var] = declared
        self.types[var] = declared
        self.changed = True

    def check_declared(self, var: str, new: Type, loc) -> None:
        declared = self.declared[var]
        if type_key(self.merge(var, declared, new, loc)) != type_key(declared):
            raise TypeInferenceError(
                f"{var!r} gets type {new!r}{where(loc)}, which its function's type_inference "
                f"result {declared!r} cannot hold; fix the type_inference or the function"
            )

    def apply_type_inference(self, fn) -> None:
        if fn.type_inference is None or any(v not in self.types for v in fn.vars_in):
            return
        returned = fn.type_inference([self.types[v] for v in fn.vars_in])
        declared = declared_types(fn.name, returned, len(fn.vars_out))
        for var, t in zip(fn.vars_out, declared):
            self.declare(var, t, fn)

    def merge(self, var: str, old: Type, new: Type, loc) -> Type:
        if not same_structure(old.tensors, new.tensors):
            raise self.conflict(var, old, new, loc, "they are structured differently")

        def leaf(a: TensorType, b: TensorType) -> TensorType:
            try:
                dtype, weak = merge_weak_dtypes(a, b)
                if dtype is None:
                    dtype = self.backend.merge_dtypes(a.dtype, b.dtype)
                else:
                    dtype = self.backend.merge_dtypes(dtype, dtype)  # the backend's form
                shape = tuple(self.backend.merge_shapes(list(a.shape), list(b.shape)))
            except (TypeError, ValueError) as e:
                raise self.conflict(var, old, new, loc, str(e)) from None
            if _known(a.shape) and _known(b.shape) and a.shape != b.shape:
                raise self.conflict(var, old, new, loc, _SHAPES_DIFFER)
            return (WeakTensorType if weak else TensorType)(dtype, shape)

        return Type(map_pattern(leaf, old.tensors, new.tensors))

    def conflict(self, var, old, new, loc, why) -> TypeInferenceError:
        first = self.first_loc.get(var)
        if _SUM_TOTAL.search(var):  # `comprehensions` made it: name what the user wrote
            return TypeInferenceError(
                f"the running total of sum(...){where(loc)} gets type {new!r} from an item, "
                f"but starts as {old!r}; {why}. A batched variable keeps one shape and dtype "
                "kind: over array items start from an array of their shape, sum(..., "
                "np.zeros(n)), or use np.sum(..., axis=0)"
            )
        if _EXTREME_SO_FAR.search(var):
            return TypeInferenceError(
                f"max(...) or min(...){where(loc)} of items of type {new!r}: Python compares "
                "the items with > or <, and an array of several numbers has no single truth "
                "value; use np.max(..., axis=0) of the stacked items, or a loop"
            )
        return TypeInferenceError(
            f"variable {var!r} gets type {new!r}{where(loc)}, but {old!r} elsewhere"
            f"{where(first)}; {why}. Make both definitions agree in structure, "
            "dtype kind and shape."
        )

    # -- one op --------------------------------------------------------------
    def visit_prim(self, op: PrimOp) -> None:
        if any(v not in self.types for v in op.vars_in):
            return
        in_types = tuple(self.types[v] for v in op.vars_in)
        if op.is_copy:
            if len(in_types) == 1:
                self.bind_outputs(op, op.vars_out, in_types[0])
            else:
                self.bind_outputs(op, op.vars_out, Type(tuple(t.tensors for t in in_types)))
            return
        if masked_items.is_masked(op, in_types[2:]):  # w[w < 0] = 0.0
            masked_items.check(op, *in_types)
            op = masked_items.replaced(op)  # typed, and probed, as it will run
        key = (id(op.function), type_key(in_types))
        if key not in self.prim_cache:
            # A weak int converted to a narrow int dtype on the way (the array may be
            # made inside the primitive: ``x.astype(np.int8) + i``), or an integer power
            # inside a plain helper, needs the compiled machines' probe
            # (`weak_values.overflow_probe`).
            with weak_values.collecting_overflow() as faults:
                self.prim_cache[key] = self.run_primitive(op, in_types)
            if faults.kinds:
                self.checks[key] = tuple(sorted(faults.kinds.items()))
            _check_not_objects(op, self.prim_cache[key])
        self.bind_outputs(op, op.vars_out, self.prim_cache[key])

    def run_primitive(self, op: PrimOp, in_types: Sequence[Type]) -> Type:
        if isinstance(op.function, SetItem):
            _check_item_index(op, in_types[2:])
            _check_item_value(op, in_types[0], in_types[1])
        known = getattr(op.function, "result_type", None)  # e.g. a host callback's
        if known is not None:
            return known
        result = self.result_type(with_weak_inputs(op, in_types, noting=True), in_types)
        return self.stored_as_python(with_weak_results(op, in_types, result))

    def stored_as_python(self, result: Type) -> Type:
        """A weak result in the dtype its Python scalar kind is stored in (int64, float64:
        NumPy's, as the backend holds it), not the library's own: TensorFlow makes the
        ``3`` of a ``return 3, x`` int32 (dry_run and NumPy: int64)."""

        def stored(t: TensorType) -> TensorType:
            if not is_weak(t):
                return t
            default = np.asarray(python_scalar_of(t.dtype)).dtype
            dtype = self.backend.type_of(np.zeros((1,), default)).dtype
            return t if dtype == t.dtype else WeakTensorType(dtype, t.shape)

        return Type(map_pattern(stored, result.tensors))

    def result_type(self, op: PrimOp, in_types: Sequence[Type]) -> Type:
        example_types = getattr(self.backend, "example_result_types", None)
        if op.per_example and example_types is not None:
            # This backend's vectorizer costs more to trace than one example does.
            types = self.traced_types(op, example_types, in_types)
            if types is not None:
                return Type(types)
        function = op.batched_function(self.backend)
        if op.per_example:  # every result leads with the batch (or 1): drop it
            result = self.dummy_run(op, function, in_types, _DUMMY_BATCHES[0])
            return Type(map_pattern(_drop_batch(self.backend), result))
        results = [self.dummy_run(op, function, in_types, batch) for batch in _DUMMY_BATCHES]
        return Type(self.strip_batch(op, results[0], results[1], op.vars_out))

    def traced_types(self, op: PrimOp, example_types, in_types: Sequence[Type]) -> Any:
        try:
            return example_types(self.backend.adapt(op.function), in_types)
        except NestedBatchedCallError:
            raise  # its own message says what to write
        except Exception as error:
            raise _unknown_result(op, "when traced on one example", in_types, error) from error

    def dummy_run(self, op: PrimOp, function, in_types: Sequence[Type], batch: int) -> Any:
        """The primitive's result on dummy inputs: ones, or zeros if ones make it fail,
        or identity matrices (`numpy.dummy_array`: ``np.linalg.solve(m, b)``)."""
        batched = [_with_batch(t, batch) for t in in_types]
        try:
            with weak_values.on_dummies():
                return self.backend.run_on_dummies(function, batched)
        except NestedBatchedCallError:
            raise  # its own message says what to write
        except Exception as first:
            for fill in (0, "eye"):
                try:
                    with weak_values.on_dummies():
                        return self.backend.run_on_dummies(function, batched, fill=fill)
                except Exception:  # noqa: BLE001, S112 - the first error is the one to show
                    continue
            how = "on dummy inputs (all ones, all zeros, then identity matrices)"
            raise _unknown_result(op, how, in_types, first) from first

    def strip_batch(self, op: PrimOp, small: Any, large: Any, names: Any) -> Any:
        if is_pattern_node(names):
            if not (is_pattern_node(small) and len(small) == len(names)):
                raise TypeInferenceError(
                    f"primitive {op.label!r}{where(op.loc)} returned {_describe(small)} "
                    f"but its outputs are {format_pattern(names)}"
                )
            return tuple(self.strip_batch(op, s, g, n) for s, g, n in zip(small, large, names))
        return self.strip_value(op, small, large)

    def strip_value(self, op: PrimOp, small: Any, large: Any) -> Any:
        """The per-example type (pattern) of one output, seen at two dummy batch sizes."""
        if is_pattern_node(small):
            if not is_pattern_node(large) or len(large) != len(small):
                raise TypeInferenceError(
                    f"primitive {op.label!r}{where(op.loc)} returned differently structured "
                    "results for different batch sizes"
                )
            return rebuild(small, [self.strip_value(op, s, g) for s, g in zip(small, large)])
        t_small = self.backend.type_of(small)
        t_large = self.backend.type_of(large)
        s, g = tuple(t_small.shape), tuple(t_large.shape)
        if s == g:
            return TensorType(t_small.dtype, s)  # a constant: broadcast over the batch
        if s[:1] == (_DUMMY_BATCHES[0],) and g[:1] == (_DUMMY_BATCHES[1],) and s[1:] == g[1:]:
            return TensorType(t_small.dtype, s[1:])
        raise TypeInferenceError(
            f"primitive {op.label!r}{where(op.loc)} returned shapes {s} and {g} for batch "
            f"sizes {_DUMMY_BATCHES}; a primitive must keep the batch dimension first"
        )

    def bind_outputs(self, op, names: Any, out_type: Type) -> None:
        if is_pattern_node(names):
            tensors = out_type.tensors
            if not (is_pattern_node(tensors) and len(tensors) == len(names)):
                raise TypeInferenceError(
                    f"{_op_name(op)}{where(op.loc)} produces {out_type!r}, "
                    f"which does not unpack into {format_pattern(names)}"
                )
            for name, t in zip(names, tensors):
                self.bind_outputs(op, name, Type(t))
            return
        self.merge_into(names, out_type, op.loc)

    def visit_call(self, op: FunctionCallOp) -> None:
        callee = self.program.function(op.function)
        for actual, formal in zip(op.vars_in, callee.vars_in):
            if actual in self.types:
                self.merge_into(formal, self.types[actual], op.loc)
        for formal_out, actual_out in zip(callee.vars_out, op.vars_out):
            if formal_out in self.types:
                self.bind_outputs(op, actual_out, self.types[formal_out])

    def sweep(self) -> None:
        for function, blocks in self.live_blocks():
            self.apply_type_inference(function)
            for block in blocks:
                for op in block.instructions:
                    if isinstance(op, PrimOp):
                        self.visit_prim(op)
                    elif isinstance(op, FunctionCallOp):
                        self.visit_call(op)

    # -- branches decided by shapes (`shape_branches`) ---------------------------------
    def decision(self, block):
        test = shape_branches.shape_test(block)
        return shape_branches.BOTH if test is None else shape_branches.decide(test, self.types)

    def live_blocks(self) -> list:
        """``(function, blocks)`` for each function that main's reachable blocks call, with
        its own reachable blocks: a side of a branch decided by shapes that Python does
        not run is neither typed nor compiled."""

        def next_labels(block):
            return shape_branches.taken(block, self.decision(block))

        live, todo, seen = [], [self.program.main], set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            function = self.program.function(name)
            blocks = shape_branches.reachable(function.graph, next_labels)
            live.append((function, blocks))
            todo.extend(op.function for block in blocks for op in block.instructions
                        if isinstance(op, FunctionCallOp))
        order = {f.name: k for k, f in enumerate(self.program.functions)}
        return sorted(live, key=lambda item: order[item[0].name])

    def marked_program(self) -> Program:
        """The program with each primitive that reads weak and strong values marking the
        weak ones, so it runs as one example's code does (`pcbatch.backends.weak`)."""

        def rewrite(op):
            if not isinstance(op, PrimOp):
                return op
            if op.vars_in and all(v in self.types for v in op.vars_in):
                in_types = tuple(self.types[v] for v in op.vars_in)
                checks = self.checks.get((id(op.function), type_key(in_types)), ())
                op = with_weak_inputs(op, in_types, checks)
            return op

        def expand(op) -> tuple:
            index_types = tuple(self.types.get(v) for v in op.vars_in[2:])
            if masked_items.is_masked(op, index_types):
                return (rewrite(masked_items.replaced(op)),)
            if item_values.needs_conversion(op, self.types):  # buf[i] = k, buf int8
                return tuple(map(rewrite, item_values.converted(op, self.types)))
            return (rewrite(op),)

        self.check_literals()
        functions = []
        for function, live in self.live_blocks():
            blocks = tuple(
                dataclasses.replace(
                    shape_branches.fold(block, self.decision(block)),
                    instructions=tuple(o for op in block.instructions for o in expand(op)),
                )
                for block in live
            )
            functions.append(dataclasses.replace(function, graph=ControlFlowGraph(blocks)))
        return self.program.replace(functions=tuple(functions), var_types=self.types)

    def check_literals(self) -> None:
        """A literal that reaches a variable of a strong dtype (directly, by copies such as
        a ``return``, or as a call's argument) must keep its value there."""
        literals: dict = {}  # variable -> [(value, loc)] of the literals it may hold
        edges = []  # (source, target): a copy or an argument / result passing
        for _, blocks in self.live_blocks():
            for block in blocks:
                for op in block.instructions:
                    self.literal_flow(op, literals, edges)
        changed = True
        while changed:
            changed = False
            for source, target in edges:
                for literal in literals.get(source, ()):
                    if literal not in literals.setdefault(target, []):
                        literals[target].append(literal)
                        changed = True
        for var, found in literals.items():
            t = self.types[var].tensors if var in self.types else None
            if not isinstance(t, TensorType) or is_weak(t):
                continue
            for value, loc in found:
                if not _holds(t.dtype, value):
                    raise _literal_does_not_fit(value, loc, var, t)

    def literal_flow(self, op, literals: dict, edges: list) -> None:
        if isinstance(op, FunctionCallOp):
            callee = self.program.function(op.function)
            edges.extend(zip(op.vars_in, callee.vars_in))
            edges.extend(zip(callee.vars_out, flatten(op.vars_out)))
            return
        weak = getattr(op.function, "weak_results", None)
        if weak is not None and not op.vars_in:
            values, names = flatten(op.function()), flatten(op.vars_out)
            for value, name, is_literal in zip(values, names, flatten(weak)):
                if is_literal:
                    value = value.item() if hasattr(value, "item") else value  # a Python int
                    literals.setdefault(name, []).append((value, op.loc))
        elif op.is_copy and len(op.vars_in) == len(flatten(op.vars_out)):
            edges.extend(zip(op.vars_in, flatten(op.vars_out)))

    def check_complete(self) -> None:
        for function, blocks in self.live_blocks():
            self.apply_type_inference(function)
            for block in blocks:
                for op in block.instructions:
                    for var in list(reads(op)) + list(writes(op)):
                        if var not in self.types:
                            raise TypeInferenceError(
                                f"could not infer the type of {var!r} in function "
                                f"{function.name!r}{where(op.loc)}: nothing that defines it "
                                "ever produces a value (e.g. a recursion with no base case, "
                                "a branch that never returns, or a local that no statement "
                                "compiled for this call assigns, where Python would raise "
                                "UnboundLocalError: assign it on every path)"
                            )


def _check_not_objects(op: PrimOp, result: Type) -> None:
    """A result that NumPy holds as Python objects (None, say) is not a batched value."""
    for leaf in flatten(result.tensors):
        if getattr(leaf.dtype, "kind", None) == "O":
            raise TypeInferenceError(
                f"primitive {op.label!r}{where(op.loc)} returned None or another Python "
                "object, which is not a batched value (every example's values are numbers, "
                "booleans or arrays of them); return a number or array instead (for an "
                "optional value, a boolean flag beside it, or a sentinel such as np.nan)"
            )


def _holds(dtype, value) -> bool:
    """Whether the Python scalar ``value`` converts to ``dtype`` without overflow."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min <= value <= info.max
    if dtype.kind == "f" and isinstance(value, (int, float)):
        with np.errstate(all="ignore"):
            return bool(np.isfinite(dtype.type(value))) or not np.isfinite(value)
    return True


def _literal_does_not_fit(value, loc, var: str, t: TensorType) -> TypeInferenceError:
    local = var.split(".", 1)[-1]
    name = (
        "the result" if local.startswith("__ret")
        else "the value of max(...) or min(...)" if _EXTREME_SO_FAR.search(local)
        else "the total of sum(...)" if _SUM_TOTAL.search(local)
        else repr(local)
    )
    return TypeInferenceError(
        f"the literal {value!r}{where(loc)} goes into {name}, whose other definitions "
        f"make it {np.dtype(t.dtype).name}, which cannot hold it (NumPy 2 raises "
        f"OverflowError when such a literal meets that dtype); convert one side "
        f"explicitly, e.g. np.int64({value!r}) or x.astype(np.int64)"
    )


def with_weak_inputs(
    op: PrimOp, in_types: Sequence[Type], checks: tuple = (), noting: bool = False
) -> PrimOp:
    """``op``, marking its weak inputs where it also reads strong ones (a per-example
    primitive: the frontend's expressions); weak values alone compute as Python's,
    unmarked, unless they divide (Python's ZeroDivisionError: `per_example.weak_ufunc`).
    ``checks``: the run-time checks type inference saw it note (`weak_values.Faults`),
    which the compiled machines probe for; ``noting``: type inference's run, which marks
    weak values alone too, to see whether they divide."""
    leaves = [leaf for t in in_types for leaf in flatten(t.tensors)]
    narrowing = any(kind == weak_values.OVERFLOW for kind, _ in checks)
    others = tuple(
        (kind, _check_site(at, op.loc)) for kind, at in checks if kind != weak_values.OVERFLOW
    )
    any_weak = any(map(is_weak, leaves))
    mixed = any_weak and not all(map(is_weak, leaves))
    # Python's division by zero and ints past int64 (`per_example.weak_ufunc`) are
    # checked on weak values alone too
    checked = any(kind in _WEAK_ALONE for kind, _ in checks)
    # Python's bools compute as ints (`python_ints.python_bools`), NumPy's would not
    weak_bool = any(is_weak(t) and np.dtype(t.dtype).kind == "b" for t in leaves)
    marks = mixed or (any_weak and (noting or checked or weak_bool))
    if not op.per_example or not (marks or others):
        return op
    flags = [map_pattern(is_weak if marks else lambda _: False, t.tensors) for t in in_types]
    overflow_at = str(op.loc) if mixed and (narrowing or _may_overflow(leaves)) else None
    function = weak_values.with_weak_inputs(op.function, flags, overflow_at, others)
    return dataclasses.replace(op, function=function)


_WEAK_ALONE = frozenset({
    weak_values.ZERO_DIVISION, weak_values.PYTHON_INT, weak_values.ZERO_POWER,
    weak_values.POWER_OVERFLOW, weak_values.COMPLEX_POWER,
})


def _check_site(at: str | None, loc) -> str:
    """Where a run-time check noted inside a primitive fails: a plain helper's line and
    where the batched function called it, or the batched function's own line."""
    if loc is None or at is None:
        return at or str(loc)
    if at.split(" in ")[0] == f"{loc.file}:{loc.line}":
        return str(loc)
    return f"{at}, called at {loc}"


def _may_overflow(leaves: Sequence) -> bool:
    """Whether a weak int among ``leaves`` may meet an int array that cannot hold every
    int64 (int8 to int32, unsigned): NumPy 2 raises for one out of its range."""
    weak_int = any(is_weak(t) and np.dtype(t.dtype).kind in "iu" for t in leaves)
    narrow = any(
        not is_weak(t) and np.dtype(t.dtype).kind in "iu"
        and (np.dtype(t.dtype).kind == "u" or np.dtype(t.dtype).itemsize < 8)
        for t in leaves
    )
    return weak_int and narrow


def with_weak_results(op: PrimOp, in_types: Sequence[Type], result: Type) -> Type:
    """``result`` with the leaves that are Python scalars per example typed weak."""
    # a literal's (`FunctionBuilder.const`), or a function's that always gives Python
    # scalars (`runtime.python_int`)
    weak = getattr(op.function, "weak_results", None)
    passed = getattr(op.function, "passes_through", None)
    if passed is not None:  # returns its input ``passed``: weak as that is
        weak = map_pattern(is_weak, in_types[passed].tensors)
    if weak is None and op.per_example:
        weak = _python_scalar_results(op, in_types)
    if weak is None:
        return result
    try:
        return Type(
            map_pattern(lambda t, w: WeakTensorType(*t) if w else t, result.tensors, weak)
        )
    except ValueError:  # structured otherwise: the batched run is the authority
        return result


def _python_scalar_results(op: PrimOp, in_types: Sequence[Type]) -> Any:
    """Which results of the per-example function are Python scalars, run on one example
    (ones, then zeros: Python scalars for weak inputs, NumPy values for the others, as
    one example holds them); None if it fails on both. A literal beside a strong value
    (``return 3, x``) is a Python int per example, so weak, and stored as one."""
    for fill in (1, 0):
        dummy = lambda t, fill=fill: (  # noqa: E731
            type(python_scalar_of(t.dtype))(fill) if is_weak(t)
            else np.full(t.shape, fill, t.dtype)[()]
        )
        args = [map_pattern(dummy, t.tensors) for t in in_types]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = op.function(*args)
        except Exception:
            continue
        return _scalar_leaves(result)
    return None


def _scalar_leaves(value: Any) -> Any:
    if is_pattern_node(value):
        return rebuild(value, [_scalar_leaves(v) for v in value])
    return is_python_scalar(value)


def _drop_batch(backend):
    def drop(value) -> TensorType:
        t = backend.type_of(value)
        return TensorType(t.dtype, tuple(t.shape[1:]))

    return drop


def _with_batch(t: Type, batch: int) -> Type:
    return Type(map_pattern(lambda leaf: TensorType(leaf.dtype, (batch, *leaf.shape)), t.tensors))


#: the hidden accumulator of a sum over a comprehension (`pcbatch.frontend.comprehensions`)
_SUM_TOTAL = re.compile(r"__comp\d+_\d+_acc$")
#: `comprehensions`' best item so far of a max(...) or min(...)
_EXTREME_SO_FAR = re.compile(r"__comp\d+_\d+_best$")


def _check_item_index(op: PrimOp, index_types: Sequence[Type]) -> None:
    """An item assignment's index parts are each one integer per example: the machines
    store one item (or one slice) per example, and NumPy's integer-array assignment
    (``buf[[0, 2]] = x``) has no order among repeated indices that JAX and TensorFlow
    keep."""
    for t in index_types:
        tensors = t.tensors
        if is_pattern_node(tensors):
            what = f"a list or tuple of {len(tensors)} items"
        elif tensors.shape:
            what = f"an array of shape {tuple(tensors.shape)}"
        elif np.dtype(tensors.dtype).kind not in "iu":
            what = f"a {np.dtype(tensors.dtype).name}"
        else:
            continue
        raise TypeInferenceError(
            f"item assignment{where(op.loc)}: each part of the index must be one integer "
            f"per example or ':', not {what} (NumPy's integer-array assignment is not "
            "supported). Assign item by item in a loop (for k in ks: "
            "buf[k] = x), or build the new array: buf = np.where(np.isin(np.arange(len(buf)), "
            "ks), x, buf)"
        )


def _check_item_value(op: PrimOp, target: Type, value: Type) -> None:
    """An item assignment's value broadcasts to the items it replaces (one example's
    shapes), as NumPy requires: else NumPy's message, at the user's line."""
    if is_pattern_node(target.tensors) or is_pattern_node(value.tensors):
        return  # a tuple: `SetItem` raises Python's TypeError
    dims, items = tuple(target.tensors.shape), []
    if len(op.function.index) > len(dims):
        return  # too many indices: the primitive raises NumPy's IndexError
    for axis, part in enumerate(op.function.index):
        if part == FULL_SLICE:
            items.append(dims[axis])
        elif part is not None:
            items.append(len(range(*part.as_slice().indices(dims[axis]))))
    items += dims[len(op.function.index):]
    shape = tuple(value.tensors.shape)
    while len(shape) > len(items) and shape[0] == 1:
        shape = shape[1:]  # NumPy drops a value's leading unit axes
    try:
        fits = np.broadcast_shapes(shape, tuple(items)) == tuple(items)
    except ValueError:
        fits = False
    if not fits:
        raise TypeInferenceError(
            f"item assignment{where(op.loc)}: could not broadcast input array from shape "
            f"{shape} into shape {tuple(items)} (as NumPy raises for each example): the "
            "value must have the shape of the items it replaces, or broadcast to it"
        )


def _unknown_result(op: PrimOp, how: str, in_types, error: Exception) -> TypeInferenceError:
    if isinstance(error, ConditionShapeError):  # the user's condition, not a primitive
        return TypeInferenceError(f"the condition{where(op.loc)}: {error}")
    if isinstance(error, SharedArrayError):  # the user's assignment, not a primitive
        return TypeInferenceError(f"the assignment{where(op.loc)}: {error}")
    return TypeInferenceError(
        f"primitive {op.label!r}{where(op.loc)} failed {how} of types {list(in_types)}, so "
        f"its result type is unknown: {type(error).__name__}: {error}. {_advice(error)}"
    )


def _op_name(op) -> str:
    return (
        f"call to {op.function!r}" if isinstance(op, FunctionCallOp) else f"primitive {op.label!r}"
    )


def _describe(value) -> str:
    if is_pattern_node(value):
        return f"a {type(value).__name__} of {len(value)}"
    return "a single value"


def run(program: Program, backend, sig: Sequence) -> Program:
    """Infers types given the signature ``sig`` of ``main``'s arguments."""
    sig = list(sig)
    if len(sig) != len(program.vars_in):
        raise TypeInferenceError(
            f"{program.main!r} takes {len(program.vars_in)} arguments but the "
            f"signature has {len(sig)}"
        )
    inference = _Inference(program, backend)
    for var, t in zip(program.vars_in, sig):
        inference.merge_into(var, as_type(t), None)
    for _ in range(MAX_SWEEPS):
        inference.changed = False
        inference.sweep()
        if not inference.changed:
            break
    else:
        raise TypeInferenceError(f"type inference did not settle in {MAX_SWEEPS} sweeps")
    inference.check_complete()
    return inference.marked_program()
