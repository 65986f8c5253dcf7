"""RL-QR: r = lambda1 * NDCG (Eq. 5; NDCG@3, Sec. 4.2) + lambda2 * r_penalty (Eq. 6),
the format/redundancy penalty normalised within the group to [theta, 1] for its
non-zero values (Sec. 3.2). lambda1, lambda2 and theta are not given; ours: 1, 0.5, 0.1.

Reading left open: *how* the non-zero penalties are brought into [theta, 1]. Two
readings, selected with ``norm``:

* ``"minmax"`` (default): the smallest non-zero penalty of the group maps to theta, the
  largest to 1, linearly between (all equal: 1). Raw penalties 10, 20, 30 become 0.1,
  0.55, 1: even a rollout with little extra text is pushed down to theta.
* ``"max"``: divide by the group's largest penalty and floor at theta, so the ratio of
  two penalties survives. 10, 20, 30 become 0.333, 0.667, 1; 1 and 30 become 0.1, 1.

Both leave zero penalties at 0 and give the worst rollout of the group -1 * lambda2.
"""
from __future__ import annotations

from collections.abc import Sequence

from qrlib.core.errors import QrlibError
from qrlib.rl.rewards import Observation, ndcg_at_k, register_reward

NORMS = ("minmax", "max")


def rlqr_group_penalty(raw: Sequence[float], theta: float = 0.1,
                       norm: str = "minmax") -> list[float]:
    """Sec. 3.2: group-wise normalisation of the raw penalties. Zeros stay 0; the
    non-zero values are brought into [theta, 1] (``norm``, see the module docstring).
    Returned as negative numbers (a penalty)."""
    if not 0 <= theta <= 1:
        raise QrlibError(f"theta must be in [0, 1], got {theta}")
    if norm not in NORMS:
        raise QrlibError(f"RL-QR penalty norm must be one of {list(NORMS)}, got {norm!r}")
    nz = [float(x) for x in raw if x != 0]
    if not nz:
        return [0.0 for _ in raw]
    lo, hi = min(nz), max(nz)
    out = []
    for x in raw:
        if x == 0:
            out.append(0.0)
        elif norm == "max":
            out.append(-max(theta, float(x) / hi))
        elif hi == lo:
            out.append(-1.0)
        else:
            out.append(-(theta + (1 - theta) * (float(x) - lo) / (hi - lo)))
    return out


def rlqr_rewards(retrieval: Sequence[float], raw_penalty: Sequence[float], *,
                 lambda1: float = 1.0, lambda2: float = 0.5, theta: float = 0.1,
                 norm: str = "minmax") -> list[float]:
    """Eq. 6: lambda1 * r_retrieval + lambda2 * r_penalty (group-normalised)."""
    pen = rlqr_group_penalty(raw_penalty, theta, norm)
    return [lambda1 * float(r) + lambda2 * p for r, p in zip(retrieval, pen)]


def rlqr_raw_penalty(o: Observation, require_tags: bool = True) -> float:
    """Raw penalty of one rollout: non-space characters outside ``<answer>``; with no
    answer block (format miss) every character counts (at least 1)."""
    if o.tagged:
        return float(o.n_outside)
    return float(max(1, o.n_chars)) if require_tags else 0.0


@register_reward("rlqr", level="group", source="RL-QR Eq. 5-6")
def _r_rlqr(group: list[Observation], *, k: int = 3, lambda1: float = 1.0,
            lambda2: float = 0.5, theta: float = 0.1, require_tags: bool = True,
            norm: str = "minmax") -> list[dict]:
    """lambda1 nDCG@k + lambda2 * group-normalised format/redundancy penalty."""
    ret = [ndcg_at_k(o.ranked, o.qrels, k) for o in group]
    raw = [rlqr_raw_penalty(o, require_tags) for o in group]
    pen = rlqr_group_penalty(raw, theta, norm)
    return [{"reward": lambda1 * r + lambda2 * p, "ndcg": r, "penalty": p, "raw_penalty": w}
            for r, p, w in zip(ret, pen, raw)]
