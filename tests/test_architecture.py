"""Import boundaries between bureau's packages, read from the source with `ast`.

Every `import` and `from ... import` of every module under `src/bureau` counts: at the top, inside
functions, and under `if TYPE_CHECKING:` (a type-only import still ties a package to another's
types, which is exactly what a boundary is about). `RULES` is the one table of what a package
must never reach; the package table of `docs/architecture.md` must list exactly the bureau
packages each package imports.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"

# package (and everything under it) -> what it must never import (modules and their children).
RULES: dict[str, tuple[str, ...]] = {
    "bureau.algo": (
        "bureau.sandbox",
        "bureau.tools",
        "bureau.inference",
        "bureau.harness",
        "bureau.trials",
        "bureau.loop",
        "ray",
        "httpx",
        "starlette",
        "uvicorn",
    ),
    "bureau.trainer": (
        "bureau.sandbox",
        "bureau.tools",
        "bureau.harness",
        "bureau.trials",
        "bureau.inference",
        "bureau.loop",
        "ray",
    ),
    "bureau.tools": ("bureau.harness", "bureau.trainer", "bureau.loop", "bureau.algo"),
    "bureau.tasks": (
        "bureau.sandbox",
        "bureau.trials",
        "bureau.tools",
        "bureau.inference",
        "bureau.harness",
        "bureau.trainer",
        "bureau.loop",
    ),
}
# bureau.records is the neutral home of shared record types: it reaches no other bureau
# package but these.
RECORDS_MAY_REACH = ("bureau.records", "bureau.config", "bureau.errors")
# Tool servers run inside the sandbox, whose Python has only these parts of bureau
# (`bureau.sandbox.bwrap.SANDBOX_PACKAGE_ENTRIES`).
TOOLS_MAY_REACH = ("bureau.tools", "bureau.errors")
# Ray appears only where processes are placed.
RAY_ALLOWED_IN = ("bureau.loop.actors", "bureau.cli")


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in the file of `module`; `from a import b`
    gives a and a.b (b may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            yield node.lineno, origin
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{origin}.{alias.name}"


@cache
def _all_imports() -> dict[str, list[tuple[int, str]]]:
    return {
        _module_name(path): list(_imports(path, _module_name(path)))
        for path in sorted((SRC / "bureau").rglob("*.py"))
    }


def _bureau_packages() -> set[str]:
    return {m.split(".")[1] for m in _all_imports() if m.count(".") >= 1}


def _violations() -> list[str]:
    found = []
    for module, imports in _all_imports().items():
        for line, target in imports:
            for package, forbidden in RULES.items():
                if _under(module, package):
                    for banned in forbidden:
                        if _under(target, banned):
                            found.append(
                                f"{module}:{line} imports {target}: {package} must never reach "
                                f"{banned}"
                            )
            for package, allowed in (
                ("bureau.records", RECORDS_MAY_REACH),
                ("bureau.tools", TOOLS_MAY_REACH),
            ):
                outside = target != "bureau" and not any(_under(target, p) for p in allowed)
                if _under(module, package) and _under(target, "bureau") and outside:
                    found.append(
                        f"{module}:{line} imports {target}: {package} reaches no other bureau "
                        f"package than {', '.join(allowed[1:])}"
                    )
            if _under(target, "ray") and not any(_under(module, p) for p in RAY_ALLOWED_IN):
                found.append(
                    f"{module}:{line} imports {target}: ray is imported only by "
                    f"{' and '.join(RAY_ALLOWED_IN)}"
                )
    return sorted(set(found))


def test_no_package_reaches_one_it_must_not() -> None:
    violations = _violations()
    assert not violations, "import boundaries broken:\n" + "\n".join(violations)


def test_the_rules_catch_a_forbidden_import(tmp_path: Path) -> None:
    """The reader sees function-level, TYPE_CHECKING and relative imports."""
    source = tmp_path / "bureau" / "algo" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from bureau.harness.loop import Episode\n"
        "def f():\n    import ray\n    from ..inference import client\n"
    )
    found = {target for _, target in _imports(source, "bureau.algo.probe")}
    assert {"bureau.harness.loop", "ray", "bureau.inference", "bureau.inference.client"} <= found


# --- docs/architecture.md's package table ------------------------------------------------------


def _doc_table() -> dict[str, set[str]]:
    """Row package -> the bureau packages its "depends on" cell names (in backticks)."""
    rows: dict[str, set[str]] = {}
    in_table = False
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:3] == ["package", "concern", "depends on"]:
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        match = re.fullmatch(r"`(bureau(?:\.[\w.]+)?)`", cells[0])
        if match is None:
            continue
        rows[match.group(1)] = set(re.findall(r"`([\w.]+)`", cells[-1]))
    return rows


def _top(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _declared() -> dict[str, set[str]]:
    """Top-level package -> the bureau packages its rows declare (rows of sub-packages merged)."""
    known = _bureau_packages()
    declared: dict[str, set[str]] = {}
    for row, cell in _doc_table().items():
        names = {f"bureau.{n.split('.')[0]}" for n in cell if n.split(".")[0] in known}
        declared.setdefault(_top(row), set()).update(names - {_top(row)})
    return declared


def _actual() -> dict[str, set[str]]:
    actual: dict[str, set[str]] = {}
    for module, imports in _all_imports().items():
        if module.count(".") < 1:
            continue
        package = _top(module)
        reached = {_top(t) for _, t in imports if _under(t, "bureau") and t != "bureau"}
        actual.setdefault(package, set()).update(reached - {package})
    return actual


def test_the_architecture_table_lists_every_package() -> None:
    missing = sorted(set(_actual()) - set(_declared()))
    assert not missing, f"docs/architecture.md has no row for: {', '.join(missing)}"


@pytest.mark.parametrize("package", sorted(_actual()) if DOC.is_file() else [])
def test_the_architecture_table_says_what_each_package_imports(package: str) -> None:
    declared = _declared().get(package)
    if declared is None:
        pytest.skip(f"no row for {package} (see test_the_architecture_table_lists_every_package)")
    actual = _actual()[package]
    problems = []
    for dep in sorted(actual - declared):
        modules = list(
            dict.fromkeys(
                f"{m}:{line}"
                for m, imports in _all_imports().items()
                if _under(m, package)
                for line, t in imports
                if _under(t, dep)
            )
        )
        problems.append(f"imports {dep} ({', '.join(modules[:3])}) but its row does not list it")
    for dep in sorted(declared - actual):
        problems.append(f"its row lists {dep} but no module of {package} imports it")
    assert not problems, f"docs/architecture.md, row {package}:\n" + "\n".join(problems)


def test_the_cli_modules_import_each_other_without_a_cycle() -> None:
    """Lazy imports count too: a cycle through a function body is still a tangle."""
    graph = {
        module: {t for _, t in imports if _under(t, "bureau.cli") and t in _all_imports()}
        for module, imports in _all_imports().items()
        if _under(module, "bureau.cli")
    }
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = " -> ".join([*path[path.index(module) :], module])
            pytest.fail(f"import cycle in bureau.cli: {cycle}")
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
