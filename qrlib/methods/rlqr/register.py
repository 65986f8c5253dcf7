"""RL-QR: its registrations into the shared registries.

Named by the ``rlqr`` entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports it.
"""
from qrlib.methods.rlqr import formats, prompts, rewards  # noqa: F401
