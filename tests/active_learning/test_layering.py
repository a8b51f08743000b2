"""The model half stands alone: a researcher can use active_learning without the platform."""

import ast
from pathlib import Path

import active_learning

PACKAGE = Path(active_learning.__file__).parent


def test_active_learning_imports_nothing_from_the_platform() -> None:
    reaching_in = []
    for module in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(), filename=str(module))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            reaching_in += [f"{module.name}:{node.lineno} {name}" for name in names if name.split(".")[0] == "app"]
    assert reaching_in == []
