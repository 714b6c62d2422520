"""The package's import graph keeps its seams (issue 29, item 1).

Parsed with `ast` (nothing is imported), every ``import`` in ``pcbatch`` is an edge,
including those inside functions: a lazy import hides a cycle from Python, not from a
reader. Three rules:

- ``pcbatch.vm`` has no import cycle: its modules form layers;
- no module uses another module's private name (``from m import _x``, or ``m._x`` on
  an imported module ``m``): what is shared is public in the module that owns it;
- ``pcbatch.backends`` does not import ``pcbatch.vm``: the machine talks to backends
  through their protocol (`pcbatch.backends.base`), never the other way;
- the eager machine (``pcbatch.vm.machine``) imports no backend but the protocol, and
  not the staged machine: `pcbatch.vm.dispatch` alone chooses between them.

Run as a script (``PYTHONPATH=. python tests/unit/test_import_graph.py``) it prints what
it finds.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "pcbatch"


@dataclasses.dataclass(frozen=True)
class PrivateUse:
    importer: str
    owner: str
    name: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} uses {self.owner}.{self.name}"


def module_files(package: pathlib.Path = PACKAGE) -> dict[str, pathlib.Path]:
    """Dotted module name -> source file, for every module under ``package``."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


class _ModuleScan(ast.NodeVisitor):
    """The modules one module imports, and the private names it takes from them."""

    def __init__(self, name: str, is_package: bool, modules: dict):
        self.name, self.modules = name, modules
        self.package = name if is_package else name.rpartition(".")[0]
        self.imports: set[str] = set()
        self.private: list[PrivateUse] = []
        self.aliases: dict[str, str] = {}  # a local name bound to a pcbatch module

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in self.modules:
                self.imports.add(alias.name)
                local = alias.asname or alias.name.split(".")[0]
                self.aliases[local] = alias.name if alias.asname else local

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = self._absolute(node)
        if source not in self.modules:
            return
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in self.modules:
                self.imports.add(submodule)
                self.aliases[alias.asname or alias.name] = submodule
            else:
                self.imports.add(source)
            if _is_private(alias.name) and source != self.name:
                self.private.append(PrivateUse(self.name, source, alias.name, node.lineno))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain, value = [node.attr], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in self.aliases:
            owner = self.aliases[value.id]
            for attr in reversed(chain):
                if f"{owner}.{attr}" in self.modules:
                    owner = f"{owner}.{attr}"
                    continue
                if _is_private(attr) and owner != self.name:
                    self.private.append(PrivateUse(self.name, owner, attr, node.lineno))
                break
            return  # the chain's inner attributes were read here
        self.generic_visit(node)


def scan(package: pathlib.Path = PACKAGE) -> tuple[dict[str, set[str]], list[PrivateUse]]:
    """The import graph (module -> the pcbatch modules it imports) and every private use."""
    modules = module_files(package)
    graph, private = {}, []
    for name, path in modules.items():
        visitor = _ModuleScan(name, path.name == "__init__.py", modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[name] = visitor.imports - {name}
        private.extend(visitor.private)
    return graph, sorted(private, key=str)


def within(graph: dict[str, set[str]], prefix: str) -> dict[str, set[str]]:
    """The subgraph of the modules ``prefix`` or under it."""
    inside = lambda m: m == prefix or m.startswith(prefix + ".")
    return {m: {t for t in ts if inside(t)} for m, ts in graph.items() if inside(m)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle, each once, starting at its smallest module (small graphs)."""
    found = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for succ in sorted(graph.get(node, ())):
            if succ == start:
                found.append(list(path))
            elif succ > start and succ not in path:
                walk(start, succ, path + [succ])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def backend_imports_of_vm(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (m, t)
        for m, ts in within(graph, "pcbatch.backends").items()
        for t in graph[m]
        if t == "pcbatch.vm" or t.startswith("pcbatch.vm.")
    )


# ---------------------------------------------------------------------------
# The rules, on today's package


def test_vm_has_no_import_cycle():
    graph, _ = scan()
    found = cycles(within(graph, "pcbatch.vm"))
    assert not found, "import cycles in pcbatch.vm:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_module_uses_another_modules_private_names():
    _, private = scan()
    assert not private, "private names used across modules:\n" + "\n".join(map(str, private))


def test_backends_do_not_import_the_vm():
    graph, _ = scan()
    found = backend_imports_of_vm(graph)
    edges = "\n".join(f"{m} -> {t}" for m, t in found)
    assert not found, "backends importing pcbatch.vm:\n" + edges


def test_the_eager_machine_knows_only_the_backend_protocol():
    graph, _ = scan()
    imports = graph["pcbatch.vm.machine"]
    backends = {m for m in imports if m.startswith("pcbatch.backends")}
    assert backends == {"pcbatch.backends.base"}
    assert not {m for m in imports if m.startswith("pcbatch.vm.staged")}


def test_only_dispatch_runs_both_machines():
    graph, _ = scan()
    both = {"pcbatch.vm.machine", "pcbatch.vm.staged"}
    choosers = sorted(m for m, ts in graph.items() if both <= ts)
    assert choosers == ["pcbatch.vm.dispatch"]


# ---------------------------------------------------------------------------
# The checker itself finds what it must (on a small package written here)


def _write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pcbatch"


def test_the_checker_finds_lazy_cycles_private_uses_and_backend_imports(tmp_path):
    package = _write(
        tmp_path,
        {
            "pcbatch/__init__.py": "",
            "pcbatch/vm/__init__.py": "",
            "pcbatch/vm/a.py": "from pcbatch.vm import b\nb._hidden()\n",
            "pcbatch/vm/b.py": "def f():\n    from pcbatch.vm.a import _x as x\n",
            "pcbatch/vm/c.py": "import pcbatch.vm.a\npcbatch.vm.a._y\nfrom pcbatch.vm import a\n",
            "pcbatch/backends/__init__.py": "",
            "pcbatch/backends/n.py": "from pcbatch.vm import c\nfrom . import m\n",
            "pcbatch/backends/m.py": "from .n import _own\n",
        },
    )
    graph, private = scan(package)
    assert cycles(within(graph, "pcbatch.vm")) == [["pcbatch.vm.a", "pcbatch.vm.b"]]
    assert [str(p) for p in private] == [
        "pcbatch.backends.m:1 uses pcbatch.backends.n._own",
        "pcbatch.vm.a:2 uses pcbatch.vm.b._hidden",
        "pcbatch.vm.b:2 uses pcbatch.vm.a._x",
        "pcbatch.vm.c:2 uses pcbatch.vm.a._y",
    ]
    assert backend_imports_of_vm(graph) == [("pcbatch.backends.n", "pcbatch.vm.c")]
    assert graph["pcbatch.backends.n"] == {"pcbatch.vm.c", "pcbatch.backends.m"}


def test_a_module_may_use_its_own_private_names(tmp_path):
    package = _write(
        tmp_path,
        {
            "pcbatch/__init__.py": "",
            "pcbatch/vm/__init__.py": "",
            "pcbatch/vm/a.py": "import pcbatch.vm.a as me\nme._x\n",
        },
    )
    assert scan(package)[1] == []


if __name__ == "__main__":
    graph, private = scan()
    vm_cycles = cycles(within(graph, "pcbatch.vm"))
    print(f"import cycles within pcbatch.vm: {len(vm_cycles)}")
    for cycle in vm_cycles:
        print("  " + " -> ".join(cycle + cycle[:1]))
    print(f"import cycles in all of pcbatch: {len(cycles(graph))}")
    print(f"private names used across modules: {len(private)}")
    for use in private:
        print(f"  {use}")
    found = backend_imports_of_vm(graph)
    print(f"backends importing pcbatch.vm: {len(found)}")
    for m, t in found:
        print(f"  {m} -> {t}")
