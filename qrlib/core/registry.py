"""Loading every paper's registrations into the shared registries, through entry points.

The registries live in the shared layers: prompt templates in
:mod:`qrlib.generation.prompts`, completion formats in :mod:`qrlib.generation.parsing`,
rewards in :mod:`qrlib.rl.rewards`. Each paper registers its entries from its own folder
(``qrlib/methods/<paper>/register.py`` imports its ``prompts``, ``formats`` and ``rewards``)
and declares that module as an entry point of the group :data:`GROUP` in
``pyproject.toml`` (the Python packaging convention for plugins), so no shared module names
a paper. :func:`load_methods` imports every entry: the repository's own
(``pyproject.toml``, read from the checkout, so a paper added there works before the
package is reinstalled) and any other installed distribution's. A lookup by name that
misses (``prompts.get("acqo/decompose")``, ``make_reward("acqo_stage1")``,
``parse_completion(text, "sage")``) calls :func:`load_methods` and looks again.

Modules that resolve names from a configuration (:mod:`qrlib.generation.rewrite`,
:mod:`qrlib.rl.env`, :mod:`qrlib.rl.train`, :mod:`qrlib.methods.acqo.curriculum`) import
:mod:`qrlib.methods.registry` with an ordinary statement; :mod:`qrlib.workbook.freshness`
counts the entry points' modules as imported by it.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from qrlib.core.errors import QrlibError

#: The entry-point group papers register through.
GROUP = "qrlib.methods"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

__all__ = ["GROUP", "load_methods", "paper_entries", "pyproject_entries"]


def pyproject_entries(path: Path = PYPROJECT, group: str = GROUP) -> dict[str, str]:
    """``{name: target}`` of the ``group`` entry points a ``pyproject.toml`` declares
    (empty without the file, or on Python 3.10, which has no ``tomllib``)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the installed entry points alone
        return {}
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("project", {}).get("entry-points", {}).get(group, {}))


def paper_entries(group: str = GROUP) -> dict[str, str]:
    """``{name: module}`` of every entry point of ``group`` (by default every registered
    paper): the checkout's ``pyproject.toml`` first, in its order, then installed entry
    points it does not name (``module:attr`` targets keep only the module)."""
    from importlib.metadata import entry_points

    found = {k: v.split(":")[0] for k, v in pyproject_entries(group=group).items()}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep.value.split(":")[0])
    if not found:
        raise QrlibError(f"no paper is registered: no entry point of group {group!r} is "
                         "installed (pip install -e . in the repository)")
    return found


def load_methods() -> None:
    """Import every paper's registering module (a no-op for those already imported)."""
    for name, module in paper_entries().items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise QrlibError(f"entry point {name} = {module} of group {GROUP!r} cannot be "
                             f"imported ({exc})") from None
