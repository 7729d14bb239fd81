"""The package's three rooms, imports pointing one way: the library <- the measurements (bench) <- the tools.

Every import in the package is read from its source (module level and inside functions alike), and so is
every module path written as a string (a `python -m playbook_utils.x` command line is an import too).
"""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "playbook_utils"
ROOMS = ("library", "bench", "tools")  # each may import only the rooms before it


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}  # the files 22 hands over: modules/, beside it


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("bench", "tools") else "library"


def _known(name: str) -> str | None:
    """The longest module of the package that `name` names (a function's dotted path names its module)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in MODULES:
            return ".".join(parts[:k])
    return None


def imports_of(module: str) -> dict[str, int]:
    """{module of this package it imports: line}, from its import statements and its string constants (docstrings
    left out: prose may point to any room)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names = re.findall(r"\bplaybook_utils(?:\.\w+)+", node.value)
        for name in names:
            target = _known(name) if name.startswith("playbook_utils") else None
            if target and target != module:
                found.setdefault(target, node.lineno)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def test_the_import_reader_sees_the_edges_it_must():
    """The reader is not blind: edges known to exist are found, in each form (`from package import module`,
    `from module import name`, inside a function, a `-m` command line)."""
    assert "playbook_utils.decoders" in GRAPH["playbook_utils.loaders"]
    assert "playbook_utils.decoders.base" in GRAPH["playbook_utils.decoders.pyav"]
    assert "playbook_utils.bench.timing" in GRAPH["playbook_utils.tools.kit"]
    assert "playbook_utils.bench" in GRAPH["playbook_utils.bench.harness"]  # its child: `-m playbook_utils.bench`
    assert "playbook_utils.bench.scaling" not in GRAPH["playbook_utils.distributed"]
    assert "playbook_utils.tools.run_notebooks" in GRAPH["playbook_utils.tools.nightly"]
    assert {room(m) for m in MODULES} == set(ROOMS)


def test_each_room_imports_only_the_rooms_before_it():
    wrong = [
        f"{m} ({room(m)}) imports {t} ({room(t)}) at line {line}"
        for m, targets in GRAPH.items()
        for t, line in targets.items()
        if ROOMS.index(room(t)) > ROOMS.index(room(m))
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_is_imported_by_a_computed_name():
    """importlib.import_module / __import__ with a name built at run time would hide an edge from this test."""
    hidden = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if name in ("import_module", "__import__"):
                    hidden.append(f"{module}:{node.lineno}")
    assert not hidden, hidden


# Modules that import torch at their top on purpose, and are therefore imported only inside functions.
TORCH_AT_TOP = {"playbook_utils._iterable": "subclasses torch's IterableDataset (shards.shard_loader imports it)"}


def test_the_library_imports_no_decoder_library_at_module_level():
    """Importing a library module imports no decoder library, torch or matplotlib (each adapter imports its
    library inside `read`)."""
    heavy = ("torch", "av", "decord", "torchcodec", "PyNvVideoCodec", "nvidia", "spdl", "matplotlib", "cv2")
    found = []
    for module, path in MODULES.items():
        if room(module) != "library" or module in TORCH_AT_TOP:
            continue
        for node in ast.parse(path.read_text()).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{module}: {n}" for n in names if n.split(".")[0] in heavy]
            found += [f"{module} imports {n} at its top" for n in names if n in TORCH_AT_TOP]
    assert not found, found


def test_setup_runs_before_anything_is_installed():
    """`make setup` runs `python -m playbook_utils.tools.setup_env` with nothing installed yet: no site-packages
    (-S), no PYTHONPATH (-E), only the standard library and the checkout (pip's vendored copies where pip is)."""
    import subprocess
    import sys

    allowed = set(sys.stdlib_module_names) | {"pip", "packaging", "playbook_utils"}
    tree = ast.parse(MODULES["playbook_utils.tools.setup_env"].read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {n.split(".")[0] for n in names} <= allowed, names
    assert {n for n in names if n.startswith("playbook_utils")} == set()
    run = subprocess.run(
        [sys.executable, "-S", "-E", "-m", "playbook_utils.tools.setup_env", "--help"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and "usage:" in run.stdout, run.stderr[-500:]


def _edges_by_module(module: str) -> set[str]:
    """The modules `module` imports, as Python loads them: `from package import module` is an edge to that
    module only (its package's __init__ runs, but depends on nothing the importer holds), every other import an
    edge to the module it names; imports inside functions count as much as those at the top."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {_known(a.name) for a in node.names if a.name.startswith("playbook_utils")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("playbook_utils"):
                continue
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
            out |= subs or {_known(base)}
            if len(subs) < len(node.names):
                out.add(_known(base))
    return {m for m in out if m and m != module}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_library_has_no_import_cycle():
    """No module of the package imports, however indirectly, a module that imports it back, counting the imports
    hidden inside functions: a cycle there only works by accident of when each import runs, and it let the read
    sequence be written three times (decoders <-> sources <-> media)."""
    graph = {m: _edges_by_module(m) for m in MODULES}
    assert "playbook_utils.probe" in graph["playbook_utils.decoders"]  # the reader sees the edges it must
    assert "playbook_utils.sources" in graph["playbook_utils.probe"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # and the cycle finder finds one
    assert _cycles(graph) == []


def test_the_byte_layer_and_the_probe_stand_on_almost_nothing():
    """`sources` (bytes from anywhere) imports only `errors`; `probe` only `sources` and `errors`: everything
    else stands on them."""
    assert _edges_by_module("playbook_utils.sources") <= {"playbook_utils.errors"}
    assert _edges_by_module("playbook_utils.probe") <= {"playbook_utils.sources", "playbook_utils.errors"}


def test_only_the_decoders_call_an_adapter():
    """One read sequence: outside `decoders`, no module calls an adapter's read, read_file or read_resized (each
    check, the rotation and the shape check exist once, in `decoders.read`)."""
    calls = []
    for module, path in MODULES.items():
        if module.startswith("playbook_utils.decoders"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("read", "read_file", "read_resized")
                and (
                    isinstance(node.func.value, ast.Call)
                    and getattr(node.func.value.func, "id", getattr(node.func.value.func, "attr", "")) == "adapter"
                    or getattr(node.func.value, "id", "") in ("ad", "adapter")
                )
            ):
                calls.append(f"{module}:{node.lineno}")
    assert not calls, calls


def test_experiment_scripts_live_outside_the_package_and_run_nothing_on_import():
    """One-off measurements are scripts under benchmarks/experiments/, not modules a user imports; each runs only
    under its `__main__` guard."""
    assert not (PACKAGE / "bench" / "experiments").exists()
    scripts = sorted((PACKAGE.parent / "benchmarks" / "experiments").glob("*.py"))
    assert scripts
    for script in scripts:
        tree = ast.parse(script.read_text(), str(script))
        top = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
        guarded = [n for n in top if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        calls = [n for n in top if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        assert guarded and not calls, f"{script.name}: its work must run under `if __name__ == '__main__'`"


def test_the_packages_own_modules_are_imported_at_the_top():
    """The import graph has no cycle, so no module of the package needs hiding inside a function; the one
    exception is a module that imports torch at its top (TORCH_AT_TOP), imported where it is used."""
    inside = []
    for module, path in MODULES.items():
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else ["." * node.level + (node.module or "")]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                inside += [
                    f"{module}:{node.lineno} {n}"
                    for n in names
                    if (n.startswith("playbook_utils") or n.startswith(".")) and n not in TORCH_AT_TOP
                ]
    assert not inside, inside


def test_every_module_a_user_imports_says_what_it_offers():
    """The library room's modules each fence their public names with `__all__`, and every name listed exists."""
    import importlib

    unfenced, missing = [], []
    for module in MODULES:
        if room(module) != "library" or module.endswith("__main__") or module == "playbook_utils":
            continue
        m = importlib.import_module(module)
        if not hasattr(m, "__all__"):
            unfenced.append(module)
        missing += [f"{module}.{n}" for n in getattr(m, "__all__", []) if not hasattr(m, n)]
    assert unfenced == [] and missing == []
