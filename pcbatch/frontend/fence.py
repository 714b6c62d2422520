"""The fence: reject Python that pcbatch cannot batch, before anything runs.

Every rejection is an `AutobatchSyntaxError` (a `SyntaxError`) at the
offending node, saying what to write instead. What passes the fence is the
supported subset: assignments (plain, tuple-unpacking, augmented, annotated),
``if``/``elif``/``else``, ``while``, ``for ... in range(...)`` (every other ``for``
reaches the fence rewritten into one: `desugar`), ``break``,
``continue``, ``return`` anywhere, ``pass``, expression statements, and any
expression, where calls to batched functions must name them directly.
"""

from __future__ import annotations

import ast
import builtins
import operator

from pcbatch.frontend import statics
from pcbatch.frontend.math_forms import MATH_PER_EXAMPLE
from pcbatch.frontend.parse import ParsedFunction, local_names, parameter_names

_STATEMENTS_OK = (
    ast.Raise,  # where compiled, a branch decided when compiling: `to_ir.Translator`
    ast.Assert,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.If,
    ast.While,
    ast.For,
    ast.Break,
    ast.Continue,
    ast.Return,
    ast.Pass,
    ast.Expr,
)

_STATEMENT_ADVICE = {
    ast.Try: "try/except is not supported; check the condition with if instead",
    ast.With: "with blocks are not supported; move that code into a plain helper function",
    ast.Global: "global is not supported; pass the value as an argument and return the result",
    ast.Nonlocal: "nonlocal is not supported; pass the value as an argument and return it",
    # a def at the top level of the body was lifted (`local_functions`), and one anywhere
    # else refused there: only a def the lifting left is here
    ast.FunctionDef: "a def here is not supported; define it at the top level of the "
    "function's body, or at module level",
    ast.AsyncFunctionDef: "async functions are not supported",
    ast.ClassDef: "class definitions are not supported inside a batched function",
    ast.Delete: "del is not supported; stop using the variable instead",
    ast.Import: "import at module level instead",
    ast.ImportFrom: "import at module level instead",
    ast.AsyncFor: "async for is not supported",
    ast.AsyncWith: "async with is not supported",
    ast.Match: "match is not supported; write the cases as if/elif comparisons "
    "(if n == 0: ... elif n == 1: ... else: ...)",
}


#: `_Fence.global_value` of a local or unknown name
_UNKNOWN = object()

_NONE_ADVICE = (
    "None is not a batched value (every example's values are numbers, booleans or arrays "
    "of them); use a boolean flag (found = False ... if found:) or a sentinel number "
    "(np.nan, -1) instead"
)


#: NumPy's name of a math function where it differs
_NUMPY_NAMES_OF_MATH = {"pow": "power", "atan": "arctan", "atan2": "arctan2", "asin": "arcsin",
                        "acos": "arccos", "asinh": "arcsinh", "acosh": "arccosh",
                        "atanh": "arctanh"}

_LAMBDA_ADVICE = (
    "a lambda held in a variable here (in a branch or loop, or returned) is not a "
    "per-example value (every example's values are numbers, booleans or arrays of them): "
    "bind it (f = lambda t: ...) or def it at the top level of the function's body, or at "
    "module level, and call it by name; a lambda passed within one expression "
    "(sorted(items, key=lambda a: -a)) is fine"
)

#: builtins that make text of a value
_TEXT_BUILTINS = ("str", "repr", "format", "ascii", "hex", "oct", "bin", "chr")

_TEXT_ADVICE = (
    "{what} of a per-example value is not supported: text is no batched value, and "
    "inside a batched function the value is a batch, so the text would show the batch's "
    "representation, not one example's value. Compute with numbers; to see values, use "
    "pcbatch.host_callback(print, x), or call the function with dry_run=True"
)


_STRING_ADVICE = (
    "a string is no per-example value (every example's values are numbers, booleans or "
    "arrays of them): to choose between modes, use a boolean or int flag (fast = True, "
    "mode = 0), or compare with a module-level constant (MODE = 'fast')"
)


#: methods that change a list (or dict, set) in place
_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                           "add", "setdefault", "popitem", "discard"})

_CONTAINER_ADVICE = (
    "lists that grow, dicts and sets are not per-example values (every example's values "
    "are numbers, booleans or arrays of them, of a fixed shape): make the array first and "
    "assign its items (acc = np.zeros(n); acc[i] = v), or use a tuple or separate variables"
)


class _Fence(ast.NodeVisitor):
    def __init__(self, parsed: ParsedFunction, batched_names: frozenset):
        self.parsed = parsed
        self.locals = local_names(parsed.tree)
        self.batched_names = batched_names
        self.parameters = parameter_names(parsed.tree)
        self.item_assigned = _item_assigned(parsed.tree)
        self.changed_in_place = changed_in_place(parsed.tree)

    def reject(self, node: ast.AST, message: str):
        raise self.parsed.syntax_error(node, message)

    # -- statements ------------------------------------------------------------
    def check_body(self, body: list) -> None:
        for stmt in body:
            self.check_statement(stmt)

    def check_statement(self, stmt: ast.stmt) -> None:
        advice = _STATEMENT_ADVICE.get(type(stmt))
        if advice is not None:
            self.reject(stmt, advice)
        if not isinstance(stmt, _STATEMENTS_OK):
            self.reject(stmt, f"{type(stmt).__name__} statements are not supported")
        getattr(self, f"check_{type(stmt).__name__}", self.generic_check)(stmt)

    def generic_check(self, stmt: ast.stmt) -> None:
        self.visit(stmt)

    def check_Assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
            self.check_item_target(stmt.targets[0])
            self.check_value(stmt.value)
            return  # the value's items are copied in (``w[::-1] = w``): nothing is shared
        for target in stmt.targets:
            self.check_target(target)
        self.check_no_alias(stmt)
        self.check_value(stmt.value)

    def check_AugAssign(self, stmt: ast.AugAssign) -> None:
        if isinstance(stmt.target, ast.Subscript):
            self.check_item_target(stmt.target)
        elif not isinstance(stmt.target, ast.Name):
            self.reject(stmt.target, "augmented assignment must target a variable or an item")
        self.check_value(stmt.value)

    # -- item assignment ---------------------------------------------------------
    def check_item_target(self, target: ast.Subscript) -> None:
        """``buf[i, j] = v``: ``buf`` a local array made in this function, scalar indices."""
        if not (isinstance(target.value, ast.Name) and target.value.id in self.locals):
            self.reject(
                target,
                "item assignment needs a local array variable (buf[i] = v); assigning to an "
                "attribute or to an item of a non-local is not supported",
            )
        if target.value.id in self.parameters:
            self.reject(
                target,
                f"item assignment to parameter {target.value.id!r} is not supported (in Python "
                "it would change the caller's array); copy it first: "
                f"{target.value.id} = np.array({target.value.id})",
            )
        parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if len(parts) == 1 and isinstance(parts[0], ast.Slice):
            self.visit(parts[0])  # per-example bounds too: through a mask (`to_ir`)
            return
        for part in parts:
            if isinstance(part, ast.Slice):
                self.check_static_slice(part)
            else:
                self.visit(part)

    def check_static_slice(self, part: ast.Slice) -> None:
        """A slice in an item assignment's index: its bounds must be known when compiling
        (``buf[1:] = v[:-1]``), so that every example writes the same items."""
        for bound in (part.lower, part.upper, part.step):
            if bound is None:
                continue
            value = self.known(bound)
            if not _is_index(value):
                self.reject(
                    part,
                    f"a slice beside another index part needs bounds known when compiling "
                    f"(literals or constants: m[k, 1:] = v[:-1]), not {ast.unparse(bound)!r}, "
                    "which may differ between examples; write m[k] = np.where((np.arange("
                    "len(m[k])) >= a) & (np.arange(len(m[k])) < b), x, m[k]), or assign item "
                    "by item in a loop",
                )
            if value == 0 and bound is part.step:
                self.reject(part, "slice step cannot be zero")

    def check_no_alias(self, stmt: ast.Assign) -> None:
        """Rejects ``a = b`` between arrays that are item-assigned: Python would share them."""
        names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        if isinstance(stmt.value, ast.Name):
            names.append(stmt.value.id)
        shared = [n for n in names if n in self.item_assigned]
        if shared and isinstance(stmt.value, ast.Name):
            self.reject(
                stmt,
                f"{shared[0]!r} has items assigned in this function, so binding another name to "
                "the same array would share it; make a copy: np.array(...)",
            )
        self.mark_sharing(stmt)

    def mark_sharing(self, stmt: ast.Assign) -> None:
        """``z = y``, ``w = buf[1:]``, ``t = m.T`` where a name is changed in place
        (``y += 1``, ``buf[0] = 5``): Python shares the array (a view), so the change
        shows through both names; a batch cannot share. Known only once types are:
        the frontend checks the value (`runtime.unshared`) and rejects an array."""
        targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        base = shared_base(stmt.value)
        if base is None and targets:
            self.mark_helper_sharing(stmt, targets)
        if base is None or not targets or base in targets:
            return  # ``v = v[::-1]``: the old array has no other name
        changed = [n for n in (base, *targets) if n in self.changed_in_place]
        sequence = getattr(stmt, "_pcbatch_loop", None)  # a for loop's item (`desugar`)
        if changed and base in self.locals and sequence is not None:
            target = targets[0]
            stmt._pcbatch_shares = (
                f"'for {target} in {sequence}' makes {target!r} a view of an item of "
                f"{sequence!r} (when the item is an array), and {changed[0]!r} is changed in "
                f"place in this function ('{changed[0]}[i] = ...' or '{changed[0]} += ...'), "
                f"which Python would show through both; loop over an index and copy the "
                f"item: for i in range(len({sequence})): {target} = np.array({sequence}[i])"
            )
        elif changed and base in self.locals:
            text = ast.unparse(stmt)
            stmt._pcbatch_shares = (
                f"'{text}' makes {targets[0]!r} share the array of {base!r}, and "
                f"{changed[0]!r} is changed in place in this function ('{changed[0]} += ...' "
                f"or '{changed[0]}[i] = ...'), which Python would show through both names; "
                f"copy it: {targets[0]} = np.array({ast.unparse(stmt.value)}) (or write "
                f"{changed[0]} = {changed[0]} + ... instead of +=)"
            )

    def mark_helper_sharing(self, stmt: ast.Assign, targets: list) -> None:
        """``w = helper(y)`` with a plain helper, where ``w`` or ``y`` is changed in place
        and the other name is read elsewhere: the helper may return ``y`` itself or a
        view of it (``return v``, ``return v[:2]``), which Python would share and a batch
        cannot; the frontend rejects an array result (`runtime.unshared`), to be copied."""
        bases = self.plain_helper_arguments(stmt.value)
        if not bases:
            return
        reads = _names_read_outside(self.parsed.tree, stmt)
        for changed in (*targets, *bases):
            if changed not in self.changed_in_place:
                continue
            others = [n for n in (*targets, *bases) if n != changed and n in reads]
            if others:
                break
        else:
            return
        call, target = ast.unparse(stmt.value), targets[0]
        stmt._pcbatch_shares = (
            f"'{ast.unparse(stmt)}' binds {target!r} to what plain helper "
            f"'{ast.unparse(stmt.value.func)}' returns, which may be its argument or a view "
            f"of it ('return v', 'return v[:2]'): Python would then share one array between "
            f"{target!r} and {others[0] if changed == target else changed!r}, and "
            f"{changed!r} is changed in place in this function ('{changed}[i] = ...' or "
            f"'{changed} += ...'), which would show through both names; copy it: "
            f"{target} = np.array({call})"
        )

    def plain_helper_arguments(self, node: ast.expr) -> list:
        """The local names passed to ``node`` when it calls a plain helper (neither a
        batched function, nor a builtin, nor an array library's function, nor a method
        of a local value), or []."""
        if not isinstance(node, ast.Call):
            return []
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in self.locals:
            return []
        if root.id in self.batched_names or root.id in _LIBRARY_ROOTS:
            return []
        if isinstance(node.func, ast.Name) and hasattr(builtins, root.id):
            return []
        arguments = [*node.args, *(k.value for k in node.keywords)]
        names = [shared_base(a) for a in arguments]
        return [n for n in dict.fromkeys(names) if n is not None and n in self.locals]

    def check_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is None:
            self.reject(stmt, "an annotation without a value does nothing; assign a value")
        self.check_target(stmt.target)
        self.check_value(stmt.value)

    def check_target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element)
            return
        if isinstance(target, ast.Starred):
            self.reject(target, "starred assignment is not supported; unpack each element")
        self.reject(
            target,
            "assigning to an item or attribute is not supported; build a new value instead "
            "(e.g. with np.where or a new tuple)",
        )

    def check_Raise(self, stmt: ast.Raise) -> None:
        pass  # its exception is made when compiling, from values known then (to_ir)

    def check_Assert(self, stmt: ast.Assert) -> None:
        pass  # likewise

    def check_If(self, stmt: ast.If) -> None:
        self.check_value(stmt.test)
        test = self.known(stmt.test)
        if test is statics.UNKNOWN:
            self.check_body(stmt.body)
            self.check_body(stmt.orelse)
        else:  # ``if DEBUG: print(x)``: only the side Python runs is compiled (`to_ir`)
            self.check_body(stmt.body if test else stmt.orelse)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        test = self.known(node.test)
        self.visit(node.test)
        if test is statics.UNKNOWN:
            self.visit(node.body)
            self.visit(node.orelse)
        else:
            self.visit(node.body if test else node.orelse)

    def known(self, test: ast.expr):
        """``test``'s value where globals and constants fix it (as `to_ir` decides it),
        else `statics.UNKNOWN`. Static parameters (None, text) are not known here: both
        sides are checked."""
        return statics.evaluate(test, self.static_lookup)

    def static_lookup(self, node: ast.expr):
        value = statics.module_path_value(node, self.global_value)
        if value is _UNKNOWN and isinstance(node, ast.Name) and node.id not in self.locals:
            value = getattr(builtins, node.id, _UNKNOWN)
        return statics.UNKNOWN if value is _UNKNOWN else value

    def check_While(self, stmt: ast.While) -> None:
        # (`loop_else.flags` made every loop's else a test of a flag)
        self.check_value(stmt.test)
        self.check_body(stmt.body)

    def check_For(self, stmt: ast.For) -> None:
        if not _is_range_call(stmt.iter, self.locals):
            # `desugar.for_loops` rewrote every other loop into one over range(...)
            self.reject(
                stmt.iter,
                "this function binds the name 'range' itself, and pcbatch compiles a for "
                "loop into one over Python's builtin range: rename that variable",
            )
        if not isinstance(stmt.target, ast.Name):
            self.reject(stmt.target, "the loop variable of a batched for must be a plain name")
        call = stmt.iter
        if not 1 <= len(call.args) <= 3 or call.keywords:
            self.reject(call, "range() takes 1 to 3 positional arguments")
        if len(call.args) == 3 and _is_literal_zero(call.args[2]):
            self.reject(call.args[2], "range() arg 3 must not be zero (Python raises "
                        "ValueError); give a positive step to count up, a negative one down")
        for arg in call.args:
            self.visit(arg)
        self.check_body(stmt.body)

    def check_Return(self, stmt: ast.Return) -> None:
        if stmt.value is None:
            self.reject(stmt, "a batched function must return a value (return None is not batched)")
        self.check_value(stmt.value)

    # -- None -----------------------------------------------------------------------
    def check_value(self, node: ast.expr) -> None:
        """``node`` becomes a per-example value (assigned, returned, tested, passed)."""
        self.check_not_none(node)
        self.visit(node)

    def check_not_none(self, node: ast.expr) -> None:
        found = self.none_in(node)
        if found is not None:
            self.reject(found, _NONE_ADVICE)
        if isinstance(node, ast.Lambda):
            self.reject(node, _LAMBDA_ADVICE)
        if isinstance(node, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp)) or (
            isinstance(node, ast.List) and not node.elts
        ):
            self.reject(node, _CONTAINER_ADVICE)
        found = _text_in(node)
        if found is not None:
            self.reject(found, _STRING_ADVICE)

    def none_in(self, node: ast.expr) -> ast.expr | None:
        """The part of ``node`` that makes its value (or a field of it) None, if any:
        None itself, a global that is None, or a tuple, conditional or and/or holding one."""
        if isinstance(node, ast.Constant):
            return node if node.value is None else None
        if isinstance(node, (ast.Name, ast.Attribute)):
            return node if self.global_value(node) is None else None
        parts = []
        if isinstance(node, (ast.Tuple, ast.List)):
            parts = node.elts
        elif isinstance(node, ast.IfExp):
            parts = [node.body, node.orelse]
        elif isinstance(node, ast.BoolOp):
            parts = node.values
        for part in parts:
            found = self.none_in(part)
            if found is not None:
                return found
        return None

    def global_value(self, node: ast.expr):
        """The value of a global or closure name (or ``module.attr`` path); `_UNKNOWN` for
        locals and names not found."""
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.locals:
            return _UNKNOWN
        namespaces = (self.parsed.closure, self.parsed.globals)
        value = next((ns[node.id] for ns in namespaces if node.id in ns), _UNKNOWN)
        for attr in reversed(path):
            value = getattr(value, attr, _UNKNOWN)
        return value

    def visit_Compare(self, node: ast.Compare) -> None:
        """``v is None`` / ``v is not None`` on a local: exactly False / True, since no
        batched value is None. Any other ``is`` on a batched value compares array
        objects, which means nothing per example: rejected."""
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Is, ast.IsNot)):
                self.check_identity(node, left, right)
            left = right
        self.generic_visit(node)

    def check_identity(self, node: ast.Compare, left: ast.expr, right: ast.expr) -> None:
        if not (self.reads_locals(left) or self.reads_locals(right)):
            return  # globals and constants only: plain Python, the same for every example
        for value, other in ((left, right), (right, left)):
            if self.none_in(other) is other and isinstance(value, ast.Name):
                return  # a local is never None
        self.reject(
            node,
            "'is' compares object identity, which has no per-example meaning for batched "
            "values; compare values with == (or np.array_equal). 'v is None' and "
            "'v is not None' are allowed on a variable v (always False / True: no batched "
            "value is None)",
        )

    def reads_locals(self, node: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.locals for n in ast.walk(node))

    # -- expressions ------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in self.locals:
            self.reject(
                node.func,
                f"calling {node.func.id!r}, a variable, is not supported: call batched and "
                "plain functions by their own name",
            )
        self.check_builtin_call(node)
        self.check_math_call(node)
        self.check_no_list_growth(node)
        self.check_no_out_keyword(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.batched_names:
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    self.reject(arg, "*args in a call to a batched function is not supported")
                self.check_not_none(arg)
            for kw in node.keywords:
                if kw.arg is None:
                    self.reject(
                        kw.value, "**kwargs in a call to a batched function is not supported"
                    )
                self.check_not_none(kw.value)
        self.generic_visit(node)

    def check_no_list_growth(self, node: ast.Call) -> None:
        """``acc.append(v)`` on a local: a list is no per-example value."""
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _LIST_METHODS
            and isinstance(func.value, ast.Name)
            and func.value.id in self.locals
        ):
            self.reject(node, _CONTAINER_ADVICE)

    def check_math_call(self, node: ast.Call) -> None:
        """``math.sqrt(x)`` needs one Python number, and raises where NumPy's function
        gives nan or inf: a batch can keep neither."""
        function = self.global_value(node.func)
        if getattr(function, "__name__", None) in MATH_PER_EXAMPLE:
            return
        if getattr(function, "__module__", None) != "math" or not any(
            self.reads_locals(arg) for arg in [*node.args, *(k.value for k in node.keywords)]
        ):
            return
        name = getattr(function, "__name__", "f")
        numpy_name = _NUMPY_NAMES_OF_MATH.get(name, name)
        arguments = ", ".join(ast.unparse(arg) for arg in node.args)
        self.reject(
            node,
            f"math.{name}() of a per-example value is not supported: it needs one Python "
            "number, and a per-example value is a row of a batch. Use NumPy's function "
            f"(np.{numpy_name}({arguments}) where NumPy has one), which computes every "
            "example; unlike math it gives nan or inf instead of raising, and a NumPy "
            "value (floor and ceil give floats: int(np.floor(x)) for Python's int)",
        )

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if self.reads_locals(node):
            self.reject(node, _TEXT_ADVICE.format(what="an f-string"))
        self.generic_visit(node)

    def check_no_out_keyword(self, node: ast.Call) -> None:
        """``np.add(x, 1, out=x)`` writes into an array in place: the batch's array is
        not the example's (and JAX and TensorFlow have no ``out=``)."""
        for kw in node.keywords:
            if kw.arg == "out":
                self.reject(
                    kw.value,
                    "out= (writing a result into an existing array in place) is not "
                    "supported in a batched function; assign the result instead: "
                    "x = np.add(x, 1) rather than np.add(x, 1, out=x)",
                )

    def check_builtin_call(self, node: ast.Call) -> None:
        """Builtins whose per-example meaning a batch cannot keep."""
        if not isinstance(node.func, ast.Name) or not self.is_builtin(node.func.id):
            return
        name = node.func.id
        if name == "print":
            self.reject(
                node,
                "print inside a batched function would run once per step for all the "
                "threads there (and while compiling), not once per example: use "
                "pcbatch.host_callback(print, value) to see the values of the threads at "
                "this line, or call the function with dry_run=True",
            )
        reads_locals = any(
            isinstance(n, ast.Name) and n.id in self.locals
            for arg in node.args[:1]
            for n in ast.walk(arg)
        )
        if name == "pow" and len(node.args) + len(node.keywords) == 3:
            self.check_modular_pow(node)
        if name in _TEXT_BUILTINS and reads_locals:
            self.reject(node, _TEXT_ADVICE.format(what=f"{name}()"))
        if name in ("isinstance", "type", "id") and reads_locals:
            self.reject(
                node,
                f"{name}() of a per-example value is not supported: inside a batched "
                "function a value is a batch of arrays, not the Python or NumPy scalar one "
                "example would hold; test its dtype instead (e.g. np.issubdtype(x.dtype, "
                "np.floating))",
            )

    def check_modular_pow(self, node: ast.Call) -> None:
        """``pow(a, e, m)`` needs Python ints: on NumPy's integers, which each example
        holds, Python raises TypeError (and a batch cannot hold unbounded ints)."""
        if any(self.reads_locals(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            self.reject(
                node,
                "pow(base, exp, mod) of a per-example value is not supported: Python "
                "computes it on Python ints only (on a NumPy integer, what an example "
                "holds, it raises TypeError). Write the square-and-multiply loop: "
                "r = 1; b = base % mod; while exp > 0: (if exp % 2 == 1: r = r * b % mod); "
                "b = b * b % mod; exp = exp // 2 (exact while mod * mod fits in int64)",
            )

    def is_builtin(self, name: str) -> bool:
        """``name`` means the builtin here (not a local, global or closure variable)."""
        shadowed = name in self.locals or name in self.parsed.globals
        return not shadowed and name not in self.parsed.closure

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.batched_names and node.id not in self.locals:
            parent_ok = getattr(node, "_pcbatch_callee", False)
            if not parent_ok:
                self.reject(
                    node,
                    f"the batched function {node.id!r} can only be called directly, not "
                    "passed around as a value",
                )

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.reject(node, "the walrus operator := is not supported; assign in a statement")

    def visit_Yield(self, node: ast.AST) -> None:
        self.reject(node, "yield is not supported: a batched function returns one value")

    visit_YieldFrom = visit_Yield

    def visit_Await(self, node: ast.AST) -> None:
        self.reject(node, "await is not supported")

    def visit_comprehension(self, node: ast.comprehension) -> None:
        for name in ast.walk(node.iter):
            if isinstance(name, ast.Name) and name.id in self.locals:
                self.reject(
                    node.iter,
                    "a comprehension over per-example values runs only as sum(...), "
                    "any(...), all(...), max(...) or min(...) of it (no key=), as the "
                    "value of an assignment, a return or an if test that Python always "
                    "evaluates (not behind and/or/if-else or after a call in the same "
                    "statement); write it as a for loop (for a in "
                    "v: ...), or use array operations",
                )
        self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.generic_visit(node)


def _text_in(node: ast.expr) -> ast.expr | None:
    """The part of ``node`` that makes its value (or a field of it) a string, if any."""
    if isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    ):
        return node
    parts: list = []
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = node.elts
    elif isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, ast.BoolOp):
        parts = node.values
    return next((found for part in parts if (found := _text_in(part)) is not None), None)


def _is_range_call(node: ast.expr, locals_: frozenset) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and "range" not in locals_
    )


def _is_literal_zero(node: ast.expr) -> bool:
    """``0``, ``-0``, ``False``, ``0.0``: a step that is zero before anything runs."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and not isinstance(node.value, str) and node.value == 0


def _mark_callees(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            node.func._pcbatch_callee = True


def check(parsed: ParsedFunction, batched_names: frozenset) -> None:
    """Raises `AutobatchSyntaxError` at the first construct outside the supported subset."""
    tree = parsed.tree
    args = tree.args
    if args.vararg or args.kwarg:
        raise parsed.syntax_error(tree, "*args and **kwargs parameters are not supported")
    _mark_callees(tree)
    fence = _Fence(parsed, batched_names)
    fence.check_body(tree.body)


#: methods and attributes of an ndarray that return a view of it
_VIEWS = frozenset({"T", "real", "imag", "reshape", "ravel", "transpose", "squeeze",
                    "swapaxes", "view", "diagonal"})


def shared_base(node: ast.expr) -> str | None:
    """The local whose array ``node``'s value may be (or be a view of): ``y``, ``y[1:]``,
    ``y.T``, ``y.reshape(...)``, ``np.asarray(y)``; None for anything else."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Subscript) or (
            isinstance(node, ast.Attribute) and node.attr in _VIEWS
        ):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
            node.func.attr in _VIEWS
        ):
            node = node.func.value
        elif isinstance(node, ast.Call) and node.args and (
            _is_numpy_asarray(node.func) or _is_loop_item(node.func)
        ):
            node = node.args[0]
        else:
            return None


#: module names whose functions never return their arguments' arrays as such
#: (NumPy's views are named by `_VIEWS` and `np.asarray`)
_LIBRARY_ROOTS = frozenset({"np", "numpy", "math", "jnp", "jax", "tf", "torch", "pcbatch",
                            "cmath", "operator", "functools"})


def _names_read_outside(tree: ast.FunctionDef, stmt: ast.stmt) -> frozenset:
    """The names loaded anywhere in the function but in ``stmt``."""
    inside = {id(n) for n in ast.walk(stmt)}
    return frozenset(
        n.id for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
    )


def _is_loop_item(func: ast.expr) -> bool:
    """A for loop's item (`desugar`): a view of its sequence, as ``v[k]`` is."""
    return isinstance(func, ast.Name) and func.id == "__pcb_item"


def _is_numpy_asarray(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "asarray" and (
        isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy")
    )


def changed_in_place(tree: ast.FunctionDef) -> frozenset:
    """Names the function may change in place: item-assigned, or augmented (``y += 1``)."""
    return _item_assigned(tree) | _augmented_names(tree)


def _augmented_names(tree: ast.FunctionDef) -> frozenset:
    """Names changed by augmented assignment (``y += 1``): in place where ``y`` is an array."""
    return frozenset(
        node.target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
    )


def _item_assigned(tree: ast.FunctionDef) -> frozenset:
    """Names whose items the function assigns (``name[...] = ...`` or ``name[...] += ...``)."""
    names = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                names.add(t.value.id)
    return frozenset(names)


def _is_index(value) -> bool:
    """Whether ``value`` (known when compiling) may bound a slice: an int, None."""
    if value is None:
        return True
    try:
        operator.index(value)
    except TypeError:
        return False
    return True

