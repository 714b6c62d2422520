"""Functions defined inside a batched function, lifted into batched functions of their own.

``def g(t): ...`` or ``g = lambda t: ...`` at the top level of a batched function's body
becomes the batched function ``outer:g``, compiled as any batched function is (its own
``if``, loops and returns per example). Python's closure reads the enclosing function's
variables when it is called; so does the lifted function: it takes the ones it reads as
keyword parameters, and every call ``g(a)`` passes their values at the call
(``outer:g(a, x=x)``). A local function calling another passes on what that one reads.

Refused at the line, saying what to write: a local function bound in a branch or loop,
bound twice, used before its definition, used other than by a call (passed, returned,
stored), with ``*args``/``**kwargs``, or with a default that is not a literal. The
lifted function is checked by the fence like any other (``nonlocal`` is refused there).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect

from pcbatch.frontend.parse import ParsedFunction, local_names, parameter_names

__all__ = ["LocalFunction", "lift"]


@dataclasses.dataclass(eq=False)
class LocalFunction:
    """What a lifted function's hidden name holds in its callers' namespace."""

    parsed: ParsedFunction | None = None


@dataclasses.dataclass
class _Found:
    """One local function: its name, statement, parameters and body."""

    name: str
    stmt: ast.stmt
    args: ast.arguments
    body: list
    reads: set = dataclasses.field(default_factory=set)


def lift(parsed: ParsedFunction, fixed: dict | None = None) -> tuple[ParsedFunction, list]:
    """``parsed`` without its local functions, each call rewritten, and the lifted
    functions; ``(parsed, [])`` when it defines none. ``fixed``: the None and text
    arguments ``parsed`` is compiled for (`statics`), which a local function reads as the
    constants they are, unless ``parsed`` rebinds them."""
    found = _local_functions(parsed)
    if not found:
        return parsed, []
    tree = copy.deepcopy(parsed.tree)
    tree.body = [copy.deepcopy(s) for s in parsed.tree.body
                 if not any(s is f.stmt for f in found.values())]
    rebound = {n.id for s in tree.body for n in ast.walk(s)
               if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    constants = {n: v for n, v in (fixed or {}).items() if n not in rebound}
    enclosing = local_names(tree) - found.keys() - constants.keys()
    for local in found.values():
        local.reads = _free_reads(local) & enclosing
    _close_over_calls(parsed, found)
    hidden = {name: f"__pcb_local_{name}" for name in found}
    markers = {hidden[name]: LocalFunction() for name in found}
    _check_uses(parsed, found)
    lifted = []
    for local in found.values():
        inner = _lifted(parsed, local, found, hidden)
        inner = dataclasses.replace(inner, closure={**parsed.closure, **constants, **markers})
        markers[hidden[local.name]].parsed = inner
        lifted.append(inner)
    tree = _Calls(found, hidden).visit(tree)
    return dataclasses.replace(parsed, tree=tree, closure={**parsed.closure, **markers}), lifted


def _local_functions(parsed: ParsedFunction) -> dict[str, _Found]:
    found: dict[str, _Found] = {}
    for stmt in parsed.tree.body:
        local = _as_local_function(stmt)
        if local is None:
            continue
        if local.name in found:
            raise parsed.syntax_error(stmt, f"the local function {local.name!r} is defined "
                                      "twice; give the second another name")
        found[local.name] = local
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.FunctionDef) and node is not parsed.tree and not any(
            node is f.stmt for f in found.values()
        ):
            raise parsed.syntax_error(node, _NOT_AT_TOP)
    return found


_NOT_AT_TOP = (
    "a def inside an if, a loop or another local function is not supported; define it at "
    "the top level of the function's body (it may read the function's variables), or at "
    "module level"
)


def _as_local_function(stmt: ast.stmt) -> _Found | None:
    if isinstance(stmt, ast.FunctionDef):
        return _Found(stmt.name, stmt, stmt.args, stmt.body)
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Lambda)
    ):
        body = [ast.copy_location(ast.Return(stmt.value.body), stmt.value.body)]
        return _Found(stmt.targets[0].id, stmt, stmt.value.args, body)
    return None


def _own_names(local: _Found) -> frozenset:
    """The names the local function binds: its parameters and locals, and the targets of
    comprehensions and lambdas inside it (scopes of their own)."""
    scope = ast.FunctionDef(name=local.name, args=local.args, body=local.body,
                            decorator_list=[])
    nested = set()
    for node in (n for s in local.body for n in ast.walk(s)):
        if isinstance(node, ast.comprehension):
            nested |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Lambda):
            nested |= set(parameter_names(node))
    return local_names(scope) | nested


def _free_reads(local: _Found) -> set:
    """The names the function's body reads that it does not bind itself."""
    return {n.id for s in local.body for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - _own_names(local)


def _close_over_calls(parsed: ParsedFunction, found: dict[str, _Found]) -> None:
    """A local function calling another reads what that one reads (passes it on)."""
    changed = True
    while changed:
        changed = False
        for local in found.values():
            for callee in _called(local.body, found):
                clash = found[callee].reads & _own_names(local)
                if clash:
                    raise parsed.syntax_error(local.stmt, (
                        f"the local function {local.name!r} calls {callee!r}, which reads "
                        f"the enclosing {sorted(clash)[0]!r}, a name {local.name!r} binds "
                        "itself; rename one of them"))
                extra = found[callee].reads - local.reads
                if extra:
                    local.reads |= extra
                    changed = True


def _called(body: list, found: dict) -> set:
    return {n.func.id for s in body for n in ast.walk(s)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in found}


def _lifted(parsed: ParsedFunction, local: _Found, found: dict, hidden: dict) -> ParsedFunction:
    name = f"{parsed.name}:{local.name}"  # no "." (variables are "function.name")
    args = copy.deepcopy(local.args)
    if args.vararg or args.kwarg:
        raise parsed.syntax_error(local.stmt, f"the local function {local.name!r} takes *args "
                                  "or **kwargs, which batched functions do not; name each "
                                  "parameter")
    reads = sorted(local.reads)
    args.kwonlyargs += [ast.arg(arg=r) for r in reads]
    args.kw_defaults += [None] * len(reads)
    tree = ast.FunctionDef(name=name, args=args, body=copy.deepcopy(local.body),
                           decorator_list=[], returns=None, type_params=[])
    ast.copy_location(tree, local.stmt)
    tree = _Calls(found, hidden).visit(tree)
    ast.fix_missing_locations(tree)
    return dataclasses.replace(parsed, function=None, name=name, tree=tree,
                               signature=_signature(parsed, local, args))


def _signature(parsed: ParsedFunction, local: _Found, args: ast.arguments) -> inspect.Signature:
    """The lifted function's parameters: the local function's own (literal defaults),
    then the enclosing variables it reads, by keyword."""
    kind = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [kind.empty] * (len(positional) - len(args.defaults)) + [
        _literal(parsed, local, d) for d in args.defaults
    ]
    params = [
        kind(a.arg, kind.POSITIONAL_ONLY if a in args.posonlyargs else kind.POSITIONAL_OR_KEYWORD,
             default=d)
        for a, d in zip(positional, defaults)
    ]
    params += [
        kind(a.arg, kind.KEYWORD_ONLY,
             default=kind.empty if d is None else _literal(parsed, local, d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults)
    ]
    return inspect.Signature(params)


def _literal(parsed: ParsedFunction, local: _Found, node: ast.expr):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise parsed.syntax_error(
            node, f"a default of the local function {local.name!r} must be a literal (Python "
            "evaluates it once, when the def runs); pass the value at each call instead"
        ) from None


def _check_uses(parsed: ParsedFunction, found: dict) -> None:
    """Each local function is only called, after its definition, and bound nowhere else."""
    position = {name: parsed.tree.body.index(f.stmt) for name, f in found.items()}
    places = [(k, stmt) for k, stmt in enumerate(parsed.tree.body)
              if not any(stmt is f.stmt for f in found.values())]
    places += [(len(parsed.tree.body), s) for f in found.values() for s in f.body]
    for k, stmt in places:
        calls = {id(n.func) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
        for node in ast.walk(stmt):
            if not (isinstance(node, ast.Name) and node.id in found):
                continue
            if not isinstance(node.ctx, ast.Load):
                raise parsed.syntax_error(node, f"{node.id!r} is a local function here; "
                                          "bind the value to another name")
            if id(node) not in calls:
                raise parsed.syntax_error(node, _AS_VALUE.format(name=node.id))
            if k < position[node.id]:
                raise parsed.syntax_error(node, f"the local function {node.id!r} is called "
                                          "before its definition (Python's NameError); "
                                          "define it first")


_AS_VALUE = (
    "the local function {name!r} is used as a value (passed, returned or stored); a batched "
    "function can only call it: call it here, or pass a lambda within the one expression "
    "that uses it (sorted(v, key=lambda a: -a))"
)


class _Calls(ast.NodeTransformer):
    """``g(a)`` of a local function ``g`` -> ``__pcb_local_g(a, x=x)``."""

    def __init__(self, found: dict, hidden: dict):
        self.found = found
        self.hidden = hidden

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.found:
            local = self.found[node.func.id]
            passed = [ast.keyword(arg=r, value=ast.Name(r, ast.Load()))
                      for r in sorted(local.reads)]
            call = ast.Call(ast.Name(self.hidden[local.name], ast.Load()), node.args,
                            [*node.keywords, *passed])
            for made in (call, call.func, *passed, *(k.value for k in passed)):
                ast.copy_location(made, node)  # errors name the call's line
            node = call
        return node

    def visit_Lambda(self, node: ast.Lambda):
        return node  # its own scope: a name there is its parameter, or read at its call
