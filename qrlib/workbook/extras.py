"""Extras a notebook needs, declared in its source, checked before a published run.

A notebook that cannot run a part without an optional install (Lucene BM25 needs Pyserini
and a Java runtime) says so in its title cell, in a sentence the runner reads::

    # Requires the `lucene` extra (...).

:func:`declared_extras` reads those names; :func:`missing_extras` asks each extra's own
check (:data:`CHECKS`) whether it is usable here; :func:`require_extras` is what the runner
calls: in a published profile a missing extra is a one-line refusal, so a published
notebook never prints "skipped" where its findings should be.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from qrlib.core.errors import QrlibError
from qrlib.workbook import profiles

__all__ = ["CHECKS", "declared_extras", "missing_extras", "require_extras"]

CHECKS: dict[str, tuple[str, str]] = {
    "lucene": ("qrlib.retrieval.lucene", "lucene_available"),
}
"""Extra -> (module, function) returning ``(usable, reason)``."""

DECLARATION = re.compile(r"^# Requires the `([\w-]+)` extra", re.M)


def declared_extras(name: str, src_dir: Path | None = None) -> list[str]:
    """The extras notebook ``name`` declares (``# Requires the `X` extra`` lines)."""
    path = Path(src_dir or profiles.NOTEBOOK_SRC_DIR) / f"{name}.py"  # read at call time:
    if not path.exists():  # the runner may point NOTEBOOK_SRC_DIR elsewhere (tests)
        return []
    found = DECLARATION.findall(path.read_text(encoding="utf-8"))
    unknown = sorted(set(found) - set(CHECKS))
    if unknown:
        raise QrlibError(f"{name} declares unknown extra(s) {unknown}; known: "
                         f"{', '.join(sorted(CHECKS))}")
    return list(dict.fromkeys(found))


def missing_extras(name: str, src_dir: Path | None = None) -> dict[str, str]:
    """``{extra: why it is unusable}`` for the declared extras that are not usable here."""
    out = {}
    for extra in declared_extras(name, src_dir):
        module, func = CHECKS[extra]
        ok, why = getattr(importlib.import_module(module), func)()
        if not ok:
            out[extra] = why
    return out


def require_extras(name: str, profile: str, *, published: bool,
                   src_dir: Path | None = None) -> dict[str, str]:
    """In a published profile, a one-line refusal when a declared extra is missing; else the
    missing ones (the notebook then says itself what it could not run)."""
    missing = missing_extras(name, src_dir)
    if missing and published:
        extra, why = next(iter(missing.items()))
        raise QrlibError(f"{name}: refusing to publish into tables/{profile} without the "
                         f"`{extra}` extra it declares ({why}); `make install` brings it")
    return missing
