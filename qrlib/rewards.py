"""Reward functions of the four papers, as pure functions plus a registry.

Pure maths (no disk, no models): every function takes ranked lists, gold labels and
format flags and returns numbers. The registry (in the spirit of ir-measures: one named
object per reward, typed parameters with defaults, the paper it comes from) lets a params
file say ``reward: acqo_stage2`` with ``reward_params: {eta: 0.6}`` and lets a notebook
list every reward with :func:`list_rewards`. :class:`qrlib.env.RewardEnv` is the one place
that feeds completions through these.

Conventions: ranks are 1-based; a ranked list is ``[(doc_id, score), ...]`` best first;
qrels are ``{doc_id: grade}`` with grade > 0 relevant.

Sources
-------
DeepRetrieval (Jiang et al.): Sec. 2.2.1 r = r_retrieval + r_format; Table 8 (App. F)
retrieval rewards: recall tiers, answer-rank tiers, NDCG, SQL execution accuracy (+0.3 for
executable SQL on BIRD, App. F). Format reward values are not given in the paper; the
defaults here (bonus 0, penalty below the lowest tier) are ours.

ACQO: Eq. 3 Phi(r), Eq. 4 eta^i decay, Eq. 5 format gate delta<0, Eq. 6 Stage I max over
non-empty subsets of sub-queries, Eq. 7-8 tau(q) curriculum, Eq. 9-10 Stage II with
lambda / log2(r+1) bonus for r <= k*. Hyper-parameters (App. A): eta=0.6 (HotpotQA) or
1.0 (TopiOCQA), k*=0 (HotpotQA) or 3 (TopiOCQA), tau_thres=5/3, K=8 rollouts. lambda and
delta values are not given; defaults lambda=1, delta=-1 are ours.

SAGE: Eq. 1 SCS r/rank(strategy), Eq. 2 CRS r - baseline (median in Fig. 2), Eq. 3 copy
penalty p (p=0.05, Sec. 4.3); base reward NDCG@10.

RL-QR: Eq. 5 r_retrieval = NDCG (NDCG@3 in Sec. 4.2), Eq. 6 lambda1 r_retrieval +
lambda2 r_penalty with the penalty normalised group-wise into [theta, 1] for non-zero
values (Sec. 3.2). lambda1, lambda2, theta are not given; defaults are ours.
"""
from __future__ import annotations

import inspect
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from qrlib import fusion as _fusion
from qrlib.errors import QrlibError

Ranked = Sequence[tuple[str, float]]

# DeepRetrieval Table 8 (App. F): (threshold, reward), checked in order
RECALL_TIERS: tuple[tuple[float, float], ...] = (
    (0.7, 5.0), (0.5, 4.0), (0.4, 3.0), (0.3, 1.0), (0.1, 0.5), (0.05, 0.1))
RECALL_FLOOR = -3.5
ANSWER_RANK_TIERS: tuple[tuple[int, float], ...] = (
    (5, 5.0), (20, 4.0), (50, 2.0), (100, 1.0), (1000, 0.5), (3000, 0.1))
ANSWER_RANK_FLOOR = -3.5


# =========================================================================== ranking basics
def gold_ranks(ranked: Ranked, qrels: Mapping[str, int], k: int | None = None,
               min_rel: int = 1) -> list[int]:
    """1-based ranks (ascending) of relevant documents within the top ``k`` of ``ranked``."""
    lst = ranked if k is None else ranked[:k]
    return [i for i, (d, _) in enumerate(lst, start=1) if qrels.get(d, 0) >= min_rel]


def recall_at(ranked: Ranked, qrels: Mapping[str, int], k: int | None = None,
              min_rel: int = 1) -> float:
    """Fraction of relevant documents found in the top ``k`` (0 when none are judged)."""
    n_rel = sum(1 for g in qrels.values() if g >= min_rel)
    if n_rel == 0:
        return 0.0
    return len(gold_ranks(ranked, qrels, k, min_rel)) / n_rel


def ndcg_at_k(ranked: Ranked, qrels: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains and log2(i+1) discount, as trec_eval / ir-measures
    ``nDCG@k`` compute it (cross-checked in tests). Judged grades <= 0 count as 0.

    A hand-written copy on purpose: it runs per rollout inside the reward loop, where a
    call into ir-measures per completion costs far more than the arithmetic.
    """
    if k <= 0:
        raise QrlibError(f"nDCG cut-off k must be positive, got {k}")
    dcg = 0.0
    for i, (d, _) in enumerate(ranked[:k], start=1):
        g = qrels.get(d, 0)
        if g > 0:
            dcg += g / math.log2(i + 1)
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


# =========================================================================== DeepRetrieval
def recall_tier_reward(recall: float) -> float:
    """DeepRetrieval Table 8, literature search: 5/4/3/1/0.5/0.1 for recall >=
    0.7/0.5/0.4/0.3/0.1/0.05, else -3.5."""
    for thr, val in RECALL_TIERS:
        if recall >= thr:
            return val
    return RECALL_FLOOR


def answer_rank_tier_reward(rank: int | None) -> float:
    """DeepRetrieval Table 8, evidence seeking: rank of the first hit <= 5/20/50/100/1000/
    3000 gives 5/4/2/1/0.5/0.1; no hit (None) or a later one gives -3.5."""
    if rank is not None:
        for thr, val in ANSWER_RANK_TIERS:
            if rank <= thr:
                return val
    return ANSWER_RANK_FLOOR


def deepretrieval_total(retrieval: float, format_ok: bool, *, format_bonus: float = 0.0,
                        format_penalty: float = -4.0, gate: bool = True) -> float:
    """DeepRetrieval Sec. 2.2.1: r = r_retrieval + r_format. With ``gate`` (default) a
    format failure earns only ``format_penalty`` (no retrieval credit)."""
    if format_ok:
        return retrieval + format_bonus
    return format_penalty if gate else retrieval + format_penalty


def sql_execution_match(pred_rows: Sequence[Sequence[Any]] | None,
                        gold_rows: Sequence[Sequence[Any]] | None,
                        ordered: bool = False) -> bool:
    """Execution accuracy (DeepRetrieval Table 8, database search): the predicted query's
    result equals the gold result, as a multiset of rows (a list when ``ordered``).
    Failed executions (None) never match."""
    if pred_rows is None or gold_rows is None:
        return False
    p = [tuple(r) for r in pred_rows]
    g = [tuple(r) for r in gold_rows]
    if ordered:
        return p == g
    key = repr  # rows may mix types; compare by a total order on their repr
    return sorted(p, key=key) == sorted(g, key=key)


# =========================================================================== ACQO
def phi(r: float) -> float:
    """ACQO Eq. 3 (RIRS of ConvSearch-R1): linear from (1, 2) to (10, 1), then from
    (10, 1) to (100, 0), 0 beyond 100. Continuous at r=10 (Phi=1)."""
    if r < 1:
        raise QrlibError(f"ranks are 1-based, got {r}")
    if r <= 10:
        return 2.0 - (r - 1) / 9.0
    if r <= 100:
        return 1.0 - (r - 10) / 90.0
    return 0.0


def phi_prime(r: float, lam: float = 1.0, k_star: int = 0) -> float:
    """ACQO Eq. 10: Phi(r) + lambda * 1[r <= k*] / log2(r + 1)."""
    bonus = lam / math.log2(r + 1) if r <= k_star else 0.0
    return phi(r) + bonus


def acqo_score(ranks: Sequence[int], format_ok: bool = True, *, eta: float = 0.6,
               delta: float = -1.0, lam: float = 0.0, k_star: int = 0,
               gate: bool = True) -> float:
    """ACQO Eq. 4-5: S = sum_i eta^i Phi(r_i) if the format holds, else delta.

    ``ranks`` are the ranks of the n retrieved gold documents, sorted ascending and
    indexed i = 1..n (the first gold document already gets eta^1). With ``lam`` and
    ``k_star`` Phi is replaced by Phi' (Eq. 10, Stage II). ``gate=False`` adds delta to
    the retrieval sum instead of replacing it (for lenient parsing of weak models).
    """
    if delta >= 0:
        raise QrlibError(f"ACQO's format penalty delta must be negative (Eq. 5), got {delta}")
    total = 0.0
    for i, r in enumerate(sorted(ranks), start=1):
        total += eta ** i * (phi_prime(r, lam, k_star) if (lam and k_star) else phi(r))
    if format_ok:
        return total
    return delta if gate else total + delta


class _RSFTable:
    """The M lists of one rollout as arrays, to get RSF ranks of the gold documents for any
    subset of the lists without building and sorting the fused list (same order as
    :func:`qrlib.fusion.rsf`: P ascending, S descending, doc id)."""

    def __init__(self, lists: Sequence[Ranked], qrels: Mapping[str, int]) -> None:
        inv_d: list[dict[str, float]] = []
        sc_d: list[dict[str, float]] = []
        for lst in lists:
            iv: dict[str, float] = {}
            sc: dict[str, float] = {}
            for r, (d, v) in enumerate(lst, start=1):
                iv[d] = iv.get(d, 0.0) + 1.0 / r    # as fusion.rsf_keys (duplicates add)
                v = float(v)
                if d not in sc or v > sc[d]:
                    sc[d] = v
            inv_d.append(iv)
            sc_d.append(sc)
        docs = list(dict.fromkeys(d for lst in lists for d, _ in lst))
        pos = {d: i for i, d in enumerate(docs)}
        self.inv = np.array([[iv.get(d, 0.0) for iv in inv_d] for d in docs]).reshape(
            len(docs), len(lists))
        self.score = np.array([[sc.get(d, -np.inf) for sc in sc_d] for d in docs]).reshape(
            len(docs), len(lists))
        order = sorted(range(len(docs)), key=docs.__getitem__)
        self.id_rank = np.empty(len(docs), dtype=np.int64)
        self.id_rank[order] = np.arange(len(docs))
        self.gold = np.array([pos[d] for d in docs if qrels.get(d, 0) >= 1], dtype=np.int64)

    def gold_ranks(self, idx: Sequence[int], k: int | None) -> list[int]:
        if not len(self.gold):
            return []
        cols = list(idx)
        inv = self.inv[:, cols[0]].copy()
        for c in cols[1:]:                          # same summation order as fusion.rsf_keys
            inv += self.inv[:, c]
        present = inv > 0
        with np.errstate(divide="ignore"):
            p = np.where(present, 1.0 / np.where(present, inv, 1.0), np.inf)
        s = self.score[:, cols].max(axis=1)
        out = []
        for g in self.gold:
            if not present[g]:
                continue
            better = (p < p[g]) | ((p == p[g]) & ((s > s[g]) |
                                                  ((s == s[g]) & (self.id_rank < self.id_rank[g]))))
            r = int(np.count_nonzero(better & present)) + 1
            if k is None or r <= k:
                out.append(r)
        return sorted(out)


def acqo_stage1(sub_lists: Sequence[Ranked], qrels: Mapping[str, int],
                format_ok: bool = True, *, k: int = 100, eta: float = 0.6,
                delta: float = -1.0, fusion: str = "rsf", gate: bool = True) -> float:
    """ACQO Eq. 6: max over non-empty subsets Q' of the sub-queries of S(R_k(Q')), with
    R_k the top-k of the RSF fusion (Eq. 2) of the subset's lists.

    With ``fusion="rsf"`` the gold ranks of all 2^M - 1 subsets come from one array table
    (no fused list is built); other fusions build each subset's list."""
    if not format_ok and gate:
        return delta
    if not sub_lists:
        return acqo_score([], format_ok, eta=eta, delta=delta, gate=gate)
    best = -math.inf
    n = len(sub_lists)
    table = _RSFTable(sub_lists, qrels) if fusion == "rsf" and n > 1 else None
    for size in range(1, n + 1):
        for idx in combinations(range(n), size):
            if table is not None:
                ranks = table.gold_ranks(idx, k)
            else:
                ranks = gold_ranks(_fusion.fuse([sub_lists[i] for i in idx], fusion, top=k),
                                   qrels)
            s = acqo_score(ranks, format_ok, eta=eta, delta=delta, gate=gate)
            best = max(best, s)
    return best


def acqo_stage2(sub_lists: Sequence[Ranked], qrels: Mapping[str, int],
                format_ok: bool = True, *, k: int = 100, eta: float = 0.6,
                delta: float = -1.0, lam: float = 1.0, k_star: int = 0,
                fusion: str = "rsf", gate: bool = True) -> float:
    """ACQO Eq. 9-10: S(R_k(Q)) over the fusion of *all* sub-queries, with Phi'."""
    if not format_ok and gate:
        return delta
    fused = _fusion.fuse(list(sub_lists), fusion, top=k) if sub_lists else []
    ranks = gold_ranks(fused, qrels)
    return acqo_score(ranks, format_ok, eta=eta, delta=delta, lam=lam, k_star=k_star,
                      gate=gate)


def acqo_tau(stage1_rewards: Sequence[float]) -> float:
    """ACQO Eq. 7: tau(q) = mean of the K rollouts' Stage I rewards."""
    if not len(stage1_rewards):
        raise QrlibError("tau(q) needs at least one rollout reward")
    return float(sum(stage1_rewards) / len(stage1_rewards))


def acqo_curriculum(tau_by_qid: Mapping[str, float], tau_thres: float = 5 / 3) -> list[str]:
    """ACQO Eq. 8: the queries kept for Stage II, those with tau(q) <= tau_thres."""
    return [q for q, t in tau_by_qid.items() if t <= tau_thres]


# =========================================================================== SAGE
def strategy_ranks(rewards: Sequence[float], strategies: Sequence[int | None]) -> dict:
    """SAGE Eq. 1 helper: strategy -> rank of its mean reward within the group (1 = best
    mean). Tied means (within 1e-12) share the better rank (competition ranking: 1, 1, 3). Rollouts
    without a strategy (format failures) form their own group ``None``."""
    groups: dict[Any, list[float]] = {}
    for r, s in zip(rewards, strategies):
        groups.setdefault(s, []).append(float(r))
    means = {s: sum(v) / len(v) for s, v in groups.items()}
    tol = 1e-12  # means equal up to rounding (0.8+0.4)/2 vs 0.6 are ties
    return {s: 1 + sum(1 for m2 in means.values() if m2 > m + tol) for s, m in means.items()}


def sage_scs(rewards: Sequence[float], strategies: Sequence[int | None]) -> list[float]:
    """SAGE Eq. 1 (Strategic Credit Shaping): r_i / rank(s_i)."""
    if len(rewards) != len(strategies):
        raise QrlibError("SCS needs one strategy per reward")
    ranks = strategy_ranks(rewards, strategies)
    return [float(r) / ranks[s] for r, s in zip(rewards, strategies)]


def sage_crs(rewards: Sequence[float], baseline: str | float = "median") -> list[float]:
    """SAGE Eq. 2 (Contrastive Reward Shaping): r_i - baseline, where the baseline is the
    group median (default, as in the paper's Fig. 2), mean, or a given number."""
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


def normalise_query(q: str) -> str:
    return " ".join(q.casefold().split())


def copy_penalty(reward: float, query: str, original: str, p: float = 0.05,
                 normalise: bool = True) -> float:
    """SAGE Eq. 3: subtract ``p`` when the rewrite equals the original query (compared
    after case-folding and whitespace collapsing unless ``normalise=False``)."""
    same = (normalise_query(query) == normalise_query(original)) if normalise \
        else query == original
    return reward - p if same else reward


# =========================================================================== RL-QR
def rlqr_group_penalty(raw: Sequence[float], theta: float = 0.1) -> list[float]:
    """RL-QR Sec. 3.2: group-wise normalisation of the raw penalties. Zeros stay 0; the
    non-zero values are min-max mapped into [theta, 1] (all equal -> 1). Returned as
    negative numbers (a penalty)."""
    if not 0 <= theta <= 1:
        raise QrlibError(f"theta must be in [0, 1], got {theta}")
    nz = [float(x) for x in raw if x != 0]
    if not nz:
        return [0.0 for _ in raw]
    lo, hi = min(nz), max(nz)
    out = []
    for x in raw:
        if x == 0:
            out.append(0.0)
        elif hi == lo:
            out.append(-1.0)
        else:
            out.append(-(theta + (1 - theta) * (float(x) - lo) / (hi - lo)))
    return out


def rlqr_rewards(retrieval: Sequence[float], raw_penalty: Sequence[float], *,
                 lambda1: float = 1.0, lambda2: float = 0.5, theta: float = 0.1) -> list[float]:
    """RL-QR Eq. 6: lambda1 * r_retrieval + lambda2 * r_penalty (group-normalised)."""
    pen = rlqr_group_penalty(raw_penalty, theta)
    return [lambda1 * float(r) + lambda2 * p for r, p in zip(retrieval, pen)]


# =========================================================================== registry
@dataclass
class Observation:
    """Everything a reward may read about one rollout (filled by :class:`RewardEnv`).

    ranked: final ranked list (fused when there were several sub-queries);
    sub_ranked: one list per sub-query; queries: the queries sent to the retriever;
    original_query: the dataset query; format_ok: the format held; tagged: an
    ``<answer>`` block was present; n_outside / n_chars: non-space characters outside the
    answer block / in the completion; extras: anything else (e.g. SQL result rows).
    """

    qid: str
    ranked: list[tuple[str, float]]
    qrels: Mapping[str, int]
    format_ok: bool = True
    sub_ranked: list[list[tuple[str, float]]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    original_query: str = ""
    strategy: int | None = None
    tagged: bool = False
    n_outside: int = 0
    n_chars: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RewardSpec:
    name: str
    fn: Callable[..., Any]
    level: str              # "rollout": fn(obs, **p) -> dict; "group": fn(list[obs], **p) -> list[dict]
    defaults: dict[str, Any]
    source: str
    doc: str
    needs_retrieval: bool = True


REWARDS: dict[str, RewardSpec] = {}


def register_reward(name: str, *, level: str = "rollout", source: str = "",
                    needs_retrieval: bool = True) -> Callable:
    """Decorator: register ``fn`` under ``name``; keyword-only args with defaults are its
    parameters."""
    if level not in ("rollout", "group"):
        raise QrlibError(f"reward level must be 'rollout' or 'group', got {level!r}")

    def deco(fn: Callable) -> Callable:
        if name in REWARDS:
            raise QrlibError(f"reward {name!r} is registered twice")
        sig = inspect.signature(fn)
        defaults = {p.name: p.default for p in sig.parameters.values()
                    if p.kind is p.KEYWORD_ONLY}
        doc = inspect.getdoc(fn) or ""
        REWARDS[name] = RewardSpec(name, fn, level, defaults, source,
                                   doc.splitlines()[0] if doc else "", needs_retrieval)
        return fn
    return deco


@dataclass
class Reward:
    """A registered reward bound to its parameters. ``score(group)`` -> one dict per
    rollout with the key ``reward`` and the reward's parts."""

    spec: RewardSpec
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def level(self) -> str:
        return self.spec.level

    def score(self, group: Sequence[Observation]) -> list[dict[str, float]]:
        if self.spec.level == "group":
            out = self.spec.fn(list(group), **self.params)
        else:
            out = [self.spec.fn(o, **self.params) for o in group]
        return [{k: float(v) for k, v in d.items()} for d in out]


def make_reward(name: str, **params: Any) -> Reward:
    """Look up reward ``name`` and bind ``params`` (unknown names are errors)."""
    if name not in REWARDS:
        raise QrlibError(f"unknown reward {name!r}; accepted: {sorted(REWARDS)}")
    spec = REWARDS[name]
    bad = sorted(set(params) - set(spec.defaults))
    if bad:
        raise QrlibError(f"reward {name!r} has no parameter(s) {bad}; "
                         f"accepted: {sorted(spec.defaults)}")
    return Reward(spec, {**spec.defaults, **params})


def list_rewards() -> list[dict[str, Any]]:
    """One row per registered reward: name, level, parameters, source, summary."""
    return [{"name": s.name, "level": s.level, "params": dict(s.defaults),
             "source": s.source, "summary": s.doc} for s in REWARDS.values()]


# --------------------------------------------------------------------------- registered
@register_reward("ndcg", source="nDCG@k (Jarvelin & Kekalainen 2002)")
def _r_ndcg(o: Observation, *, k: int = 10) -> dict:
    """Plain nDCG@k of the final list (0 for an unusable completion)."""
    v = ndcg_at_k(o.ranked, o.qrels, k)
    return {"reward": v, "ndcg": v}


@register_reward("deepretrieval_recall", source="DeepRetrieval Table 8 (literature search)")
def _r_dr_recall(o: Observation, *, k: int = 100, format_bonus: float = 0.0,
                 format_penalty: float = -4.0, gate: bool = True) -> dict:
    """Recall@k mapped to the tiers 5/4/3/1/0.5/0.1/-3.5, plus the format reward."""
    rec = recall_at(o.ranked, o.qrels, k)
    ret = recall_tier_reward(rec)
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": ret, "recall": rec, "format": float(o.format_ok)}


@register_reward("deepretrieval_answer_rank",
                 source="DeepRetrieval Table 8 (evidence seeking)")
def _r_dr_rank(o: Observation, *, format_bonus: float = 0.0,
               format_penalty: float = -4.0, gate: bool = True) -> dict:
    """Rank of the first relevant (answer-bearing) document mapped to 5/4/2/1/0.5/0.1/-3.5."""
    ranks = gold_ranks(o.ranked, o.qrels)
    first = ranks[0] if ranks else None
    ret = answer_rank_tier_reward(first)
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": ret, "first_rank": float(first or 0), "format": float(o.format_ok)}


@register_reward("deepretrieval_ndcg", source="DeepRetrieval Table 8 (sparse/dense retrieval)")
def _r_dr_ndcg(o: Observation, *, k: int = 10, format_bonus: float = 0.0,
               format_penalty: float = -1.0, gate: bool = True) -> dict:
    """nDCG@k plus the format reward (bonus when the format holds, penalty otherwise)."""
    v = ndcg_at_k(o.ranked, o.qrels, k)
    return {"reward": deepretrieval_total(v, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": v, "ndcg": v, "format": float(o.format_ok)}


@register_reward("deepretrieval_sql", source="DeepRetrieval Table 8 + App. F (database search)",
                 needs_retrieval=False)
def _r_dr_sql(o: Observation, *, exec_bonus: float = 0.0, ordered: bool = False,
              format_bonus: float = 0.0, format_penalty: float = -1.0,
              gate: bool = True) -> dict:
    """Execution match (1/0) of the predicted SQL against the gold result, + ``exec_bonus``
    (0.3 on BIRD in App. F) when it ran without error. Needs extras pred_rows/gold_rows."""
    pred, gold = o.extras.get("pred_rows"), o.extras.get("gold_rows")
    match = float(sql_execution_match(pred, gold, ordered))
    ran = float(pred is not None)
    ret = match + exec_bonus * ran
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": ret, "exec_match": match, "executed": ran,
            "format": float(o.format_ok)}


@register_reward("acqo_stage1", source="ACQO Eq. 3-6")
def _r_acqo1(o: Observation, *, k: int = 100, eta: float = 0.6, delta: float = -1.0,
             fusion: str = "rsf", gate: bool = True) -> dict:
    """Stage I: best S(R_k) over non-empty subsets of the sub-queries (RSF fusion)."""
    subs = o.sub_ranked or ([o.ranked] if o.ranked else [])
    v = acqo_stage1(subs, o.qrels, o.format_ok, k=k, eta=eta, delta=delta, fusion=fusion,
                    gate=gate)
    return {"reward": v, "n_sub": float(len(subs)), "format": float(o.format_ok)}


@register_reward("acqo_stage2", source="ACQO Eq. 3-5, 9-10")
def _r_acqo2(o: Observation, *, k: int = 100, eta: float = 0.6, delta: float = -1.0,
             lam: float = 1.0, k_star: int = 0, fusion: str = "rsf",
             gate: bool = True) -> dict:
    """Stage II: S(R_k) of the fusion of all sub-queries with the top-k* bonus Phi'."""
    subs = o.sub_ranked or ([o.ranked] if o.ranked else [])
    v = acqo_stage2(subs, o.qrels, o.format_ok, k=k, eta=eta, delta=delta, lam=lam,
                    k_star=k_star, fusion=fusion, gate=gate)
    return {"reward": v, "n_sub": float(len(subs)), "format": float(o.format_ok)}


def _sage_base(group: Sequence[Observation], k: int, format_penalty: float) -> list[float]:
    return [ndcg_at_k(o.ranked, o.qrels, k) if o.format_ok else format_penalty
            for o in group]


def _sage_finish(group: Sequence[Observation], base: list[float], shaped: list[float],
                 p: float) -> list[dict]:
    out = []
    for o, b, s in zip(group, base, shaped):
        copied = bool(o.queries) and normalise_query(" ".join(o.queries)) == \
            normalise_query(o.original_query)
        final = copy_penalty(s, " ".join(o.queries), o.original_query, p) if o.queries else s
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


def rlqr_raw_penalty(o: Observation, require_tags: bool = True) -> float:
    """Raw RL-QR penalty of one rollout: non-space characters outside ``<answer>``; with
    no answer block (format miss) every character counts (at least 1)."""
    if o.tagged:
        return float(o.n_outside)
    return float(max(1, o.n_chars)) if require_tags else 0.0


@register_reward("rlqr", level="group", source="RL-QR Eq. 5-6")
def _r_rlqr(group: list[Observation], *, k: int = 3, lambda1: float = 1.0,
            lambda2: float = 0.5, theta: float = 0.1, require_tags: bool = True) -> list[dict]:
    """lambda1 nDCG@k + lambda2 * group-normalised format/redundancy penalty."""
    ret = [ndcg_at_k(o.ranked, o.qrels, k) for o in group]
    raw = [rlqr_raw_penalty(o, require_tags) for o in group]
    pen = rlqr_group_penalty(raw, theta)
    return [{"reward": lambda1 * r + lambda2 * p, "ndcg": r, "penalty": p, "raw_penalty": w}
            for r, p, w in zip(ret, pen, raw)]


def reward_variance_zero(rewards: Iterable[float], tol: float = 1e-12) -> bool:
    """True when a group's rewards are all equal (TRL's frac_reward_zero_std counts these
    groups: GRPO gets no advantage signal from them)."""
    vals = list(rewards)
    return len(vals) > 0 and (max(vals) - min(vals)) <= tol
