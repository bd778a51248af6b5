"""The import graph points one way (docs/DESIGN.md, "Layers").

Read statically from the source (``ast``), so a function-local import counts as much as one
at the top of a module: deferring an import hides a cycle from the interpreter, not from the
design. Imports under ``if TYPE_CHECKING:`` are annotations only and are left out.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "privaudit"
DESIGN = PACKAGE.parent / "docs" / "DESIGN.md"


def _unit(module: str) -> str:
    """The layer unit of a module: its subpackage (``audit``) or top-level module (``api``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(n) for n in ast.walk(node)}
    return hidden


def imports(path: Path) -> list[str]:
    """The ``privaudit`` modules a file imports, anywhere in it (TYPE_CHECKING excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = _type_checking_nodes(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "privaudit":
                out += [f"privaudit.{a.name}" for a in node.names]
            elif node.module.startswith("privaudit."):
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("privaudit.")]
    return out


def graph() -> dict[str, set[str]]:
    """Unit → the other units it imports."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _unit(_module_name(path))
        for target in imports(path):
            other = _unit(target)
            if other != me and other != "__version__":
                edges[me].add(other)
    return dict(edges)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_runner_never_imports_the_leaderboard_or_the_outputs() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {target}"
        for path in sorted((PACKAGE / "audit").rglob("*.py"))
        for target in imports(path)
        if _unit(target) in ("leaderboard", "outputs")
    ]
    assert not offenders, offenders


def test_the_leaderboard_is_pure_it_reads_no_run_directory() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)} imports {target}"
        for path in sorted((PACKAGE / "leaderboard").rglob("*.py"))
        for target in imports(path)
        if _unit(target) in ("audit", "outputs", "cli")
    ]
    assert not offenders, offenders


def test_no_two_subpackages_import_each_other() -> None:
    edges = graph()
    mutual = sorted(
        {tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())}
    )
    assert not mutual, f"subpackages importing each other: {mutual}"


def test_the_import_graph_has_no_cycle() -> None:
    cycle = _cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("metrics", "audit"),
        ("metrics", "leaderboard"),
        ("audit", "outputs"),
        ("leaderboard", "outputs"),
        ("api", "defenses"),
        ("api", "attacks"),
    ],
)
def test_a_lower_layer_never_imports_a_higher_one(low: str, high: str) -> None:
    assert high not in graph().get(low, set()), f"{low} imports {high}"


def test_the_checker_sees_a_function_local_import(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from privaudit.outputs import run_grid\n"
        "def f():\n    from privaudit.leaderboard.board import leaderboard\n"
        "    import privaudit.metrics.spec\n"
    )
    assert imports(mod) == ["privaudit.leaderboard.board", "privaudit.metrics.spec"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def design_rows(text: str) -> list[list[str]]:
    """The rows of DESIGN.md's ```layers block, top first: each a list of room names."""
    lines = text.splitlines()
    start = lines.index("```layers") + 1
    end = lines.index("```", start)
    return [[room.strip() for room in line.split("|")] for line in lines[start:end] if line.strip()]


def rooms() -> set[str]:
    """Every room of the package: a subpackage, or a module at the top."""
    found = {_unit(_module_name(path)) for path in PACKAGE.rglob("*.py")}
    return found - {"<root>", "__version__"}


def misplaced(rows: list[list[str]], edges: dict[str, set[str]]) -> list[str]:
    """The imports that do not point to a lower row of ``rows``."""
    row = {room: k for k, names in enumerate(rows) for room in names}
    return sorted(
        f"{a} (row {row[a] + 1}) imports {b} (row {row[b] + 1})"
        for a in edges
        for b in edges[a]
        if a in row and b in row and row[b] <= row[a]
    )


def test_design_lists_every_room_once_and_no_other() -> None:
    listed = [room for names in design_rows(DESIGN.read_text(encoding="utf-8")) for room in names]
    assert len(listed) == len(set(listed)), f"listed twice in DESIGN.md: {listed}"
    assert set(listed) == rooms(), (
        f"DESIGN.md's layers lack {sorted(rooms() - set(listed))} "
        f"and name {sorted(set(listed) - rooms())} that the package does not have"
    )


def test_every_import_points_to_a_lower_row_of_design() -> None:
    wrong = misplaced(design_rows(DESIGN.read_text(encoding="utf-8")), graph())
    assert not wrong, "imports that DESIGN.md's layers forbid: " + "; ".join(wrong)


def test_the_design_check_catches_a_sideways_and_an_upward_import() -> None:
    rows = design_rows("x\n```layers\ncli\naudit | leaderboard\napi\n```\n")
    assert rows == [["cli"], ["audit", "leaderboard"], ["api"]]
    assert misplaced(rows, {"cli": {"audit", "api"}, "audit": {"api"}}) == []
    assert misplaced(rows, {"audit": {"leaderboard"}, "api": {"cli"}}) == [
        "api (row 3) imports cli (row 1)",
        "audit (row 2) imports leaderboard (row 2)",
    ]


def module_graph() -> dict[str, set[str]]:
    """Module → the privaudit modules it imports, anywhere in it, annotations under
    ``if TYPE_CHECKING:`` included (a type a module needs is a dependency of its design);
    ``from pkg import mod`` names both ``pkg`` (its ``__init__`` runs first) and ``pkg.mod``."""
    names = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module_name(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)  # the package runs first, even for a submodule
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        edges[me] = {target for target in found if target in names and target != me}
    return edges


def test_no_cycle_between_files() -> None:
    cycle = _cycle(module_graph())
    assert cycle is None, "import cycle between files: " + " -> ".join(cycle or [])


def relative_imports(root: Path = PACKAGE) -> list[str]:
    """Every relative import under ``root`` (``from ..attacks import ner``): the layer checks
    read absolute module names, so a relative import would pass them unseen; banned (also
    ruff's TID252 in pyproject.toml)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_relative_imports(tmp_path: Path) -> None:
    assert relative_imports() == []
    # The mutation the issue names: a sideways import written relatively inside a defense.
    pkg = tmp_path / "privaudit" / "defenses"
    pkg.mkdir(parents=True)
    (pkg / "mine.py").write_text("from ..attacks import ner\n", encoding="utf-8")
    assert relative_imports(tmp_path / "privaudit") == ["privaudit/defenses/mine.py:1"]


# --- Private names and function-local imports (DESIGN.md, "Layers") -----------------------
# A name starting with ``_`` (dunders aside) is its module's own: no other module imports it.
# The one exception is a private *module* of a room (``attacks._inverter``,
# ``defenses._has_surrogates``), the room's shared internals: its own room may import it,
# and from it, by name; no other room may. A function-local import of a privaudit module
# (a deferred one) says why on its line or in the comment above its group of imports:
# ``# lazy: <reason>`` (a heavy dependency, or a cycle).


def _room_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def private_imports(root: Path = PACKAGE) -> list[str]:
    """Every import of another module's private name, or of a room's private module from
    outside the room: ``path:line name``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        me = _module_name_under(root, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] != "privaudit" or node.module == me:
                continue
            targets = [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                parts = target.split(".")
                private = [p for p in parts[1:] if p.startswith("_") and not p.endswith("__")]
                if not private:
                    continue
                helper = parts[-1] in private and not _is_module(root, target)
                outside = _room_of(target) != _room_of(me)  # a room's internals, from outside
                if helper or outside:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {target}")
    return found


def _module_name_under(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, dotted: str) -> bool:
    p = root.parent.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def unexplained_lazy_imports(root: Path = PACKAGE) -> list[str]:
    """Every function-local import of a privaudit module (``if TYPE_CHECKING:`` ones left
    out) without ``# lazy:`` on its lines or in the comments above its group of imports."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text)
        hidden, seen = _type_checking_nodes(tree), set()
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for parent in ast.walk(fn):
                for _, body in ast.iter_fields(parent):
                    if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
                        continue
                    said, prev_end, prev_import = False, parent.lineno, False
                    for stmt in body:
                        is_import = isinstance(stmt, ast.Import | ast.ImportFrom)
                        if is_import:
                            # its own lines and the comments between it and the statement before
                            near = lines[prev_end : stmt.end_lineno or stmt.lineno]
                            said = any("# lazy:" in line for line in near) or (said and prev_import)
                            ours = _imported_modules(stmt)
                            if ours and id(stmt) not in hidden and id(stmt) not in seen:
                                seen.add(id(stmt))
                                if not said:
                                    found.append(f"{path.relative_to(root.parent)}:{stmt.lineno}")
                        prev_import, prev_end = is_import, stmt.end_lineno or stmt.lineno
    return found


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return [module] if not node.level and module.split(".")[0] == "privaudit" else []
    return [a.name for a in node.names if a.name.split(".")[0] == "privaudit"]


def test_no_module_imports_another_modules_private_names(tmp_path: Path) -> None:
    assert private_imports() == []
    # The mutations: a private helper across modules, a room's internals from another room.
    pkg = tmp_path / "privaudit"
    for room in ("leaderboard", "attacks/_inverter", "cli"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "attacks" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "leaderboard" / "figures.py").write_text("def _bars(): ...\n", encoding="utf-8")
    (pkg / "leaderboard" / "family.py").write_text(
        "from privaudit.leaderboard.figures import _bars\n", encoding="utf-8"
    )
    (pkg / "attacks" / "geia.py").write_text(
        "from privaudit.attacks import _inverter\nfrom privaudit.attacks._inverter import x\n",
        encoding="utf-8",
    )
    (pkg / "cli" / "run.py").write_text(
        "from privaudit.attacks._inverter import cached\n", encoding="utf-8"
    )
    assert private_imports(pkg) == [
        "privaudit/cli/run.py:1 privaudit.attacks._inverter.cached",
        "privaudit/leaderboard/family.py:1 privaudit.leaderboard.figures._bars",
    ]


def test_every_function_local_import_of_ours_says_why(tmp_path: Path) -> None:
    assert unexplained_lazy_imports() == []
    pkg = tmp_path / "privaudit"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "def said():\n"
        "    # lazy: the board brings pandas\n"
        "    import json\n\n"
        "    from privaudit.leaderboard.board import leaderboard\n"
        "    from privaudit.outputs import run_grid\n"
        "    x = 1\n"
        "    from privaudit.api import NONE  # lazy: a cycle\n"
        "def bare():\n"
        "    if TYPE_CHECKING:\n        from privaudit.api import Release\n"
        "    from privaudit.metrics import spec\n",
        encoding="utf-8",
    )
    assert unexplained_lazy_imports(pkg) == ["privaudit/m.py:13"]
