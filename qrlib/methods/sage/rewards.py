"""SAGE: Strategic Credit Shaping (Eq. 1), Contrastive Reward Shaping (Eq. 2) and the copy
penalty (Eq. 3, p = 0.05 in Sec. 4.3) on a base reward of nDCG@10.

The copy test compares the model's own query text with the original query (via
:func:`qrlib.rl.rewards.same_query`), also in expansion mode, where the text searched
is ``original + rewrite`` and would never equal the original.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.rl.rewards import Observation, ndcg_at_k, register_reward, same_query


def strategy_ranks(rewards: Sequence[float], strategies: Sequence[int | None]) -> dict:
    """Eq. 1 helper: strategy -> rank of its mean reward within the group (1 = best mean).
    Tied means (within 1e-12) share the better rank (competition ranking: 1, 1, 3).
    Rollouts without a strategy (format failures) form their own group ``None``."""
    groups: dict[Any, list[float]] = {}
    for r, s in zip(rewards, strategies):
        groups.setdefault(s, []).append(float(r))
    means = {s: sum(v) / len(v) for s, v in groups.items()}
    tol = 1e-12  # means equal up to rounding (0.8+0.4)/2 vs 0.6 are ties
    return {s: 1 + sum(1 for m2 in means.values() if m2 > m + tol) for s, m in means.items()}


def sage_scs(rewards: Sequence[float], strategies: Sequence[int | None]) -> list[float]:
    """Eq. 1 (Strategic Credit Shaping): r_i / rank(s_i)."""
    if len(rewards) != len(strategies):
        raise QrlibError("SCS needs one strategy per reward")
    ranks = strategy_ranks(rewards, strategies)
    return [float(r) / ranks[s] for r, s in zip(rewards, strategies)]


def sage_crs(rewards: Sequence[float], baseline: str | float = "median") -> list[float]:
    """Eq. 2 (Contrastive Reward Shaping): r_i - baseline, where the baseline is the group
    median (default, as in the paper's Fig. 2), mean, or a given number."""
    if not len(rewards):
        return []
    if isinstance(baseline, str):
        if baseline == "median":
            b = statistics.median(rewards)
        elif baseline == "mean":
            b = statistics.fmean(rewards)
        else:
            raise QrlibError(f"CRS baseline must be 'median', 'mean' or a number, got {baseline!r}")
    else:
        b = float(baseline)
    return [float(r) - b for r in rewards]


def copy_penalty(reward: float, query: str, original: str, p: float = 0.05,
                 normalise: bool = True) -> float:
    """Eq. 3: subtract ``p`` when the rewrite equals the original query (compared with
    :func:`same_query` unless ``normalise=False``, then character for character)."""
    same = same_query(query, original) if normalise else query == original
    return reward - p if same else reward


# --------------------------------------------------------------------------- registered
def _sage_base(group: Sequence[Observation], k: int, format_penalty: float) -> list[float]:
    return [ndcg_at_k(o.ranked, o.qrels, k) if o.format_ok else format_penalty
            for o in group]


def _sage_finish(group: Sequence[Observation], base: list[float], shaped: list[float],
                 p: float) -> list[dict]:
    out = []
    for o, b, s in zip(group, base, shaped):
        own = " ".join(o.generated)
        copied = bool(o.generated) and same_query(own, o.original_query)
        final = s - p if copied else s
        out.append({"reward": final, "ndcg": b, "shaped": s, "copy": float(copied),
                    "format": float(o.format_ok)})
    return out


@register_reward("sage_direct", level="group", source="SAGE Sec. 2.1 + Eq. 3")
def _r_sage_direct(group: list[Observation], *, k: int = 10, p: float = 0.05,
                   format_penalty: float = 0.0) -> list[dict]:
    """nDCG@k with SAGE's copy penalty p (Eq. 3)."""
    base = _sage_base(group, k, format_penalty)
    return _sage_finish(group, base, list(base), p)


@register_reward("sage_scs", level="group", source="SAGE Eq. 1 + Eq. 3")
def _r_sage_scs(group: list[Observation], *, k: int = 10, p: float = 0.05,
                format_penalty: float = 0.0) -> list[dict]:
    """Strategic Credit Shaping: nDCG@k divided by the rank of its strategy's group mean."""
    base = _sage_base(group, k, format_penalty)
    return _sage_finish(group, base, sage_scs(base, [o.strategy for o in group]), p)


@register_reward("sage_crs", level="group", source="SAGE Eq. 2 + Eq. 3")
def _r_sage_crs(group: list[Observation], *, k: int = 10, p: float = 0.05,
                baseline: str = "median", format_penalty: float = 0.0) -> list[dict]:
    """Contrastive Reward Shaping: nDCG@k minus the group baseline (median by default)."""
    base = _sage_base(group, k, format_penalty)
    return _sage_finish(group, base, sage_crs(base, baseline), p)
