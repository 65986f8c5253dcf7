"""ACQO: Phi (Eq. 3), the eta-decayed sum with a format gate (Eq. 4-5), Stage I's best
subset (Eq. 6), the curriculum (Eq. 7-8), Stage II's top-k* bonus (Eq. 9-10); and
ConvSearch-R1's released rank reward, the RIRS that Eq. 3 builds on.

Hyper-parameters (App. A): eta = 0.6 (HotpotQA) or 1.0 (TopiOCQA), k* = 0 (HotpotQA) or 3
(TopiOCQA), tau_thres = 5/3, K = 8 rollouts. Readings the paper leaves open, with our
defaults:

* **Eq. 4's first index.** s(r_i) = eta^i Phi(r_i) for the n retrieved gold documents,
  "i = 1..n" read literally: the best gold document already gets eta^1
  (``first_index=1``, default). With ``first_index=0`` it gets eta^0 = 1, so a single
  gold document at rank r earns exactly Phi(r), ConvSearch-R1's reward. With eta = 0.6 a
  gold document at rank 1 earns 1.2 under the first reading and 2.0 under the second;
  with eta = 1 (TopiOCQA) both readings agree.
* **delta** (Eq. 5) is only said to be negative. Ours: -1, below every reward a
  well-formed rollout can earn (>= 0), so a broken format is always worst. ConvSearch-R1
  uses -0.1 (see :func:`_r_convsearch`).
* **lambda** (Eq. 10) is not given. Ours: 1.

ConvSearch-R1's released reward (``convsearch_rirs``, github.com/BeastyZ/ConvSearch-R1,
commit e7854c8): ``verl/verl/utils/reward_score/rewrite_r1.py`` maps one rank with
``cal_reward`` (= Phi above) and ``src/retrieval/server.py`` (``_get_gold_rank``) sends
only the best rank of any gold document in the top 100 (-1, reward 0, when none is
there); ``format_reward`` is 0 for a well-formed output and -0.1 otherwise, and a
non-zero format reward replaces the rank reward.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from qrlib.core.errors import QrlibError
from qrlib.retrieval import fusion as _fusion
from qrlib.rl.rewards import Observation, Ranked, gold_ranks, register_reward

#: float sums of M reciprocal ranks closer than this are compared exactly
_TIE_TOL = 1e-9


def phi(r: float) -> float:
    """Eq. 3 (RIRS of ConvSearch-R1): linear from (1, 2) to (10, 1), then from (10, 1) to
    (100, 0), 0 beyond 100. Continuous at r = 10 (Phi = 1)."""
    if r < 1:
        raise QrlibError(f"ranks are 1-based, got {r}")
    if r <= 10:
        return 2.0 - (r - 1) / 9.0
    if r <= 100:
        return 1.0 - (r - 10) / 90.0
    return 0.0


def phi_prime(r: float, lam: float = 1.0, k_star: int = 0) -> float:
    """Eq. 10: Phi(r) + lambda * 1[r <= k*] / log2(r + 1)."""
    bonus = lam / math.log2(r + 1) if r <= k_star else 0.0
    return phi(r) + bonus


def acqo_score(ranks: Sequence[int], format_ok: bool = True, *, eta: float = 0.6,
               delta: float = -1.0, lam: float = 0.0, k_star: int = 0,
               gate: bool = True, first_index: int = 1) -> float:
    """Eq. 4-5: S = sum_i eta^i Phi(r_i) if the format holds, else delta.

    ``ranks`` are the ranks of the n retrieved gold documents, sorted ascending and
    indexed from ``first_index`` (1: the paper's i = 1..n; 0: the best gold document
    undecayed, see the module docstring). With ``lam`` and ``k_star`` Phi becomes Phi'
    (Eq. 10, Stage II). ``gate=False`` adds delta to the retrieval sum instead of
    replacing it (for lenient parsing of weak models).
    """
    if delta >= 0:
        raise QrlibError(f"ACQO's format penalty delta must be negative (Eq. 5), got {delta}")
    if first_index not in (0, 1):
        raise QrlibError(f"first_index of Eq. 4 must be 0 or 1, got {first_index}")
    total = 0.0
    for i, r in enumerate(sorted(ranks), start=first_index):
        total += eta ** i * (phi_prime(r, lam, k_star) if (lam and k_star) else phi(r))
    if format_ok:
        return total
    return delta if gate else total + delta


class _RSFTable:
    """The M lists of one rollout as arrays, to get the RSF ranks of the gold documents
    for every subset of the lists without building and sorting fused lists. Same order
    as :func:`qrlib.retrieval.fusion.rsf` (P ascending compared exactly, S descending, doc id;
    repeated documents count at their first rank): a gold document's rank is 1 + the
    documents whose float sum of 1/r is clearly larger, plus those within the tie
    tolerance that win the exact comparison (integer sums, then S, then doc id)."""

    def __init__(self, lists: Sequence[Ranked], qrels: Mapping[str, int]) -> None:
        m = len(lists)
        index: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        ranks: list[int] = []
        scores: list[float] = []
        for j, lst in enumerate(lists):
            for r, d, v in _fusion.unique_ranked(lst):  # a repeated document counts once
                rows.append(index.setdefault(d, len(index)))
                cols.append(j)
                ranks.append(r)
                scores.append(float(v))
        n = len(index)
        self.docs = list(index)
        self.rank = np.zeros((n, m), dtype=np.int64)
        self.rank[rows, cols] = ranks
        self.inv = np.zeros((n, m))
        self.inv[rows, cols] = 1.0 / np.asarray(ranks, dtype=float)
        self.score = np.full((n, m), -np.inf)
        self.score[rows, cols] = scores
        self.gold = np.array(sorted(index[d] for d, g in qrels.items() if g >= 1 and d in index),
                             dtype=np.int64)
        self.table = _fusion.inverse_rank_table(max(ranks, default=1))[1]

    def _exact(self, d: int, cols: Sequence[int]) -> int:
        return sum(self.table[int(self.rank[d, c])] for c in cols)

    def subset_gold_ranks(self, subsets: Sequence[Sequence[int]],
                          k: int | None) -> list[list[int]]:
        """For each subset of list indices: the ascending RSF ranks (<= k) of the gold
        documents in the fusion of those lists."""
        out: list[list[int]] = [[] for _ in subsets]
        if not len(self.gold) or not len(subsets):
            return out
        mask = np.zeros((self.inv.shape[1], len(subsets)))
        for j, idx in enumerate(subsets):
            mask[list(idx), j] = 1.0
        inv = self.inv @ mask                                   # (docs, subsets), floats
        present = inv > 0
        for g in self.gold:
            ig = inv[g]
            above = np.count_nonzero(inv > ig + _TIE_TOL, axis=0)
            near = present & (np.abs(inv - ig) <= _TIE_TOL)
            near[g] = False
            for j, idx in enumerate(subsets):
                if not present[g, j]:
                    continue
                r = int(above[j]) + 1
                close = np.flatnonzero(near[:, j])
                if len(close):                                  # resolve in exact integers
                    cols = list(idx)
                    eg = self._exact(g, cols)
                    sg = self.score[g, cols].max()
                    for d in close:
                        ed = self._exact(d, cols)
                        if ed != eg:
                            r += ed > eg
                            continue
                        sd = self.score[d, cols].max()
                        r += sd > sg or (sd == sg and self.docs[d] < self.docs[g])
                if k is None or r <= k:
                    out[j].append(r)
        return [sorted(o) for o in out]

    def gold_ranks(self, idx: Sequence[int], k: int | None) -> list[int]:
        return self.subset_gold_ranks([tuple(idx)], k)[0]


def acqo_stage1(sub_lists: Sequence[Ranked], qrels: Mapping[str, int],
                format_ok: bool = True, *, k: int = 100, eta: float = 0.6,
                delta: float = -1.0, fusion: str = "rsf", gate: bool = True,
                first_index: int = 1) -> float:
    """Eq. 6: max over non-empty subsets Q' of the sub-queries of S(R_k(Q')), with R_k
    the top k of the RSF fusion (Eq. 2) of the subset's lists.

    With ``fusion="rsf"`` the gold ranks of all 2^M - 1 subsets come from one array table
    (no fused list is built); other fusions build each subset's list."""
    if not format_ok and gate:
        return delta
    if not sub_lists:
        return acqo_score([], format_ok, eta=eta, delta=delta, gate=gate,
                          first_index=first_index)
    n = len(sub_lists)
    subsets = [idx for size in range(1, n + 1) for idx in combinations(range(n), size)]
    if fusion == "rsf" and n > 1:
        all_ranks = _RSFTable(sub_lists, qrels).subset_gold_ranks(subsets, k)
    else:
        all_ranks = [gold_ranks(_fusion.fuse([sub_lists[i] for i in idx], fusion, top=k),
                                qrels) for idx in subsets]
    return max(acqo_score(ranks, format_ok, eta=eta, delta=delta, gate=gate,
                          first_index=first_index) for ranks in all_ranks)


def acqo_stage2(sub_lists: Sequence[Ranked], qrels: Mapping[str, int],
                format_ok: bool = True, *, k: int = 100, eta: float = 0.6,
                delta: float = -1.0, lam: float = 1.0, k_star: int = 0,
                fusion: str = "rsf", gate: bool = True, first_index: int = 1) -> float:
    """Eq. 9-10: S(R_k(Q)) over the fusion of *all* sub-queries, with Phi'."""
    if not format_ok and gate:
        return delta
    fused = _fusion.fuse(list(sub_lists), fusion, top=k) if sub_lists else []
    ranks = gold_ranks(fused, qrels)
    return acqo_score(ranks, format_ok, eta=eta, delta=delta, lam=lam, k_star=k_star,
                      gate=gate, first_index=first_index)


def acqo_tau(stage1_rewards: Sequence[float]) -> float:
    """Eq. 7: tau(q) = mean of the K rollouts' Stage I rewards."""
    if not len(stage1_rewards):
        raise QrlibError("tau(q) needs at least one rollout reward")
    return float(sum(stage1_rewards) / len(stage1_rewards))


def acqo_curriculum(tau_by_qid: Mapping[str, float], tau_thres: float = 5 / 3) -> list[str]:
    """Eq. 8: the queries kept for Stage II, those with tau(q) <= tau_thres."""
    return [q for q, t in tau_by_qid.items() if t <= tau_thres]


# --------------------------------------------------------------------------- registered
def _subs(o: Observation) -> list:
    return o.sub_ranked or ([o.ranked] if o.ranked else [])


@register_reward("acqo_stage1", source="ACQO Eq. 3-6")
def _r_acqo1(o: Observation, *, k: int = 100, eta: float = 0.6, delta: float = -1.0,
             fusion: str = "rsf", gate: bool = True, first_index: int = 1) -> dict:
    """Stage I: best S(R_k) over non-empty subsets of the sub-queries (RSF fusion)."""
    subs = _subs(o)
    v = acqo_stage1(subs, o.qrels, o.format_ok, k=k, eta=eta, delta=delta, fusion=fusion,
                    gate=gate, first_index=first_index)
    return {"reward": v, "n_sub": float(len(subs)), "format": float(o.format_ok)}


@register_reward("acqo_stage2", source="ACQO Eq. 3-5, 9-10")
def _r_acqo2(o: Observation, *, k: int = 100, eta: float = 0.6, delta: float = -1.0,
             lam: float = 1.0, k_star: int = 0, fusion: str = "rsf",
             gate: bool = True, first_index: int = 1) -> dict:
    """Stage II: S(R_k) of the fusion of all sub-queries with the top-k* bonus Phi'."""
    subs = _subs(o)
    v = acqo_stage2(subs, o.qrels, o.format_ok, k=k, eta=eta, delta=delta, lam=lam,
                    k_star=k_star, fusion=fusion, gate=gate, first_index=first_index)
    return {"reward": v, "n_sub": float(len(subs)), "format": float(o.format_ok)}


@register_reward("convsearch_rirs",
                 source="ConvSearch-R1 released code (BeastyZ/ConvSearch-R1, commit e7854c8: "
                        "verl/verl/utils/reward_score/rewrite_r1.py, src/retrieval/server.py)",
                 presets={"released": {}})
def _r_convsearch(o: Observation, *, k: int = 100, format_penalty: float = -0.1) -> dict:
    """Rank-incentive reward: Phi of the best gold rank in the top k (0 if none), or
    ``format_penalty`` (-0.1) for a broken format."""
    ranks = gold_ranks(o.ranked, o.qrels, k)
    best = ranks[:1]
    v = (acqo_score(best, eta=1.0, first_index=0) if o.format_ok else float(format_penalty))
    return {"reward": v, "best_rank": float(best[0] if best else 0),
            "format": float(o.format_ok)}
