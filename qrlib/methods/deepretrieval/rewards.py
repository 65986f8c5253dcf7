"""DeepRetrieval (Jiang et al.): r = r_retrieval + r_format (Sec. 2.2.1) with the
task rewards of Table 8 (App. F), and the values of the authors' released code.

Paper: recall tiers for literature search, scored at Recall@3K (Table 1 and Fig. 1 score
literature search with Recall@3K, so the tiers read the top 3,000); tiers of the rank of
the first answer-bearing document for evidence seeking (last tier: rank 3,000); NDCG for
the BEIR sets; execution accuracy for SQL, with +0.3 for an executable query on BIRD
(App. F). The paper gives no format-reward values: the ``paper`` presets use ours
(bonus 0, a penalty below the lowest tier, the format gate replacing the retrieval
reward).

Released code (github.com/pat-jj/DeepRetrieval, commit 001a563, files under
``code/verl/utils/reward_score/``), the ``released`` presets:

* BEIR nDCG (``scifact.py``, ``hotpotqa.py``, ``fever.py``, ``fiqa.py``, ``nfcorpus.py``,
  ``msmarco_beir.py``): format score +0.1 when the format holds, -2 when it does not;
  total = 0.1 + nDCG when nDCG > 0, 0 when the format holds but nDCG is 0, -2 for a
  broken format. Training cuts nDCG (and retrieves) at a per-dataset depth, see
  :data:`RELEASED_NDCG_K`; validation uses 10.
* Literature search (``pubmed.py``, ``ctgov.py``): +1 / -4 format score added to the
  recall tier; the PubMed API call asks for ``retmax=3000`` (``apis/pubmed.py``).
* Evidence seeking (``nq_serini.py``, ``triviaqa.py``): same +1 / -4 format score, BM25
  top 3,000, floor -3.5 (``squad.py`` uses -2.5).
* SQL (``spider.py``): 1 when ``set(pred) == set(gold)`` else 0, format +0.1 only on a
  match, -2 for a broken format; ``bird.py`` gives 1 for a match and 0.3 for any other
  query that executes (not 1.3), preset ``released-bird``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data import sql as _sql
from qrlib.rl.rewards import Observation, gold_ranks, ndcg_at_k, recall_at, register_reward

# Table 8 (App. F): (threshold, reward), checked in order
RECALL_TIERS: tuple[tuple[float, float], ...] = (
    (0.7, 5.0), (0.5, 4.0), (0.4, 3.0), (0.3, 1.0), (0.1, 0.5), (0.05, 0.1))
RECALL_FLOOR = -3.5
ANSWER_RANK_TIERS: tuple[tuple[int, float], ...] = (
    (5, 5.0), (20, 4.0), (50, 2.0), (100, 1.0), (1000, 0.5), (3000, 0.1))
ANSWER_RANK_FLOOR = -3.5
#: Recall@K depth of literature search (Table 1: Recall@3K)
LITERATURE_DEPTH = 3000
BONUS_MODES = ("always", "if_positive")

#: Training depth of the nDCG reward in the released code, by retriever family and
#: BEIR set (``top_k`` outside test/val in reward_score/<set>.py and
#: reward_score_dense/<set>.py). Not the paper's reading: the paper reports nDCG@10.
RELEASED_NDCG_K: dict[tuple[str, str], int] = {
    ("sparse", "scifact"): 50, ("sparse", "hotpotqa"): 3000, ("sparse", "fever"): 1000,
    ("sparse", "fiqa"): 1000, ("sparse", "nfcorpus"): 1000, ("sparse", "msmarco_beir"): 1000,
    ("dense", "scifact"): 1000, ("dense", "hotpotqa"): 1000, ("dense", "fever"): 1000,
    ("dense", "nfcorpus"): 100, ("dense", "msmarco_beir"): 1000,
}


def released_ndcg_k(dataset: str, dense: bool = False) -> int:
    """The released code's training nDCG depth for a BEIR set (:data:`RELEASED_NDCG_K`)."""
    key = ("dense" if dense else "sparse", dataset.lower())
    if key not in RELEASED_NDCG_K:
        known = sorted(d for f, d in RELEASED_NDCG_K if f == key[0])
        raise QrlibError(f"no released nDCG depth for {key[0]} {dataset!r}; known: {known}")
    return RELEASED_NDCG_K[key]


def recall_tier_reward(recall: float, floor: float = RECALL_FLOOR) -> float:
    """Table 8, literature search: 5/4/3/1/0.5/0.1 for recall >= 0.7/0.5/0.4/0.3/0.1/0.05,
    else ``floor`` (-3.5)."""
    for thr, val in RECALL_TIERS:
        if recall >= thr:
            return val
    return floor


def answer_rank_tier_reward(rank: int | None, floor: float = ANSWER_RANK_FLOOR) -> float:
    """Table 8, evidence seeking: rank of the first hit <= 5/20/50/100/1000/3000 gives
    5/4/2/1/0.5/0.1; no hit (None) or a later one gives ``floor`` (-3.5)."""
    if rank is not None:
        for thr, val in ANSWER_RANK_TIERS:
            if rank <= thr:
                return val
    return floor


def deepretrieval_total(retrieval: float, format_ok: bool, *, format_bonus: float = 0.0,
                        format_penalty: float = -4.0, gate: bool = True,
                        bonus_mode: str = "always") -> float:
    """Sec. 2.2.1: r = r_retrieval + r_format.

    With ``gate`` (default) a format failure earns only ``format_penalty``. ``bonus_mode``
    ``"always"`` adds ``format_bonus`` to any retrieval reward; ``"if_positive"`` is the
    released BEIR/SQL rule: bonus + retrieval when retrieval > 0, else 0.
    """
    if bonus_mode not in BONUS_MODES:
        raise QrlibError(f"bonus_mode must be one of {list(BONUS_MODES)}, got {bonus_mode!r}")
    if not format_ok:
        return format_penalty if gate else retrieval + format_penalty
    if bonus_mode == "if_positive":
        return retrieval + format_bonus if retrieval > 0 else 0.0
    return retrieval + format_bonus


def sql_execution_match(pred_rows: Sequence[Sequence[Any]] | None,
                        gold_rows: Sequence[Sequence[Any]] | None,
                        ordered: bool = False, *, mode: str | None = None,
                        gold_sql: str | None = None) -> bool:
    """Execution accuracy (Table 8, database search): the predicted result equals the
    gold one. ``mode`` as :func:`qrlib.data.sql.results_match` (``spider``, ``multiset``,
    ``set``, ``list``); without it, a multiset (a list when ``ordered``)."""
    if mode is None:
        mode = "list" if ordered else "multiset"
    return _sql.results_match(pred_rows, gold_rows, mode, gold_sql)


# --------------------------------------------------------------------------- registered
_DR_RELEASED_SEARCH = {"format_bonus": 1.0, "format_penalty": -4.0, "gate": True}


@register_reward("deepretrieval_recall", source="DeepRetrieval Table 8 (literature search)",
                 presets={"paper": {}, "released": _DR_RELEASED_SEARCH})
def _r_dr_recall(o: Observation, *, k: int = LITERATURE_DEPTH, format_bonus: float = 0.0,
                 format_penalty: float = -4.0, gate: bool = True,
                 floor: float = RECALL_FLOOR) -> dict:
    """Recall@k (k = 3000, Table 1) mapped to the tiers 5/4/3/1/0.5/0.1/-3.5, plus the
    format reward."""
    rec = recall_at(o.ranked, o.qrels, k)
    ret = recall_tier_reward(rec, floor)
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": ret, "recall": rec, "format": float(o.format_ok)}


@register_reward("deepretrieval_answer_rank",
                 source="DeepRetrieval Table 8 (evidence seeking)",
                 depth=lambda p: ANSWER_RANK_TIERS[-1][0],
                 presets={"paper": {}, "released": _DR_RELEASED_SEARCH})
def _r_dr_rank(o: Observation, *, format_bonus: float = 0.0, format_penalty: float = -4.0,
               gate: bool = True, floor: float = ANSWER_RANK_FLOOR) -> dict:
    """Rank of the first relevant (answer-bearing) document mapped to
    5/4/2/1/0.5/0.1/-3.5 (searched to rank 3000, the last tier). "Answer-bearing" comes
    from the qrels: build them with :func:`qrlib.methods.deepretrieval.evidence.answer_qrels` so the reward and
    H@N (:func:`qrlib.methods.deepretrieval.evidence.hits_at_n`) share one answer-span test."""
    ranks = gold_ranks(o.ranked, o.qrels)
    first = ranks[0] if ranks else None
    ret = answer_rank_tier_reward(first, floor)
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate),
            "retrieval": ret, "first_rank": float(first or 0), "format": float(o.format_ok)}


@register_reward("deepretrieval_ndcg", source="DeepRetrieval Table 8 (sparse/dense retrieval)",
                 presets={"paper": {}, "released": {
                     "k": 1000, "format_bonus": 0.1, "bonus_mode": "if_positive",
                     "format_penalty": -2.0, "gate": True}})
def _r_dr_ndcg(o: Observation, *, k: int = 10, format_bonus: float = 0.0,
               format_penalty: float = -1.0, gate: bool = True,
               bonus_mode: str = "always") -> dict:
    """nDCG@k plus the format reward (bonus when the format holds, penalty otherwise)."""
    v = ndcg_at_k(o.ranked, o.qrels, k)
    return {"reward": deepretrieval_total(v, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate,
                                          bonus_mode=bonus_mode),
            "retrieval": v, "ndcg": v, "format": float(o.format_ok)}


def _sql_prepare(group: list[Observation], state: dict[str, Any]) -> None:
    """Pre-step of ``deepretrieval_sql``: run the generated SQL (and the gold SQL, cached,
    when no ``gold_rows`` column is given) with :func:`qrlib.data.sql.execute_sql`."""
    timeout = float(state.get("sql_timeout_s", 2.0))
    cache = state.setdefault("gold_rows_cache", {})
    for o in group:
        db = o.row.get("db_path")
        gold_sql = o.row.get("gold_sql")
        gold = o.row.get("gold_rows")
        if gold is None and gold_sql is not None:
            key = (str(db), str(gold_sql))
            if key not in cache:
                cache[key] = _sql.execute_sql(db, gold_sql, timeout_s=timeout)[0]
            gold = cache[key]
        rows, err = (_sql.execute_sql(db, o.generated[0], timeout_s=timeout)
                     if o.generated and db is not None else (None, "no SQL"))
        o.extras.update(pred_rows=rows, gold_rows=gold, gold_sql=gold_sql, sql_error=err)


@register_reward("deepretrieval_sql", source="DeepRetrieval Table 8 + App. F (database search)",
                 needs_retrieval=False, columns=("db_path", ("gold_sql", "gold_rows")),
                 prepare=_sql_prepare, record=("sql_error",),
                 presets={"paper": {},
                          "released": {"compare": "set", "format_bonus": 0.1,
                                       "bonus_mode": "if_positive", "format_penalty": -2.0},
                          "released-bird": {"compare": "set", "format_bonus": 0.1,
                                            "bonus_mode": "if_positive",
                                            "format_penalty": -2.0, "exec_bonus": 0.3,
                                            "exec_bonus_mode": "floor"}})
def _r_dr_sql(o: Observation, *, compare: str = "spider", exec_bonus: float = 0.0,
              exec_bonus_mode: str = "add", format_bonus: float = 0.0,
              format_penalty: float = -1.0, gate: bool = True,
              bonus_mode: str = "always") -> dict:
    """Execution match (1/0) of the generated SQL against the gold result, plus
    ``exec_bonus`` for a query that ran (0.3 on BIRD, App. F; ``add``: on top of a match,
    ``floor``: only when it did not match, as the released bird.py does)."""
    if exec_bonus_mode not in ("add", "floor"):
        raise QrlibError(f"exec_bonus_mode must be 'add' or 'floor', got {exec_bonus_mode!r}")
    pred, gold = o.extras.get("pred_rows"), o.extras.get("gold_rows")
    match = float(sql_execution_match(pred, gold, mode=compare,
                                      gold_sql=o.extras.get("gold_sql")))
    ran = float(pred is not None)
    ret = match + exec_bonus * ran if exec_bonus_mode == "add" else max(match, exec_bonus * ran)
    return {"reward": deepretrieval_total(ret, o.format_ok, format_bonus=format_bonus,
                                          format_penalty=format_penalty, gate=gate,
                                          bonus_mode=bonus_mode),
            "retrieval": ret, "exec_match": match, "executed": ran,
            "format": float(o.format_ok)}
