"""Why SAGE's CRS trains exactly as Direct under GRPO, and the readings under which it would not.

CRS (SAGE Eq. 2) shapes a rollout's reward as :math:`\\tilde r_i = r_i - b` with a baseline
:math:`b` (the median of the rewards it is compared with). GRPO's advantage (DeepSeekMath
Eq. 3; TRL's ``GRPOTrainer``) centres each reward on its group's mean and, by default, divides
by the group's standard deviation:

.. math:: A_i = \\frac{\\tilde r_i - \\operatorname{mean}_j \\tilde r_j}{\\operatorname{std}_j \\tilde r_j + \\epsilon}
          = \\frac{r_i - \\operatorname{mean}_j r_j}{\\operatorname{std}_j r_j + \\epsilon}

whenever :math:`b` is the same for every rollout of the group (a group median, a batch
median): the shift cancels in the centring and leaves the spread unchanged, so CRS and
Direct give identical advantages, hence identical updates. CRS can differ only where that
cancellation fails:

* ``"no-centring"``: advantages without the group-mean centring (a plain REINFORCE update
  on the shaped reward, :math:`A_i = \\tilde r_i`), where :math:`b` acts as the baseline of
  Williams (1992), which is how Eq. 2 reads on its own;
* ``"per-strategy"``: a baseline per strategy (the median of the rollouts of the group that
  used the same strategy), which varies within a group and re-weights strategies.

Pure functions; :func:`group_advantages` is the GRPO formula, checked against these
identities in ``tests/test_sage_crs.py``.
"""
from __future__ import annotations

import statistics
from collections.abc import Hashable, Sequence

from qrlib.core.errors import QrlibError

READINGS = ("group", "no-centring", "per-strategy")


def group_advantages(rewards: Sequence[float], *, scale: bool = True,
                     eps: float = 1e-4) -> list[float]:
    """GRPO's advantages of one group: reward minus the group mean, divided by the group's
    unbiased standard deviation plus ``eps`` when ``scale`` (TRL's ``GRPOTrainer``:
    ``torch.std`` and 1e-4; ``scale_rewards=False`` skips the division)."""
    r = [float(x) for x in rewards]
    if not r:
        return []
    mean = sum(r) / len(r)
    if not scale:
        return [x - mean for x in r]
    std = statistics.stdev(r) if len(r) > 1 else 0.0  # torch.std is unbiased, as TRL uses it
    return [(x - mean) / (std + eps) for x in r]


def crs_shaped(rewards: Sequence[float], strategies: Sequence[Hashable] | None = None, *,
               reading: str = "group") -> list[float]:
    """CRS-shaped rewards under a reading of its baseline: ``group`` (the group median, the
    paper's Fig. 2 and qrlib's ``sage_crs``), ``no-centring`` (the same shaped values, meant to
    be used as advantages directly) or ``per-strategy`` (each rollout minus the median of
    its strategy's rollouts in the group)."""
    if reading not in READINGS:
        raise QrlibError(f"CRS reading must be one of {', '.join(READINGS)}, got {reading!r}")
    r = [float(x) for x in rewards]
    if reading != "per-strategy":
        b = statistics.median(r) if r else 0.0
        return [x - b for x in r]
    if strategies is None or len(strategies) != len(r):
        raise QrlibError("the per-strategy reading needs one strategy per reward")
    by: dict[Hashable, list[float]] = {}
    for x, s in zip(r, strategies):
        by.setdefault(s, []).append(x)
    med = {s: statistics.median(v) for s, v in by.items()}
    return [x - med[s] for x, s in zip(r, strategies)]


def crs_advantages(rewards: Sequence[float], strategies: Sequence[Hashable] | None = None, *,
                   reading: str = "group", scale: bool = True) -> list[float]:
    """The update weights CRS gives one group under ``reading``: GRPO advantages of the
    shaped rewards, except ``no-centring``, where the shaped rewards are the advantages."""
    shaped = crs_shaped(rewards, strategies, reading=reading)
    return shaped if reading == "no-centring" else group_advantages(shaped, scale=scale)
