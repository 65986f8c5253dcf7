"""SAGE (with DMQR-RAG's rewriting prompts): its registrations into the shared registries.

Named by the ``sage`` entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports it.
"""
from qrlib.methods.sage import dmqr_prompts, formats, prompts, rewards  # noqa: F401
