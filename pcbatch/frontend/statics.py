"""Values fixed when a program compiles: None and text arguments, constant tests.

A batch holds numbers; ``None`` and text are no per-example values. Yet ordinary
Python takes them as options: ``def solve(a, tol=None, method="newton")``, with
``if tol is None: tol = 1e-8`` and ``if method == "newton":``. Such a value is the same
for every example of a call, so every example's branch on it goes the same way: the
program is compiled for the value (one program per distinct value, cached), and a
branch it decides is compiled alone, as Python runs only that branch.

What is known at compile time (`evaluate`): literals, the static parameters (None or
text, passed or by default, of the function called from Python), global and closure
values that are immutable scalars (None, bool, int, float, complex, text, and tuples
of them; names read through modules too, ``config.DEBUG``), any global object in an
identity test (``W is None``), and ``not``, ``and``/``or``, comparisons, arithmetic,
conditional expressions and text methods (``method.lower()``) of those. Globals are
read as Python reads them at the call: a rebound global rebuilds the program
(`pcbatch.frontend.snapshot`).

Where a static parameter may go: tests (``if``, ``while``, ``x if c else y``,
``and``/``or``), arithmetic folded to a number, arguments of plain helpers
(``helper(x, method)`` calls ``helper(x, "newton")`` per example), and a call of the
same function (recursion) with the same value. It may be rebound in straight-line
code (``tol = 1e-8``: a per-example number from there on), not inside a loop or a
branch on per-example values (it would be None for some examples and a number for
others). It cannot be held as a value (``m = method``, ``return tol``): None and text
are no per-example values.
"""

from __future__ import annotations

import ast
import builtins
import copy
import operator
import types
from collections.abc import Callable
from typing import Any

#: (parameter, value) pairs of the static arguments of one call, in parameter order
Statics = tuple[tuple[str, Any], ...]
#: (the function called from Python, its statics), or None for a call without any
Specialised = tuple[str, Statics] | None

#: what `evaluate` returns for a value that is not known at compile time
UNKNOWN: Any = object()

_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_NUMBERS = (bool, int, float, complex)


def is_static_value(value: Any) -> bool:
    """Whether an argument is fixed for the whole call: None or text."""
    return value is None or isinstance(value, str)


def static_names(specialised: Specialised, function: str) -> frozenset[str]:
    """The parameters of ``function`` that ``specialised`` fixes."""
    if specialised is None or specialised[0] != function:
        return frozenset()
    return frozenset(name for name, _ in specialised[1])


def is_plain(value: Any) -> bool:
    """An immutable scalar (or tuple of them): compared by value, never changed in place."""
    if type(value) in _SCALARS:
        return True
    return type(value) is tuple and all(is_plain(v) for v in value)


def is_number(value: Any) -> bool:
    """A Python number, which a literal could have written (exact types: not NumPy's)."""
    return type(value) in _NUMBERS


_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
    ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def evaluate(node: ast.expr, lookup: Callable[[ast.expr], Any]) -> Any:
    """``node``'s value if it is known at compile time, else `UNKNOWN`.

    ``lookup`` gives a name's (or a module path's) fixed value, or `UNKNOWN`. Evaluation
    follows Python's order and short-circuits; an operation that raises makes the
    value unknown (the per-example run then raises as Python does)."""
    try:
        value = _evaluate(node, lookup)
    except Exception:  # noqa: BLE001 - e.g. 1 / 0: left to run, where Python raises
        return UNKNOWN
    return value if value is UNKNOWN or is_plain(value) else UNKNOWN


def _evaluate(node: ast.expr, lookup: Callable[[ast.expr], Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = lookup(node)
        return value if value is UNKNOWN or is_plain(value) else UNKNOWN
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = _evaluate(node.operand, lookup)
        return UNKNOWN if operand is UNKNOWN else _UNARY[type(node.op)](operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, lookup), _evaluate(node.right, lookup)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, lookup)
    if isinstance(node, ast.Compare):
        return _compare(node, lookup)
    if isinstance(node, ast.IfExp):
        test = _evaluate(node.test, lookup)
        if test is UNKNOWN:
            return UNKNOWN
        return _evaluate(node.body if test else node.orelse, lookup)
    if isinstance(node, ast.Tuple):
        items = [_evaluate(e, lookup) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.Call):
        return _has_attribute(node, lookup) if _calls_hasattr(node, lookup) else (
            _text_method(node, lookup))
    return UNKNOWN


def _calls_hasattr(node: ast.Call, lookup: Callable[[ast.expr], Any]) -> bool:
    return lookup(node.func) is builtins.hasattr and len(node.args) == 2 and not node.keywords


def _has_attribute(node: ast.Call, lookup: Callable[[ast.expr], Any]) -> Any:
    """``hasattr(module, "name")``, a library version check (``np.trapezoid if
    hasattr(np, "trapezoid") else np.trapz``): a module's attributes are fixed once it
    is imported. Of anything else, unknown."""
    owner, name = lookup(node.args[0]), _evaluate(node.args[1], lookup)
    if not isinstance(owner, types.ModuleType) or type(name) is not str:
        return UNKNOWN
    return hasattr(owner, name)


#: methods of text that a test may call on a text argument (``method.lower() == "lu"``)
_TEXT_METHODS = frozenset({
    "lower", "upper", "casefold", "strip", "lstrip", "rstrip", "startswith", "endswith",
    "replace", "removeprefix", "removesuffix", "isdigit", "isalpha", "isalnum",
})


def _text_method(node: ast.Call, lookup: Callable[[ast.expr], Any]) -> Any:
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in _TEXT_METHODS or node.keywords:
        return UNKNOWN
    owner = _evaluate(func.value, lookup)
    args = [_evaluate(a, lookup) for a in node.args]
    if type(owner) is not str or any(a is UNKNOWN for a in args):
        return UNKNOWN
    return getattr(owner, func.attr)(*args)


def _bool_op(node: ast.BoolOp, lookup: Callable[[ast.expr], Any]) -> Any:
    value = UNKNOWN
    for operand in node.values:
        value = _evaluate(operand, lookup)
        if value is UNKNOWN:
            return UNKNOWN
        if bool(value) != isinstance(node.op, ast.And):
            return value  # the operand that decides: falsy for and, truthy for or
    return value


def _compare(node: ast.Compare, lookup: Callable[[ast.expr], Any]) -> Any:
    left = _identity_operand(node.left, node.ops[0], lookup)
    for op, right_node in zip(node.ops, node.comparators):
        right = _identity_operand(right_node, op, lookup)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _identity_operand(node: ast.expr, op: ast.cmpop, lookup: Callable[[ast.expr], Any]) -> Any:
    """An operand of a comparison; of ``is``/``is not`` any global object (its identity
    is what a rebinding changes, and a rebinding rebuilds the program)."""
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(node, (ast.Name, ast.Attribute)):
        return lookup(node)
    return _evaluate(node, lookup)


def module_path_value(node: ast.expr, constant_of: Callable[[ast.expr], Any]) -> Any:
    """The value of ``name`` or ``module.name`` (every step before the last a module):
    what a rebinding of a global, or of a module's attribute, changes."""
    if isinstance(node, ast.Attribute) and not isinstance(
        module_path_value(node.value, constant_of), types.ModuleType
    ):
        return UNKNOWN
    return constant_of(node)


def reads_any(node: ast.AST, names: frozenset[str] | set[str] | dict[str, Any]) -> bool:
    """Whether ``node`` reads one of ``names``."""
    return any(
        isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names
        for n in ast.walk(node)
    )


def held_static(folded: ast.expr) -> ast.Constant | None:
    """A static parameter's value that `Folder` left anywhere but as a call's argument
    (where a plain helper takes it, or a batched call checks it): held as a value."""
    if getattr(folded, "pcbatch_static", None) is not None and not is_number(folded.value):
        return folded  # type: ignore[return-value]
    for parent in ast.walk(folded):
        for child in ast.iter_child_nodes(parent):
            as_argument = isinstance(parent, (ast.Call, ast.keyword)) and child is not getattr(
                parent, "func", None)
            static = getattr(child, "pcbatch_static", None)
            if static is not None and not as_argument and not is_number(child.value):
                return child  # type: ignore[return-value]
    return None


def may_fold(node: ast.AST, statics: dict[str, Any]) -> bool:
    """Whether `Folder` could change ``node``: it reads a static parameter, or holds a
    conditional expression or ``and``/``or`` (whose test may be known)."""
    return any(
        isinstance(n, (ast.IfExp, ast.BoolOp))
        or (isinstance(n, ast.Name) and n.id in statics)
        for n in ast.walk(node)
    )


def first_write(node: ast.AST, names: dict[str, Any]) -> ast.Name | None:
    """The first assignment (or loop target) of one of ``names`` in ``node``, if any."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in names:
            return n
    return None


class Folder(ast.NodeTransformer):
    """Rewrites an expression with what is known at compile time: a known test picks its
    arm (``a if c else b``), known leading operands of ``and``/``or`` decide or drop out,
    a known subexpression that reads a static parameter becomes its number, and every
    other read of a static parameter becomes its value as a literal (an argument of a
    plain helper). Nested scopes that rebind a static name are left alone."""

    def __init__(self, statics: dict[str, Any], lookup: Callable[[ast.expr], Any]) -> None:
        self.statics = statics
        self.lookup = lookup

    def fold(self, node: ast.expr) -> ast.expr:
        """``node`` rewritten (a new tree: the user's stays as written)."""
        return self.visit(copy.deepcopy(node))

    def known(self, node: ast.expr) -> Any:
        return evaluate(node, self.lookup)

    def visit(self, node: ast.AST) -> Any:
        if self.statics and isinstance(node, ast.expr) and reads_any(node, self.statics):
            value = self.known(node)
            if value is not UNKNOWN and is_number(value):
                return ast.copy_location(ast.Constant(value), node)
        return super().visit(node)

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.statics:
            constant = ast.copy_location(ast.Constant(self.statics[node.id]), node)
            constant.pcbatch_static = node.id  # type: ignore[attr-defined]
            return constant
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        test = self.known(node.test)
        if test is UNKNOWN:
            return self.generic_visit(node)
        return self.visit(node.body if test else node.orelse)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        values = list(node.values)
        deciding = not isinstance(node.op, ast.And)  # the truth that ends the chain
        while len(values) > 1:
            value = self.known(values[0])
            if value is UNKNOWN:
                break
            if bool(value) == deciding:
                return self.visit(values[0])  # Python's result: that operand's value
            values.pop(0)  # passed: the result is the rest's
        if len(values) == 1:
            return self.visit(values[0])
        node = ast.copy_location(ast.BoolOp(op=node.op, values=values), node)
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        bound = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        return node if bound & set(self.statics) else self.generic_visit(node)

    def _comprehension(self, node: ast.expr) -> ast.expr:
        targets = {n.id for g in node.generators for n in ast.walk(g.target)
                   if isinstance(n, ast.Name)}
        return node if targets & set(self.statics) else self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

