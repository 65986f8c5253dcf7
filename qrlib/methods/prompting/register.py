"""The training-free prompting baselines: its registrations into the shared registries.

Named by the ``prompting`` entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports it.
"""
from qrlib.methods.prompting import prompts  # noqa: F401
