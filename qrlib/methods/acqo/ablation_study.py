"""ACQO's ablation (ACQO Table 5, Sec. 4.4): the tables and figures notebook 18 builds
around the checks of :mod:`qrlib.methods.acqo.ablation`.

* :func:`load_vanilla`, :func:`check_readings`: what the notebook reads, checked first;
* :func:`rrf_env` and :func:`rerun`: an earlier run's environment and config with RRF in
  place of RSF (Eq. 1-2), checked to differ in the fusion only;
* :func:`fused_env`: the Stage I lever's environment, Eq. 9 with lambda = 0 in place of
  Eq. 6, checked to differ from 06's in the reward only;
* :class:`AblationRows`: every Table 5 row's test sub-queries (read from 07's and 12's
  saved decompositions, or decoded here), its fusion at test, scale and validity;
* :func:`check_decoding`: 07's adapter decodes again as it did in 07;
* :func:`score_rows`, :func:`comparisons`, :func:`vs_paper` and :func:`ablation_figure`:
  Table 5's columns, each row against the raw question and against ACQO, and the
  paper's drops beside ours.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError
from qrlib.eval import metrics
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import fmt_scale, log_scale, scale_columns
from qrlib.eval.stats import fmt_interval
from qrlib.methods.acqo.ablation import (LEVERS, RUNS, check_env, check_same_test, check_swap,
                                         load_subqueries, load_validity, rerun_config, saved_env)
from qrlib.methods.acqo.curriculum import SubqueryProbe
from qrlib.methods.acqo.study import acqo_env, read_log, score_subqueries, subqueries_of, validity
from qrlib.rl.config import load_config

MEASURES = ["nDCG@3", "R@3", "R@10", "AP@10", "nDCG@10"]
RAW = "raw question"
PAPER_ROW = {"without RSF": "without RSF", "without Stage II": "without Stage II",
             "without query decomposition": "without QD"}  # ours -> ACQO Table 5's row
Key = tuple[str, str, str]  # (row label, dataset, retriever)
LEVER_LABEL = {"fused-stage1": "Stage I on the fused list [fused-stage1]"}  # lever -> row
STAGE1 = "without Stage II"  # the row each Stage I lever is set against (06's Eq. 6 run)


def check_readings(runs: Sequence[str], levers: Sequence[str] = ()) -> None:
    """Fail on a reading of "without RSF" that is not one of :data:`RUNS`, or a Stage I
    lever that is not one of :data:`LEVERS`."""
    for name, given, accepted in (("runs", runs, RUNS), ("levers", levers, LEVERS)):
        unknown = sorted(set(given) - set(accepted))
        if unknown:
            raise QrlibError(f"{name}: unknown reading {unknown[0]!r}; accepted: "
                             f"{', '.join(accepted)}")


def load_vanilla(run_dir: str | Path, profile: str) -> dict[str, Any]:
    """Notebook 12's saved runs (``vanilla.json``), or a one-line error naming it."""
    path = Path(run_dir) / "12_acqo_vanilla_rl" / "vanilla.json"
    if not path.exists():
        raise QrlibError(f"notebook 18 reads 12's runs from {path.parent}, which does not exist; "
                         f"run notebook 12 of profile {profile} first")
    return json.loads(path.read_text())


def run_config(summary: Mapping[str, Any]) -> Path:
    """The config.json beside a run's adapter."""
    return Path(summary["log"]).parent / "config.json"


def rrf_env(record: Any, retriever: Any, qrels: Mapping, reward: str, *,
            reference: Mapping[str, Any], **extra: Any) -> SubqueryProbe:
    """06's and 07's reward environment with RRF in the loop, checked against the one the
    ``reference`` run saved: it must differ in the fusion and nothing else."""
    env = SubqueryProbe(acqo_env(record, retriever, qrels, reward, fusion="rrf", **extra), k=10)
    check_env(env, saved_env(run_config(reference)), fusion="rrf")
    return env


def fused_env(record: Any, retriever: Any, qrels: Mapping, *,
              reference: Mapping[str, Any]) -> SubqueryProbe:
    """The Stage I lever's reward environment: 06's, with Eq. 9's score of the fusion of
    *all* sub-queries and lambda = 0 (no Eq. 10 bonus) in place of Eq. 6's best subset,
    checked against the ``reference`` Stage I run's saved one: it must differ in the reward
    and nothing else."""
    env = SubqueryProbe(acqo_env(record, retriever, qrels, "acqo_stage2", lam=0.0, k_star=0),
                        k=10)
    check_swap(env, saved_env(run_config(reference)), field="reward", value="acqo_stage2",
               reference_value="acqo_stage1")
    return env


def rerun(summary: Mapping[str, Any], *, name: str, init_adapter: str | None,
          **over: Any) -> Any:
    """The TrainConfig of the run behind ``summary`` under a new name and start adapter."""
    return load_config(rerun_config(run_config(summary), name=name, init_adapter=init_adapter,
                                    **over))


def stage2_questions(stage1: Any, stage2: Any, kind: str) -> list[dict[str, Any]]:
    """The questions 07's tau filter kept for ``kind`` (all when it kept none)."""
    if kind not in stage2.summaries:
        stage2.adapter(kind)  # the one-line error naming what 07 trained
    kept = set(stage2.kept[kind]) or {r["qid"] for r in stage1.train_rows}
    return [r for r in stage1.train_rows if r["qid"] in kept]


def require_cold_start(summary: Mapping[str, Any], kind: str) -> None:
    """``rrf-both`` retrains Stage I from 06's cold-start adapter: fail without one."""
    if not summary.get("sft_adapter"):
        raise QrlibError(f"rrf-both retrains Stage I from 06's cold-start adapter; 06 ran no "
                         f"cold start for {kind} (sft_steps 0)")


def stage2_curves(stage2: Any, trained: Mapping[tuple[str, str], Sequence[Mapping]],
                  retrievers: Sequence[str], window: int = 4) -> tuple[Any, dict]:
    """Stage II reward and sub-queries per rollout of ACQO (RSF) and of each RRF-trained
    run; returns the figure and the logs ``{(label, retriever): log}``."""
    curves = {("ACQO (RSF)", k): pd.read_csv(stage2.summaries[k]["log"]) for k in retrievers}
    curves.update({(f"without RSF [{r}]", k): pd.read_csv(v[1]["log"])
                   for (r, k), v in trained.items()})
    return training_curves(curves, {"reward": f"Stage II reward (rolling mean of {window})",
                                    "part/n_sub": "sub-queries per rollout"},
                           stage="Stage II", window=window), curves


def stage1_curves(stage1: Any, levers: Mapping[tuple[str, str], Mapping],
                  retrievers: Sequence[str], window: int = 8) -> tuple[Any, dict]:
    """Stage I of 06 (Eq. 6) beside each lever's Stage I: the nDCG@10 of the fusion of all
    of a rollout's sub-queries (what the test searches; the two rewards are on different
    scales) and the sub-queries per rollout. Each run's questions are its own dynamic
    sampling's, so trends compare and levels need not. Returns the figure and the logs."""
    curves = {("Stage I, Eq. 6 (06)", k): pd.read_csv(stage1.summary(k)["log"])
              for k in retrievers}
    curves.update({(LEVER_LABEL[lv], k): pd.read_csv(v["log"]) for (lv, k), v in levers.items()})
    return training_curves(curves, {
        "part/fused_ndcg@10": f"fused nDCG@10 (rolling mean of {window})",
        "part/n_sub": "sub-queries per rollout"}, stage="Stage I", window=window), curves


def training_curves(curves: Mapping[tuple[str, str], pd.DataFrame], columns: Mapping[str, str],
                    *, stage: str, window: int) -> Any:
    """One panel per log column (``{column: y label}``), one line per (label, retriever),
    each a rolling mean over ``window`` steps."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, len(columns), figsize=(5.5 * len(columns), 3.4))
    for i, ((label, kind), log) in enumerate(curves.items()):
        for ax, col in zip(axes, columns):
            if col in log:
                ax.plot(log.step, log[col].rolling(window, min_periods=1).mean(), color=f"C{i}",
                        label=f"{label}, {kind}")
    for ax, ylabel in zip(axes, columns.values()):
        ax.set(xlabel=f"{stage} step", ylabel=ylabel)
    plots.legend_outside(axes[-1])
    fig.tight_layout()
    return fig


def curves_setting(curves: Mapping[tuple[str, str], pd.DataFrame]) -> str:
    """Each curve's training scale, for the figure stamp."""
    return "; ".join(f"{lab} {k}: {fmt_scale(log_scale(lg))}" for (lab, k), lg in curves.items())


def cold_start(record: Any, kind: str) -> tuple[int, int]:
    """06's SFT steps and SFT questions behind ``kind``'s Stage I (0, 0 without)."""
    sft = record.sft_steps if record.summary(kind).get("sft_adapter") else 0
    return sft, record.sft_questions.get(kind, 0) if sft else 0


def first_questions(test: Mapping[str, Any], n: int) -> dict[str, Any]:
    """Each test set cut to its first ``n`` question ids (sorted), qrels and metadata too."""
    out = {}
    for name, ds in test.items():
        keep = sorted(ds.queries)[:n]
        out[name] = dataclasses.replace(ds, queries={q: ds.queries[q] for q in keep},
                                        qrels={q: ds.qrels[q] for q in keep},
                                        query_meta={q: m for q, m in ds.query_meta.items()
                                                    if q in keep})
    return out


@dataclass
class AblationRows:
    """Every row of the test: sub-queries, fusion at test (RSF unless set), the scale
    ``(logs, SFT steps, SFT questions)`` per (label, retriever), test validity, and the
    decompositions decoded here."""

    rows: dict[Key, dict[str, list[str]]] = field(default_factory=dict)
    fusion: dict[Key, str] = field(default_factory=dict)
    scale: dict[tuple[str, str], tuple] = field(default_factory=dict)
    valid: dict[Key, float] = field(default_factory=dict)
    gen: dict[Key, list[dict]] = field(default_factory=dict)

    def read(self, test: Mapping[str, Any], stage1: Any, stage2: Any, vanilla: Mapping[str, Any],
             kind: str, *, run_dir: str | Path) -> None:
        """The rows trained elsewhere, from their notebooks' saved test decompositions: the
        raw question, ACQO (07, also fused by RRF at test), Stage I (07) and the single
        query (12)."""
        dec07 = Path(run_dir) / "07_acqo_stage2" / "decompositions.json"
        dec12 = Path(run_dir) / "12_acqo_vanilla_rl" / "rewrites.json"
        sft, warm = cold_start(stage1, kind)
        s1_log = read_log(stage1.summary(kind)["log"])
        s2_log = read_log(stage2.summaries[kind]["log"])
        van_log = read_log(vanilla["summaries"][kind]["log"])
        acqo, st1 = f"ACQO: Stage I+II ({kind}-trained)", f"Stage I ({kind}-trained)"
        for name, ds in test.items():
            sources = {"ACQO": (dec07, f"{acqo} | {name}", "notebook 07"),
                       "ACQO, RRF at test only": (dec07, f"{acqo} | {name}", "notebook 07"),
                       "without Stage II": (dec07, f"{st1} | {name}", "notebook 07"),
                       "without query decomposition": (dec12, f"{name} | {kind}", "notebook 12")}
            self.rows[RAW, name, kind] = {q: [t] for q, t in ds.queries.items()}
            for label, (path, key, writer) in sources.items():
                self.rows[label, name, kind] = load_subqueries(path, key, writer)
                self.valid[label, name, kind] = load_validity(path, key, writer)
            self.fusion["ACQO, RRF at test only", name, kind] = "rrf"
        self.scale.update({("ACQO", kind): ([s1_log, s2_log], sft, warm),
                           ("ACQO, RRF at test only", kind): ([s1_log, s2_log], sft, warm),
                           ("without Stage II", kind): ([s1_log], sft, warm),
                           ("without query decomposition", kind): ([van_log], 0, 0)})

    def add_decoded(self, label: str, kind: str, decompositions: Mapping[str, list[dict]],
                    runs: Sequence[Mapping[str, Any]], stage1: Any, *,
                    fusion: str = "rrf") -> None:
        """A row decoded here (an RRF-trained adapter, fused by RRF at test; a Stage I
        lever, by RSF), with the scale of ``runs`` (its Stage I, then Stage II summary)."""
        for name, dec in decompositions.items():
            self.gen[label, name, kind] = dec
            self.rows[label, name, kind] = subqueries_of(dec)
            self.fusion[label, name, kind] = fusion
            self.valid[label, name, kind] = validity(dec)
        self.scale[label, kind] = ([read_log(r["log"]) for r in runs], *cold_start(stage1, kind))

    def scale_of(self, model: str, label: str, name: str, kind: str, n: int) -> dict[str, Any]:
        """The scale and validity columns of one row on ``n`` test questions."""
        sc = self.scale.get((label, kind))
        return scale_columns(model if sc else None, sc[0] if sc else (), test_queries=n,
                             sft_steps=sc[1] if sc else 0, sft_queries=sc[2] if sc else 0,
                             test_valid=self.valid.get((label, name, kind)))

    def setting(self) -> str:
        """The training scale of every ablated row, for the figure stamp."""
        return "; ".join(f"{lab} ({k}): " + ", ".join(fmt_scale(log_scale(lg)) for lg in logs)
                         for (lab, k), (logs, _, _) in self.scale.items()
                         if lab.startswith("without") or lab in LEVER_LABEL.values())


def check_decoding(again: Mapping[str, Sequence[Mapping]], rows: Mapping[Key, Mapping],
                   kind: str, share: float = 0.9) -> dict[str, float]:
    """``{"<dataset>.<kind>.decode_check_agreement": share}`` of questions 07's adapter
    decoded here as it did in 07; fails below ``share`` (batching may move a rare greedy
    tie; many differences mean other decoding settings)."""
    out = {}
    for name, dec in again.items():
        same = sum(d["subqueries"] == rows["ACQO", name, kind][d["qid"]] for d in dec)
        out[f"{name}.{kind}.decode_check_agreement"] = same / len(dec)
        print(f"{name}/{kind}: 07's adapter re-decodes {same} of {len(dec)} questions as 07 did")
        if same < share * len(dec):
            raise QrlibError(f"{name}/{kind}: 07's ACQO adapter decodes {len(dec) - same} of "
                             f"{len(dec)} test questions differently here than in 07; the "
                             f"decoding settings do not match 07's")
    return out


def score_rows(rows: AblationRows, test: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
               *, model: str, k: int,
               measures: Sequence[str] = MEASURES) -> tuple[dict[Key, pd.DataFrame], pd.DataFrame]:
    """Table 5's columns of every row on the whole test cut (each fused as its row says),
    with sub-queries per question and the row's scale. Returns the per-question tables
    (indexed by query id) and the table."""
    per_q, table = {}, []
    for (label, name, kind), subs in rows.rows.items():
        fusion = rows.fusion.get((label, name, kind), "rsf")
        pq, _ = score_subqueries(retrievers[name, kind], test[name].qrels, subs, measures, k=k,
                                 fusion=fusion, n_sub=False)
        per_q[label, name, kind] = pq = pq.set_index("query_id")
        table.append({"dataset": name, "retriever": kind, "row": label, "fusion": fusion,
                      **{metrics.label(m): pq[m].mean() for m in measures},
                      "sub-queries": sum(map(len, subs.values())) / len(subs),
                      **rows.scale_of(model, label, name, kind, len(pq))})
    return per_q, pd.DataFrame(table)


def comparisons(per_q: Mapping[Key, pd.DataFrame], rows: AblationRows, published: pd.DataFrame, *,
                datasets: Sequence[str], retrievers: Sequence[str], model: str, bootstrap: int,
                seed: int) -> pd.DataFrame:
    """Every row minus the raw question, ACQO minus every ablated row (Table 5's question)
    and each Stage I lever minus 06's Stage I (:data:`STAGE1`), in nDCG@10 with a 95 %
    paired bootstrap; first checks that the raw question scores as 07 ``published`` it."""
    out = []
    for name in datasets:
        for kind in retrievers:
            pub = published[(published.dataset == name) & (published.retriever == kind)]
            raw = per_q[RAW, name, kind]["nDCG@10"].to_dict()
            check_same_test(raw, pub.set_index(pub.query_id.astype(str))[RAW].to_dict(),
                            where=f"{name}/{kind}")
            acqo = per_q["ACQO", name, kind]["nDCG@10"].to_dict()
            for (label, n2, k2), pq in per_q.items():
                if (n2, k2) != (name, kind) or label == RAW:
                    continue
                scale = (rows.scale_of(model, label, name, kind, len(pq))
                         if (label, kind) in rows.scale else None)
                out.append(compare(pq["nDCG@10"].to_dict(), raw, paper="acqo", dataset=name,
                                   retriever=kind, metric="nDCG@10", method=label, kind="trained",
                                   baseline=RAW, scale=scale, resamples=bootstrap, seed=seed))
                if label in LEVER_LABEL.values():
                    out.append(compare(pq["nDCG@10"].to_dict(),
                                       per_q[STAGE1, name, kind]["nDCG@10"].to_dict(),
                                       paper="acqo", dataset=name, retriever=kind,
                                       metric="nDCG@10", method=label, kind="trained",
                                       baseline=STAGE1, baseline_kind="trained", scale=scale,
                                       resamples=bootstrap, seed=seed))
                if label != "ACQO":
                    out.append(compare(acqo, pq["nDCG@10"].to_dict(), paper="acqo", dataset=name,
                                       retriever=kind, metric="nDCG@10", method="ACQO",
                                       kind="trained", baseline=label, baseline_kind="trained",
                                       scale=rows.scale_of(model, "ACQO", name, kind, len(pq)),
                                       resamples=bootstrap, seed=seed))
    return comparison_table(out)


def vs_paper(table: pd.DataFrame, paper: pd.DataFrame, *, datasets: Sequence[str],
             retrievers: Sequence[str]) -> pd.DataFrame:
    """ACQO minus each ablated row in points, ours (nDCG@3, MAP@10) beside ACQO Table 5's
    (TopiOCQA NDCG@3, HotpotQA MAP@10; BM25); NaN where the paper has no such row."""
    def drop(col: str, key: str | None) -> float:
        return paper.loc["ACQO", col] - paper.loc[key, col] if key else float("nan")

    rows = []
    for name in datasets:
        for kind in retrievers:
            ours = table[(table.dataset == name) & (table.retriever == kind)].set_index("row")
            for label in ours.index:
                if label in (RAW, "ACQO"):
                    continue
                key = next((v for k, v in PAPER_ROW.items() if label.startswith(k)), None)
                rows.append({
                    "dataset": name, "retriever": kind, "row": label,
                    "ours ΔnDCG@3": 100 * (ours.loc["ACQO", "nDCG@3"] - ours.loc[label, "nDCG@3"]),
                    "ours ΔMAP@10": 100 * (ours.loc["ACQO", "MAP@10"] - ours.loc[label, "MAP@10"]),
                    "paper ΔNDCG@3 (TopiOCQA, BM25)": drop("TopiOCQA BM25 NDCG@3", key),
                    "paper ΔMAP@10 (HotpotQA, BM25)": drop("HotpotQA BM25 MAP@10", key)})
    return pd.DataFrame(rows)


def vs_acqo(comparisons_: pd.DataFrame) -> pd.DataFrame:
    """The comparisons of ACQO against each ablated row."""
    return comparisons_[(comparisons_.method == "ACQO")
                        & (comparisons_["baseline kind"] == "trained")]


def ablation_figure(comparisons_: pd.DataFrame) -> Any:
    """ACQO minus each ablated row (nDCG@10) with its 95 % interval, one line per row."""
    import matplotlib.pyplot as plt

    rows = vs_acqo(comparisons_)
    fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.5 * max(1, len(rows))))
    ax.errorbar(rows["diff"], range(len(rows)), xerr=[rows["diff"] - rows.lo, rows.hi - rows["diff"]],
                fmt="o", capsize=3)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(rows)), [f"{r.baseline} ({r.retriever})" for r in rows.itertuples()])
    ax.set(xlabel="ACQO minus the ablated row, nDCG@10 (95% paired bootstrap)")
    fig.tight_layout()
    return fig


def examples(rows: Mapping[Key, Mapping[str, list[str]]], ds: Any, name: str, kind: str,
             n: int) -> pd.DataFrame:
    """The first ``n`` test questions (by id) with every row's sub-queries, one column
    per question (ACQO fused by RRF at test is ACQO's sub-queries again, left out)."""
    labels = [lab for (lab, n2, k2) in rows
              if (n2, k2) == (name, kind) and lab not in ("ACQO, RRF at test only", RAW)]
    return pd.DataFrame([{"question": ds.queries[q],
                          **{lab: " %% ".join(rows[lab, name, kind][q]) for lab in labels}}
                         for q in sorted(ds.queries)[:n]]).T


def extra_sentences(comparisons_: pd.DataFrame) -> list[str]:
    """"What we found"'s own sentences: ACQO against every ablated row, one sentence per
    dataset and retriever (the paragraph holds six sentences, so one sentence per row would
    drop the last rows: the cpu run at de6ab3f lost "without RSF"); each Stage I lever
    against 06's Stage I closes its dataset's sentence."""
    rows = comparisons_[(comparisons_.method == "ACQO") & (comparisons_.baseline != RAW)]
    levers = comparisons_[comparisons_.method.isin(list(LEVER_LABEL.values()))
                          & (comparisons_.baseline == STAGE1)]
    out = []
    for (dataset, retriever), g in rows.groupby(["dataset", "retriever"], sort=False):
        parts = "; ".join(f"{r['baseline']} {fmt_interval(r)}" for _, r in g.iterrows())
        lv = levers[(levers.dataset == dataset) & (levers.retriever == retriever)]
        parts += "".join(f"; and {r['method']} minus Stage I with Eq. 6 ({STAGE1}) "
                         f"{fmt_interval(r)}"
                         for _, r in lv.iterrows())
        out.append(f"ACQO minus each ablated row on {dataset}/{retriever}: {parts}.")
    return out


def records(comparisons_: pd.DataFrame) -> dict[str, list[float]]:
    """Every comparison as ``[diff, lo, hi]``, keyed "<dataset>.<retriever>.<method> minus
    <baseline>"."""
    return {f"{r.dataset}.{r.retriever}.{r.method} minus {r.baseline}": [r["diff"], r.lo, r.hi]
            for _, r in comparisons_.iterrows()}
