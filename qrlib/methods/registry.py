"""Every paper's registrations: importing this module fills the prompt, format and reward
registries (see :mod:`qrlib.methods` for why this is not the package ``__init__``).

The order is the order rewards and completion formats were always listed in
(DeepRetrieval, ACQO, SAGE, RL-QR, then the bandit study), so :func:`qrlib.rl.rewards.list_rewards`
and :func:`qrlib.generation.parsing.formats` keep their order. Explicit imports, not
``pkgutil``, so that :mod:`qrlib.freshness` sees each module.
"""
from __future__ import annotations

from qrlib.methods.deepretrieval import formats, prompts, rewards  # noqa: F401
from qrlib.methods.acqo import formats, prompts, rewards  # noqa: F401, F811
from qrlib.methods.sage import dmqr_prompts, formats, prompts, rewards  # noqa: F401, F811
from qrlib.methods.rlqr import formats, prompts, rewards  # noqa: F401, F811
from qrlib.methods.bandits import prompts  # noqa: F401, F811
from qrlib.methods.prompting import prompts  # noqa: F401, F811

PAPERS = ("deepretrieval", "acqo", "sage", "rlqr", "bandits")
