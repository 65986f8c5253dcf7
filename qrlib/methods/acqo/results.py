"""RESULTS.md sections of ACQO: rank-score fusion of sub-query lists (notebook 03), the
trained decomposer against the raw question (06-07), transfer (16) and the Table 5
ablation (18). Assembled by :mod:`qrlib.workbook.results` (entry-point group
``qrlib.results``)."""
from __future__ import annotations

from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.stats import verdict
from qrlib.workbook.resultsdoc import Doc, Section, cite, comparisons_section, md_table


def _fusion(d: Doc) -> str:
    m = d.t("03_fusion_metrics")
    ties = d.t("03_fusion_ties")
    tim = d.t("03_fusion_timing")
    ds = "2wikimultihopqa-mini" if "2wikimultihopqa-mini" in set(m.dataset) else m.dataset.iloc[0]
    blk = m[(m.dataset == ds) & (m.retriever == "bm25")]
    methods = ["raw question", "best single sub-query (oracle pick)", "RRF", "RRF (lists cut to 10)",
               "RSF", "CombSUM", "CombMNZ", "RSF (raw + sub-queries)"]
    rows = []
    for meth in methods:
        r = blk[blk.method == meth]
        if r.empty:
            continue
        if meth == "raw question":
            v = r["nDCG@10"].iloc[0]
            rows.append([meth, d.n(v), d.n(v)])
            continue
        cell = {s: r[r.split == s]["nDCG@10"] for s in ("heuristic", "oracle")}
        fmt = (lambda s: f"**{d.n(cell[s].iloc[0])}**") if meth == "RSF" else (lambda s: d.n(cell[s].iloc[0]))
        rows.append([f"**{meth}**" if meth == "RSF" else meth, fmt("heuristic"), fmt("oracle")])
    piv = m.pivot_table(index=["dataset", "retriever", "split"], columns="method", values="nDCG@10")
    gap = (piv["RSF"] - piv["RRF"]).dropna()
    t = (f"## Fusion of sub-query lists (notebook 03: {cite('03_fusion_metrics', '03_fusion_ties', '03_fusion_timing')})\n\n"
         f"Model-free sub-queries (oracle: one per gold title; heuristic: a rule-based split), "
         f"lists of depth 100, nDCG@10 on {ds} with BM25:\n\n"
         + md_table(["method", "heuristic split", "oracle split"], rows) + "\n\n"
         f"Over every dataset, retriever and split, RSF beats RRF by "
         f"{d.rng(gap, '.3f', what='RSF-RRF')} nDCG@10. RSF and CombSUM lead; RRF over deep "
         "lists rewards documents that several lists share at middling ranks over documents "
         "one list ranks first, which hurts when each sub-query targets a different gold "
         "paragraph (ACQO's motivation for RSF). Depending on dataset, retriever and split, "
         f"{d.rng(ties['share with a P-tie in top-10'] * 100, '.0f', what='tie share')} % of questions "
         "have a rank-consensus tie in RSF's top 10 that the score breaks. Fusing one "
         f"question's lists takes {d.rng(tim['mean'], '.0f', what='us')} µs in pure Python, "
         "depending on the method.\n")
    return t


def _acqo(d: Doc) -> str:
    """ACQO (notebooks 06-07): cold start, curriculum and the test table vs the raw question.
    Empty until 07 has run in this profile (the gaps section then names it)."""
    if not d.has("07_acqo_results"):
        return ""
    res = d.t("07_acqo_results")
    head = (f"## ACQO: the trained decomposer against the raw question (notebooks 06-07: "
            f"{cite('06_warm_start', '07_tau_filter', '07_stage_summary', '07_acqo_results')})\n\n")
    parts = []
    try:
        w = d.t("06_warm_start")
        parts.append("Cold start by rejection sampling (notebook 06): per retriever, "
                     + "; ".join(f"{r.retriever}: {d.n(r['target is a sample'], '.0%')} of "
                                 f"{int(r.questions)} training questions got a sampled "
                                 f"decomposition as SFT target"
                                 + (f" and {d.n(r['target is the rule split'], '.0%')} the "
                                    f"rule split" if "target is the rule split" in r else "")
                                 + f" (it beat the question as is by "
                                 f"{d.n(r['mean gain of chosen samples'], '.2f')} on average; "
                                 f"format-valid samples {d.n(r['format-valid samples'], '.2f')})"
                                 for _, r in w.iterrows()) + ".")
    except QrlibError:
        pass
    try:
        k = d.t("07_tau_filter")
        parts.append("Curriculum filter (Eq. 7-8): kept "
                     + "; ".join(f"{r.retriever} {d.n(r['kept share'], '.2f')} "
                                 f"[{d.n(r.lo, '.2f')}, {d.n(r.hi, '.2f')}] of {int(r.questions)}"
                                 for _, r in k.iterrows()) + " training questions (ACQO keeps about half).")
    except QrlibError:
        pass
    rows = []
    for _, r in res.iterrows():
        rows.append([r.dataset, r.retriever, r.model, d.n(r["nDCG@10"]), d.n(r["R@10"]),
                     d.n(r["sub-queries"], ".2f"),
                     d.interval(r["ΔnDCG@10 vs raw"], r.lo, r.hi),
                     str(r["wins/losses"]), d.scale(r)])
    table = md_table(["test set", "retriever", "model", "nDCG@10", "R@10", "sub-queries",
                       "Δ nDCG@10 vs raw [95% CI]", "wins/losses", "training scale"], rows)
    verdicts = []
    if d.has("07_comparisons"):  # by column: every trained row against the raw question
        cmp = check_comparisons(d.t("07_comparisons"), "07_comparisons")
        for _, r in select(cmp, kind="trained", **{"baseline kind": "baseline"}).iterrows():
            verdicts.append(f"{r.dataset} / {r.retriever}: {r.method} {verdict(r.lo, r.hi)} "
                            f"the {r.baseline}")
    tail = ("\n\nPer test set and retriever: " + "; ".join(verdicts) + ". " if verdicts else "\n\n")
    tail += ("The interval is a 95% paired bootstrap over questions; the training scale "
             "(read from the runs' logs) is far below ACQO's (Qwen2.5-3B, 3 + 6 epochs on about "
             "half of HotpotQA's 90k training questions with BM25, ACQO App. A); `07_comparisons.md` compares ACQO "
             "with every other row"
             + (" and `07_vs_paper_table3.md` sets HotpotQA next to the paper."
                if d.has("07_vs_paper_table3") else
                "; HotpotQA, the setting of ACQO Table 3, is evaluated in `cpu-long`."))
    if d.has("12_comparisons"):  # ACQO Table 5's single-query baseline, notebook 12
        cmp = check_comparisons(d.t("12_comparisons"), "12_comparisons")
        for _, r in select(cmp, kind="trained", **{"baseline kind": "baseline"}).iterrows():
            tail += (f"\n\nThe single-query baseline at ACQO's budget (notebook 12, "
                     f"{cite('12_comparisons', '12_vanilla_results')}): {r.method} on "
                     f"{r.dataset} / {r.retriever}, {r.metric} {d.n(r.score)}, Δ vs "
                     f"{r.baseline} {d.interval(r['diff'], r.lo, r.hi)} ({d.scale(r)}): it "
                     f"{verdict(r.lo, r.hi)} the {r.baseline}.")
            rest = cmp[(cmp.dataset == r.dataset) & (cmp.retriever == r.retriever)
                       & (cmp.metric == r.metric) & (cmp["baseline kind"] != "baseline")]
            tail += "".join(f" {x.method} minus {x.baseline}: {d.interval(x['diff'], x.lo, x.hi)}."
                            for _, x in rest.iterrows())
    copiers = [r.model for _, r in res.iterrows()
               if not r.model.startswith(("raw", "rule", "untrained")) and r["sub-queries"] < 1.1]
    if copiers:
        tail += (" Trained rows that write about one sub-query per question ("
                 + ", ".join(copiers) + ") mostly give the question back unchanged: when few "
                 "training questions have a sampled split that beats the question, the cold "
                 "start teaches copying and GRPO then sees groups of identical rollouts.")
    return head + " ".join(parts) + "\n\n" + table + tail + "\n"


def _acqo_transfer(d: Doc) -> str:
    """ACQO without retraining (notebook 16): out of domain, cross-retriever, a reader."""
    return comparisons_section(
        d, "16_comparisons", "ACQO out of domain, across retrievers and end to end (notebook 16)",
        "07's adapters on each test set (out of domain where 06 did not train on it), searched "
        "with each retriever, and a local reader's EM / F1 from each row's top passages (ACQO "
        "Table 10's setting); every row minus the raw question, 95% paired bootstrap.")


def _acqo_ablation(d: Doc) -> str:
    """ACQO Table 5 (notebook 18): ACQO against each row with one component removed."""
    return comparisons_section(
        d, "18_comparisons", "ACQO's ablation, Table 5 (notebook 18)",
        "ACQO (Stage I + II, RSF) minus each row with one component removed, on 07's test "
        "questions: RRF instead of RSF (retrained; `18_ablation.md` names the reading), no "
        "Stage II (06's adapter), no decomposition (12's single-query RL); a positive Δ says "
        "the component helped. `18_vs_paper.md` sets the differences beside Table 5's.",
        baseline_kind="trained")


#: The sibling profile that trains ACQO with the dense retriever (``params/cpu-acqo-dense.yaml``).
DENSE_VARIANT = "-acqo-dense"
_MAIN = "ACQO: Stage I+II ({}-trained)"


def _cell(d: Doc, table: Any, searched: str, trained: str, source: str | None) -> str:
    """``+0.012 [+0.003, +0.021]`` of ACQO trained with ``trained`` searched with
    ``searched`` on 2Wiki against the raw question, or why the cell is empty."""
    if table is None:
        return "not run"
    sel = table[(table.method == _MAIN.format(trained)) & (table.retriever == searched)
                & (table["baseline kind"] == "baseline") & (table.metric == "nDCG@10")
                & (table.dataset == "2wikimultihopqa-mini")]
    if len(sel) != 1:
        return "not run"
    r = sel.iloc[0]
    if source is None:
        return d.interval(r["diff"], r.lo, r.hi) + f" ({verdict(r.lo, r.hi)})"
    vals = [d.n(r[c], signed=True, derived=source) for c in ("diff", "lo", "hi")]
    return f"{vals[0]} [{vals[1]}, {vals[2]}] ({verdict(r.lo, r.hi)})"


def _acqo_retrievers(d: Doc) -> str:
    """ACQO Fig. 5: the decomposer trained with one retriever and searched with each, on the
    2Wiki test split: BM25-trained from 07 (BM25) and 16 (dense), dense-trained from the
    sibling profile ``<profile>-acqo-dense`` (its 07). Empty until 07 has run."""
    from qrlib.core.io import read_table

    if not d.has("07_comparisons"):
        return ""
    own = check_comparisons(d.t("07_comparisons"), "07_comparisons")
    cited = ["07_comparisons"]
    transfer = None
    if d.has("16_comparisons"):
        transfer = check_comparisons(d.t("16_comparisons"), "16_comparisons")
        cited.append("16_comparisons")
    variant = d.root / "tables" / f"{d.profile}{DENSE_VARIANT}" / "07_comparisons.csv"
    dense = check_comparisons(read_table(variant), str(variant)) if variant.exists() else None
    src = f"tables/{d.profile}{DENSE_VARIANT}/07_comparisons.csv"
    rows = [["BM25", _cell(d, own, "bm25", "bm25", None), _cell(d, transfer, "dense", "bm25", None)],
            ["MiniLM (dense)", _cell(d, dense, "bm25", "dense", src),
             _cell(d, dense, "dense", "dense", src)]]
    note = ("" if dense is not None else
            f" The dense-trained row has not run yet (`params/{d.profile}{DENSE_VARIANT}.yaml`, "
            "`--only 06 --only 07`).")
    return (f"## ACQO across training and search retrievers, Fig. 5 ({cite(*cited)})\n\n"
            "ACQO (Stage I + II) minus the raw question in nDCG@10 on the 2Wiki test split, "
            "95% paired bootstrap, by the retriever that rewarded training (rows) and the one "
            "that searches at test (columns): the BM25-trained decomposer from notebooks 07 "
            "and 16, the dense-trained one from the sibling profile "
            f"`{d.profile}{DENSE_VARIANT}` (`tables/{d.profile}{DENSE_VARIANT}/`)." + note
            + "\n\n" + md_table(["trained with", "searched with BM25", "searched with dense"],
                                rows) + "\n")


#: ``(order, title, function)``, in RESULTS.md's order (:mod:`qrlib.workbook.resultsdoc`).
SECTIONS: list[Section] = [
    (30, "fusion", _fusion),
    (70, "acqo", _acqo),
    (80, "acqo transfer", _acqo_transfer),
    (85, "acqo retrievers", _acqo_retrievers),
    (90, "acqo ablation", _acqo_ablation)]
