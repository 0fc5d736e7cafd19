"""No import cycle inside ``reinforce_ada``: imports form a DAG, at module level and counting lazy imports too.

Module-level edges are the ``import``/``from ... import`` statements a module runs when it is imported (its top
level, including ``if``/``try`` blocks, but not ``if TYPE_CHECKING:``). The second graph adds the imports inside
functions: a lazy import cannot fail at import time, but a circle of them still means two rooms that each need the
other (``training/setup`` -> ``preflight`` -> ``training/setup`` was one).
``from package import submodule`` is an edge to the submodule only (the parent package is imported for every
submodule anyway, so that implicit edge is left out).
"""

import ast
import pathlib

import reinforce_ada

PACKAGE = pathlib.Path(reinforce_ada.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _top_level(body):
    for node in body:
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try)):
            blocks = [node.body, node.orelse, getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _top_level(block)


def _package_of(name: str, path: pathlib.Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph(lazy: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports; ``lazy``: imports inside functions count too."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges = set()
        tree = ast.parse(path.read_text())
        for node in (ast.walk(tree) if lazy else _top_level(tree.body)):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    package = _package_of(name, path).split(".")
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                submodules = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
                edges |= submodules
                if len(submodules) < len(node.names) and base in modules:
                    edges.add(base)
            elif isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names} & modules.keys()
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or ``None`` when the graph is acyclic (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_known_edges():
    graph = import_graph()
    assert "reinforce_ada.verifiers.function" in graph["reinforce_ada.verifiers.registry"]
    assert "reinforce_ada.sampling.protocols" in graph["reinforce_ada.sampling.sampler"]
    assert "reinforce_ada.sampling.sampler" not in graph["reinforce_ada.sampling.factory"]  # a lazy import
    assert "reinforce_ada.sampling.sampler" in import_graph(lazy=True)["reinforce_ada.sampling.factory"]


def test_no_import_cycle_inside_reinforce_ada():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_counting_lazy_imports():
    cycle = find_cycle(import_graph(lazy=True))
    assert cycle is None, "import cycle through lazy imports: " + " -> ".join(cycle)
