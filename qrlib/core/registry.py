"""Loading every paper's registrations into the shared registries.

The registries live in the shared layers: prompt templates in
:mod:`qrlib.generation.prompts`, completion formats in :mod:`qrlib.generation.parsing`,
rewards in :mod:`qrlib.rl.rewards`. Each paper registers its entries from its own folder
(``qrlib/methods/<paper>/{prompts,formats,rewards}.py``), and :mod:`qrlib.methods.registry`
imports all of them. A lookup by name that misses (``prompts.get("acqo/decompose")``,
``make_reward("acqo_stage1")``, ``parse_completion(text, "sage")``) calls
:func:`load_methods` and looks again, so a name works wherever it worked when the
registries imported their paper modules themselves.

The import is made by name on purpose: the shared layers sit below the papers, and an
``import`` statement of :mod:`qrlib.methods.registry` in them would close an import cycle
(each paper imports the registry it registers into). Modules that resolve names from a
configuration (:mod:`qrlib.generation.rewrite`, :mod:`qrlib.rl.env`, :mod:`qrlib.rl.train`,
:mod:`qrlib.methods.acqo.curriculum`) import :mod:`qrlib.methods.registry` with an ordinary
statement instead, so that :func:`qrlib.freshness.module_closure` sees the papers they reach.
"""
from __future__ import annotations

import importlib


def load_methods() -> None:
    """Import :mod:`qrlib.methods.registry` (a no-op once it is imported)."""
    importlib.import_module("qrlib.methods.registry")
