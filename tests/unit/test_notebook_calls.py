"""Every call a notebook makes into `playbook_utils` names something that exists, with arguments its signature takes;
so does every call the package makes into itself.

CI runs the notebooks without a GPU, so the cells' GPU branches never run there: a function renamed, or a keyword
argument misspelt, in a branch only the H200 takes would otherwise first fail in a GPU session, after its install
and whatever ran before. This reads each code cell's syntax tree instead, so every branch is checked on the CPU:
calls through the names a notebook imports from the package (modules, functions, classes) and through the
`kit.Notebook` it makes (`nb.section(...)`), and the call a thread or process started with `target=` and `args=`
makes of its target (the NVDEC ceiling's decoders start so). Not checked: calls through a dict or a closure, and
callbacks handed to the package."""

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from playbook_utils.tools import kit

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
# the package's modules (not a __main__, which runs when imported, nor the files handed over, each of which imports
# its decoder library and nothing of the package: tests/unit/test_handover.py), by their dotted names
MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in (ROOT / "playbook_utils").rglob("*.py")
    if p.name != "__main__.py" and not (p.parent.name == "handover" and p.name != "__init__.py")
)


def _cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _imported(tree: ast.AST) -> dict:
    """{local name: object} for what the notebook imports from playbook_utils."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("playbook_utils"):
            module = importlib.import_module(node.module)
            for a in node.names:
                obj = getattr(module, a.name, None)
                if obj is None:  # a submodule not imported by its package
                    obj = importlib.import_module(f"{node.module}.{a.name}")
                names[a.asname or a.name] = obj
    return names


def _problem(target, name: str, call: ast.Call) -> str | None:
    """Why `call` cannot reach `target` (None where it can, or where the call's arguments are spread)."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    keywords = [k.arg for k in call.keywords]
    if any(isinstance(a, ast.Starred) for a in call.args):  # *args: only the names can be checked
        takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        unknown = [k for k in keywords if k and k not in sig.parameters and not takes_any]
        return f"{name}() takes no keyword {unknown}" if unknown else None
    named = {k: None for k in keywords if k}
    try:  # with **kwargs the missing arguments may come from it: then only too many, or unknown ones, are wrong
        (sig.bind_partial if None in keywords else sig.bind)(*([None] * len(call.args)), **named)
    except TypeError as e:
        return f"{name}{sig}: {e}"
    return None


def _spawned(call: ast.Call, names: dict) -> tuple | None:
    """(target, its name, a stand-in call) for `threading.Thread(target=f, args=(...))` or a process started so,
    where `f` is a name in `names` and `args` a tuple written out: the call the new thread or process makes."""
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    f = call.func
    kind = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    target, args = kw.get("target"), kw.get("args", ast.Tuple(elts=[]))
    if kind not in ("Thread", "Process") or not isinstance(target, ast.Name) or target.id not in names:
        return None
    if not isinstance(args, ast.Tuple):
        return None
    return names[target.id], target.id, ast.Call(func=target, args=list(args.elts), keywords=[])


def _problems(path: Path) -> list[str]:
    tree = ast.parse("\n".join(c for c in _cells(path) if not c.lstrip().startswith(("%", "!"))))
    return _calls(tree, _imported(tree), {"nb": kit.Notebook})


def _calls(tree: ast.AST, names: dict, instances: dict | None = None) -> list[str]:
    """What is wrong with each call in `tree` through `names` ({local name: module, function or class}) and
    through `instances` ({local name: the class of the object it holds})."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        spawned = _spawned(node, names)
        if spawned:  # the call a thread or process makes of its target: the GPU runs' workers start so
            why = _problem(*spawned)
            if why:
                found.append(f"line {node.lineno}: {why}")
        f, target, name = node.func, None, None
        if isinstance(f, ast.Name) and f.id in names and callable(names[f.id]):
            target, name = names[f.id], f.id
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            owner = names.get(f.value.id, (instances or {}).get(f.value.id))
            if owner is None or not (inspect.ismodule(owner) or inspect.isclass(owner)):
                continue
            name = f"{f.value.id}.{f.attr}"
            if not hasattr(owner, f.attr):
                found.append(f"line {node.lineno}: {name}: no such name")
                continue
            target = getattr(owner, f.attr)
            if inspect.isclass(owner) and inspect.isfunction(target):  # called on an instance (nb.show): bound as
                target = getattr(object.__new__(owner), f.attr)  # the instance binds it (a staticmethod stays unbound)
        if target is not None and callable(target):
            why = _problem(target, name, node)
            if why:
                found.append(f"line {node.lineno}: {why}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_call_into_the_package_names_what_exists_with_arguments_it_takes(path):
    assert _problems(path) == []


def test_the_packages_own_calls_into_itself_name_what_exists_with_arguments_it_takes():
    """The same check over the package's modules (1,173 calls on 2026-12-05): the GPU paths inside it, too."""
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        tree = ast.parse(inspect.getsource(module))
        names = {k: v for k, v in vars(module).items() if (inspect.isfunction(v) or inspect.isclass(v))
                 and v.__module__ == name}  # fmt: skip
        found += [f"{name}: {p}" for p in _calls(tree, {**names, **_imported(tree)})]
    assert found == []


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").rglob("*.py")), ids=lambda p: p.name)
def test_the_gpu_sessions_scripts_call_the_package_as_it_is(path):
    """benchmarks/' scripts (the H200 session's diagnostics among them), read, not run: a call into the package
    from a script that runs only on the GPU machine fails here first."""
    tree = ast.parse(path.read_text())
    assert _calls(tree, _imported(tree)) == []


def test_the_check_finds_a_misspelt_keyword_and_a_missing_function(tmp_path):
    cells = [
        "from playbook_utils.bench import loader_bench\nfrom playbook_utils.tools import kit",
        'nb = kit.Notebook("99", "out", "cpu")\nif False:\n    loader_bench.wait_epoch({}, 4, stepz=3)',
        "    loader_bench.no_such_function()\n    nb.section()",
    ]
    nb = {"cells": [{"cell_type": "code", "source": c} for c in cells]}
    (tmp_path / "99_x.ipynb").write_text(json.dumps(nb))
    found = _problems(tmp_path / "99_x.ipynb")
    assert len(found) == 3, found
    assert any("wait_epoch" in f and "steps" in f for f in found)  # stepz= is no keyword it takes
    assert any("no_such_function" in f for f in found)  # a name the module does not have
    assert any("nb.section" in f for f in found)


def test_the_check_reads_a_threads_target_and_positionals_beside_spread_keywords():
    def worker(a, b):
        return a, b

    src = (
        "import threading\n"
        "threading.Thread(target=worker, args=(1, 2, 3))\n"  # one argument too many for the thread's target
        "threading.Thread(target=worker, args=(1, 2))\n"
        "worker(1, 2, 3, **kw)\n"  # too many positionals, whatever **kw holds
        "worker(1, **kw)\n"  # b may come from **kw
    )
    found = _calls(ast.parse(src), {"worker": worker})
    assert [int(re.match(r"line (\d+):", f).group(1)) for f in found] == [2, 4], found  # the two wrong calls' lines
