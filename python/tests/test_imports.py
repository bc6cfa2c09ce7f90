"""packer_reader's modules import one another without a cycle, as the Go packages do
(internal/archtest): every import of a sibling module counts, also one inside a function (the
way _dataset and _verify once imported each other)."""

import ast
import os

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "packer_reader")


def import_graph(pkgdir, pkg="packer_reader"):
    """{module: set of sibling modules it imports} for the .py files of pkgdir, read statically
    ("__init__" is the package itself)."""
    mods = {f[:-3] for f in os.listdir(pkgdir) if f.endswith(".py")}
    graph = {}
    for mod in sorted(mods):
        with open(os.path.join(pkgdir, mod + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read(), mod + ".py")
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    if parts[0] == pkg:
                        deps.add(parts[1] if len(parts) > 1 and parts[1] in mods else "__init__")
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and (node.module or "").split(".")[0] != pkg:
                    continue  # another package
                if node.level > 1:
                    deps.add("__init__")  # above the package: no sibling
                    continue
                parts = (node.module or "").split(".")
                if node.level == 0:
                    parts = parts[1:]
                if parts and parts[0]:
                    deps.add(parts[0] if parts[0] in mods else "__init__")
                else:  # "from . import x": the module x, or a name of the package itself
                    deps.update(a.name if a.name in mods else "__init__" for a in node.names)
        deps.discard(mod)
        graph[mod] = deps
    return graph


def find_cycle(graph):
    """One import cycle as a list [a, b, ..., a], or None."""
    state = {}  # module -> 1 on the current path, 2 done
    path = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                c = visit(d)
                if c:
                    return c
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            c = visit(m)
            if c:
                return c
    return None


def test_no_import_cycle():
    graph = import_graph(PKG)
    assert {"_dataset", "_verify", "_manifest", "_shards", "_npy", "_hdf5"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle among packer_reader's modules: " + " -> ".join(cycle)


def test_the_package_is_imported_by_no_module_of_it():
    """Only the entry point (__main__) may import the package itself:
    a module that __init__ imports and that imports __init__ back is a cycle by another name."""
    graph = import_graph(PKG)
    assert sorted(m for m, deps in graph.items() if "__init__" in deps) == ["__main__"]


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    pkg = tmp_path / "packer_reader"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from ._a import A\n")
    (pkg / "_a.py").write_text("from ._b import helper\n\nA = 1\n")
    (pkg / "_b.py").write_text("def helper():\n    from ._a import A  # inside a function\n    return A\n")
    (pkg / "_c.py").write_text("import packer_reader._b\nfrom . import _a, open\n")
    graph = import_graph(str(pkg))
    assert graph == {"__init__": {"_a"}, "_a": {"_b"}, "_b": {"_a"}, "_c": {"_a", "_b", "__init__"}}
    assert find_cycle(graph) == ["_a", "_b", "_a"]
    (pkg / "_b.py").write_text("def helper():\n    return 2\n")
    assert find_cycle(import_graph(str(pkg))) is None


def test_torch_module_without_torch_says_what_to_install():
    """Without PyTorch, packer_reader.torch names the install command instead of a bare
    ModuleNotFoundError."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import packer_reader.torch\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(PKG)).stdout
    assert 'pip install "packer_reader[torch]"' in out, out
