"""The layering promises of docs/ARCHITECTURE.md, checked on the source (AST) of every module.

- The pure layers (the schema, the rpc core, the translation and the other pure modules of
  the agent) import neither trio nor the OpenHands SDK, not even through the trio_acp modules
  they import.  "Import" here is any import statement in the module, lazy ones included.
- There is no import circle among trio_acp modules (module-level imports; a package's
  `__init__` importing its submodules and a submodule's implicit import of its parent
  package are not edges).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "trio_acp"

#: Module names (globs over dotted names) that must stay pure.
PURE = [
    "trio_acp.schema",
    "trio_acp.schema.*",
    "trio_acp.rpc._errors",
    "trio_acp.rpc._framing",
    "trio_acp.rpc._messages",
    "trio_acp.connection._dispatch",
    "trio_acp.openhands.translate",
    "trio_acp.openhands.translate.*",
    "trio_acp.openhands.translate.prompt",
    "trio_acp.openhands.permissions.policy",
    "trio_acp.openhands.permissions.credential_files",
    "trio_acp.openhands.translate.notices",
    "trio_acp.openhands.setup.critic_review",
    "trio_acp.openhands.editor.session_roots",
    "trio_acp.openhands.permissions.run_gate",
    "trio_acp.openhands.permissions.turn_points",
    "trio_acp.openhands.sdk.chat_stream",
    "trio_acp.exception_groups",
    "trio_acp.v2.frames",
    "trio_acp.v2.gateway",
]
FORBIDDEN = ("trio", "openhands", "litellm")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if _is_package(name) else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, *, module_level: bool) -> set[str]:
    """Dotted names `name` imports (for `from X import y`: X, and X.y when that is a module)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: list[ast.stmt] | list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(name, node)
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If) and _is_type_checking(node):
                continue
            elif module_level and isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
            ):
                continue
            visit(list(ast.iter_child_nodes(node)))

    visit(tree.body)
    return found


def _matches(name: str, pattern: str) -> bool:
    return name == pattern or (pattern.endswith(".*") and name.startswith(pattern[:-1]))


PURE_MODULES = sorted(n for n in MODULES if any(_matches(n, p) for p in PURE))


def test_the_pure_layers_exist():
    # A rename must update PURE, or the test below would check nothing.
    for prefix in ("trio_acp.schema", "trio_acp.rpc._", "trio_acp.openhands.translate"):
        assert any(n.startswith(prefix) for n in PURE_MODULES), prefix


@pytest.mark.parametrize("name", PURE_MODULES)
def test_pure_module_imports_neither_trio_nor_the_sdk(name):
    seen, todo, path = set(), [name], {name: [name]}
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for imported in _imports(current, module_level=False):
            root = imported.split(".")[0]
            assert root not in FORBIDDEN, f"{' -> '.join(path[current])} imports {imported}"
            if imported in MODULES and imported not in seen:
                path.setdefault(imported, [*path[current], imported])
                todo.append(imported)


def test_no_import_circle():
    graph: dict[str, set[str]] = {}
    for name in MODULES:
        edges = set()
        for imported in _imports(name, module_level=True):
            if imported not in MODULES or imported == name:
                continue
            if name.startswith(imported + ".") or imported.startswith(name + "."):
                continue  # a module and its own package (or a package and its submodules)
            edges.add(imported)
        graph[name] = edges

    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


#: The door to the OpenHands SDK (docs/ARCHITECTURE.md, `sdk/`): the only package that
#: imports it or litellm.
DOOR = "trio_acp.openhands.sdk"
SDK_ROOTS = ("openhands", "litellm")


def _sdk_imports(name: str) -> set[str]:
    """Every SDK or litellm module `name` imports, at any depth of its code (functions and
    `TYPE_CHECKING` blocks included), or names to `importlib.import_module`/`__import__`."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module or "")
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id == "__import__")
            )
        ):
            found.add(node.args[0].value)
    return {imported for imported in found if imported.split(".")[0] in SDK_ROOTS}


def test_only_the_door_imports_the_sdk():
    outside = {
        name: sorted(imported)
        for name in MODULES
        if not _matches(name, DOOR) and not _matches(name, DOOR + ".*")
        if (imported := _sdk_imports(name))
    }
    assert not outside, (
        "only trio_acp.openhands.sdk imports openhands/litellm; move these into it: "
        + "; ".join(f"{name} imports {', '.join(found)}" for name, found in sorted(outside.items()))
    )


def test_the_door_check_sees_every_kind_of_import(tmp_path):
    # The check above must not pass by missing an import: one of each kind is found.
    source = (
        "import litellm\n"
        "def f():\n"
        "    from openhands.sdk import LLM\n"
        "if TYPE_CHECKING:\n"
        "    from openhands.tools.terminal import TerminalTool\n"
        "importlib.import_module('openhands.tools.task')\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    MODULES["trio_acp.probe"] = path
    try:
        assert _sdk_imports("trio_acp.probe") == {
            "litellm",
            "openhands.sdk",
            "openhands.tools.terminal",
            "openhands.tools.task",
        }
    finally:
        del MODULES["trio_acp.probe"]
