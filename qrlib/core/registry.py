"""Loading every paper's registrations into the shared registries.

The registries live in the shared layers: prompt templates in
:mod:`qrlib.generation.prompts`, completion formats in :mod:`qrlib.generation.parsing`,
rewards in :mod:`qrlib.rl.rewards`. Each paper's folder under :mod:`qrlib.methods`
registers its entries when it is imported, and importing :mod:`qrlib.methods` imports every
paper. A lookup by name that misses (``prompts.get("acqo/decompose")``,
``make_reward("acqo_stage1")``, ``parse_completion(text, "sage")``) calls
:func:`load_methods` and looks again, so a name works wherever it worked when the
registries imported their paper modules themselves.

The import is made by name on purpose: the shared layers sit below the papers, and an
``import qrlib.methods`` statement in them would close an import cycle (each paper imports
the registry it registers into). Modules that resolve names from a configuration
(:mod:`qrlib.generation.rewrite`, :mod:`qrlib.rl.env`, :mod:`qrlib.rl.train`) import
:mod:`qrlib.methods` with an ordinary statement instead, so that
:func:`qrlib.freshness.module_closure` sees the papers they can reach.
"""
from __future__ import annotations

import importlib


def load_methods() -> None:
    """Import :mod:`qrlib.methods` (a no-op once it is imported)."""
    importlib.import_module("qrlib.methods")
