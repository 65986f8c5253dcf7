"""SAGE training end to end (SAGE Sec. 2.3-2.5, Tables 1-3): the steps notebooks 08 and 15 call.

1. :func:`variants` names the training variants: **unguided** RL (DeepRetrieval-style: the
   generic rewrite prompt, plain nDCG@10), SAGE **Direct**, **SCS** (Eq. 1) and **CRS**
   (Eq. 2), each minus the copy penalty ``p`` (Eq. 3), and Table 3's exploration ablation
   (conservative prompt with p = 0, proactive prompt with p = 0 and with each extra ``p``);
   :func:`pick` checks a list of keys against them;
2. :func:`sage_data` cuts a dataset's train and test splits and joins their documents into
   one corpus, which training and evaluation search alike;
3. :func:`train_variant` trains one variant with GRPO (:func:`qrlib.rl.train.train`), its
   prompt's answer format parsed leniently as the test rewrites are;
4. :func:`rewrite_test` rewrites the test queries greedily with the base model or an adapter,
   under the decoding contract of training
   (``modified`` is Table 3's modification rate), and
   :func:`~qrlib.eval.scoring.search_scores` (re-exported) scores any search texts;
5. :func:`evaluate` does both for the raw query, the untrained model with each prompt and
   every trained run, and :func:`result_rows` pairs each with the raw query.

Models and retrievers come in from the notebook; nothing here downloads.
"""
from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import compare
from qrlib.eval.scale import scale_columns
from qrlib.data import datasets as qdata
from qrlib.eval.scoring import search_scores
from qrlib.generation import policy, rewrite
from qrlib.generation.contract import DecodingContract
from qrlib.generation.prompts import as_template
from qrlib.rl.env import RewardEnv
from qrlib.rl.train import load_config, train

__all__ = ["Variant", "variants", "pick", "sage_data", "train_variant", "rewrite_test",
           "search_scores", "result_rows", "evaluate", "MAIN", "ABLATION"]

MAIN = ("unguided", "direct", "scs", "crs")  # Tables 1-2: the rewards against unguided RL
ABLATION = ("conservative", "proactive")  # Table 3 besides the proactive rows with p > 0


@dataclass(frozen=True)
class Variant:
    """One SAGE training run: its prompt (registry name), reward (registry name) with
    parameters, and the label its rows carry."""

    key: str
    label: str
    prompt: str
    reward: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def fmt(self) -> str:
        return as_template(self.prompt).meta["fmt"]

    @property
    def prefill(self) -> str:
        return as_template(self.prompt).meta.get("prefill", "")


def variants(copy_penalty: float = 0.05, ablation_p: Iterable[float] = (), *,
             reasoning: bool = False) -> dict[str, Variant]:
    """Every variant by key. ``copy_penalty`` is ``p`` of Eq. 3 in the main runs (SAGE Sec.
    4.3 uses 0.05); ``ablation_p`` adds a proactive SCS run per value (Table 3: 0.02).
    ``reasoning``: the paper's prompts (``<think>`` first, App. A.1 Fig. 5:
    ``sage/proactive``, ``sage/conservative``); else their no-reasoning variants with the
    same layout and examples (``sage/guided``, ``sage/guided-conservative``), which fit a
    CPU's rollout budget."""
    p = float(copy_penalty)
    pro, con = (("sage/proactive", "sage/conservative") if reasoning
                else ("sage/guided", "sage/guided-conservative"))
    out = [Variant("unguided", "unguided RL (DeepRetrieval-style)", "generic/rewrite",
                   "deepretrieval_ndcg", {"format_penalty": 0.0}),
           Variant("direct", "SAGE Direct", pro, "sage_direct", {"p": p}),
           Variant("scs", "SAGE-SCS", pro, "sage_scs", {"p": p}),
           Variant("crs", "SAGE-CRS", pro, "sage_crs", {"p": p}),
           Variant("conservative", "SCS, conservative prompt, p=0", con, "sage_scs",
                   {"p": 0.0}),
           Variant("proactive", "SCS, proactive prompt, p=0", pro, "sage_scs", {"p": 0.0})]
    out += [Variant(f"proactive-p{float(x):g}", f"SCS, proactive prompt, p={float(x):g}",
                    pro, "sage_scs", {"p": float(x)}) for x in ablation_p]
    return {v.key: v for v in out}


def pick(keys: Iterable[str], table: Mapping[str, Variant]) -> list[Variant]:
    """The variants of ``keys`` in order, each once; one-line error naming an unknown key."""
    keys = list(dict.fromkeys(keys))
    unknown = [k for k in keys if k not in table]
    if unknown:
        raise QrlibError(f"unknown SAGE variant(s) {', '.join(unknown)}; accepted: "
                         f"{', '.join(table)}")
    return [table[k] for k in keys]


def sage_data(name: str, *, n_train_queries: int | None, n_test_queries: int | None,
              n_distractors: int | None, seed: int = 0,
              data_dir: str | os.PathLike | None = None) -> tuple[Any, Any, Any]:
    """``(train, test, full)``: seeded cuts of the train and test splits (the train cut
    brings only its judged documents), and ``full`` holding both cuts' documents, queries
    and qrels, the collection training rewards and test evaluation search."""
    tr = qdata.subset(qdata.load_dataset(name, "train", data_dir=data_dir),
                      n_queries=n_train_queries,
                      n_distractors=0 if n_distractors is not None else None, seed=seed)
    te = qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                      n_queries=n_test_queries, n_distractors=n_distractors, seed=seed)
    full = qdata.Dataset(name=name, corpus={**te.corpus, **tr.corpus},
                         queries={**te.queries, **tr.queries}, qrels={**te.qrels, **tr.qrels})
    return tr, te, full


def train_variant(v: Variant, searcher: Any, full: Any, train_queries: Mapping[str, str], *,
                  name: str, run_dir: str | os.PathLike, k: int = 10,
                  **train_kw: Any) -> dict[str, Any]:
    """Train variant ``v`` with GRPO against ``searcher`` (a retriever built on
    ``full.corpus``), rewarded by its reward at nDCG@``k`` on ``full.qrels``. ``train_kw``
    goes to :class:`qrlib.rl.train.TrainConfig` (model, dataset, retriever, steps,
    sampling, ...). Returns :func:`qrlib.rl.train.train`'s summary (adapter, log, steps)."""
    env = RewardEnv(searcher, full.qrels, reward=v.reward, fmt=v.fmt, queries=full.queries,
                    k=k, lenient=True, **v.params)
    cfg = load_config(dict(name=name, run_dir=str(run_dir), prompt=v.prompt, fmt=v.fmt,
                           prefill=v.prefill, reward=v.reward,
                           reward_params={"k": k, "lenient": True, **v.params}, **train_kw))
    return train(cfg, env=env, queries=dict(train_queries))


def rewrite_test(model: str, queries: Mapping[str, str], contracts: Mapping[str, Any], *,
                 adapter: str | os.PathLike | None = None,
                 autocast: bool | None = False) -> dict[str, Any]:
    """Greedy rewrites of ``queries`` under each decoding contract of ``contracts`` (key ->
    a :class:`~qrlib.generation.contract.DecodingContract` or an adapter folder), by the
    base ``model`` or with ``adapter``; the model is loaded once and freed after. Returns
    ``{key: DataFrame}`` (:func:`qrlib.generation.rewrite.rewrite_queries`)."""
    m, tok = policy.load_policy(model, adapter=adapter)
    try:
        return {key: rewrite.rewrite_queries(m, tok, dict(queries), contract=c,
                                             autocast=autocast, progress=False)
                for key, c in contracts.items()}
    finally:
        del m
        gc.collect()


def result_rows(scores: Mapping[str, Any], rewrites: Mapping[str, Any],
                scales: Mapping[str, Mapping[str, Any]], kinds: Mapping[str, str], *,
                dataset: str, retriever: str, resamples: int = 10_000,
                seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """SAGE Tables 1-3's rows and their comparisons with the raw query.

    ``scores``: label -> per-query nDCG@10 (a Series by query id; must hold ``"raw query"``);
    ``rewrites``: label -> the rewrites behind it (absent for the raw query); ``scales``:
    label -> :func:`qrlib.eval.scale.scale_columns`; ``kinds``: label -> its
    :data:`qrlib.eval.compare.KINDS` entry. Returns ``(rows, comparisons)``: a row per label
    (nDCG@10, Δ vs raw with its 95% paired-bootstrap interval, wins/losses, modification
    rate, format-valid rate, generated tokens, training scale) and a comparison row per
    label other than the raw query (:func:`qrlib.eval.compare.compare`)."""
    if "raw query" not in scores:
        raise QrlibError("result_rows: scores lack the 'raw query' row")
    raw = scores["raw query"].to_dict()
    rows, comparisons = [], []
    for label, pq in scores.items():
        bs = compare(pq.to_dict(), raw, paper="sage", dataset=dataset, retriever=retriever,
                     metric="nDCG@10", method=label, kind=kinds[label], baseline="raw query",
                     scale=scales[label], resamples=resamples, seed=seed)
        if label != "raw query":
            comparisons.append(bs)
        df = rewrites.get(label)
        rows.append({"dataset": dataset, "retriever": retriever, "model": label,
                     "nDCG@10": pq.mean(), "ΔnDCG@10 vs raw": bs["diff"], "lo": bs["lo"],
                     "hi": bs["hi"], "wins/losses": f"{bs['wins']}/{bs['losses']}",
                     "modified": df.modified.mean() if df is not None else 0.0,
                     "format ok": df.format_ok.mean() if df is not None else 1.0,
                     "gen tokens": df.gen_tokens.mean() if df is not None else 0.0,
                     **scales[label]})
    return rows, comparisons


def evaluate(model: str, trained: Mapping[str, tuple[str, Mapping[str, Any]]], test: Any,
             full: Any, searcher: Any, *, dataset: str, retriever: str,
             autocast: bool | None = False, resamples: int = 10_000,
             seed: int = 0) -> dict[str, Any]:
    """The test evaluation of SAGE's tables on one dataset.

    ``trained``: label -> (prompt, :func:`train_variant` summary). Rows: the raw query, the
    untrained ``model`` with each prompt the runs use (``untrained (<prompt>)``) and every
    trained run, each searched with ``searcher`` over ``full`` and scored nDCG@10 on the
    ``test`` queries. Every row decodes with its training's contract (prompt, prefill, stop
    strings, budget, parser): a trained run with its adapter's, an untrained prompt with
    that of the first run trained with it. Returns ``{"rows", "comparisons", "scores",
    "rewrites", "scales"}`` (:func:`result_rows`; scales read from the runs' logs)."""
    n = len(test.queries)
    scores = {"raw query": search_scores(searcher, full.qrels, test.queries)["nDCG@10"]}
    scales = {"raw query": scale_columns(None, test_queries=n)}
    kinds, rewrites = {"raw query": "baseline"}, {}
    untrained = {}
    for prompt, summary in trained.values():
        untrained.setdefault(prompt, DecodingContract.load(summary["adapter"]))
    for prompt, df in rewrite_test(model, test.queries, dict(sorted(untrained.items())),
                                   autocast=autocast).items():
        label = f"untrained ({prompt})"
        rewrites[label], kinds[label] = df, "untrained"
        scales[label] = scale_columns(model, test_queries=n, test_valid=df.format_ok.mean())
    for label, (prompt, summary) in trained.items():
        a = summary["adapter"]
        rewrites[label] = rewrite_test(model, test.queries, {label: a}, adapter=a,
                                       autocast=autocast)[label]
        kinds[label] = "trained"
        scales[label] = scale_columns(model, [pd.read_csv(summary["log"], dtype={"qids": str})],
                                      test_queries=n,
                                      test_valid=rewrites[label].format_ok.mean())
    for label, df in rewrites.items():
        scores[label] = search_scores(searcher, full.qrels,
                                      dict(zip(df.qid, df.search_text)))["nDCG@10"]
    rows, comparisons = result_rows(scores, rewrites, scales, kinds, dataset=dataset,
                                    retriever=retriever, resamples=resamples, seed=seed)
    return {"rows": rows, "comparisons": comparisons, "scores": scores, "rewrites": rewrites,
            "scales": scales}
