"""Helpers shared by tests that read qrlib's sources."""
from __future__ import annotations

import ast
from pathlib import Path


def code_text(path: Path) -> str:
    """A module's imports and string constants, its docstring left out: what its code names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    doc = tree.body[0].value if tree.body and isinstance(tree.body[0], ast.Expr) else None
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    nodes += [n for n in ast.walk(tree) if isinstance(n, ast.Constant)
              and isinstance(n.value, str) and n is not doc]
    return " ".join(ast.unparse(n) for n in nodes)
