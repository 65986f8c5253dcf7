"""ACQO: its registrations into the shared registries.

Named by the ``acqo`` entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports it.
"""
from qrlib.methods.acqo import formats, prompts, rewards  # noqa: F401
