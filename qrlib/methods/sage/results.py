"""RESULTS.md sections of SAGE: best-of-N, strategy-guided training and the CRS finding
(notebook 08), and the exploration ablation (15). Assembled by
:mod:`qrlib.workbook.results` (entry-point group ``qrlib.results``)."""
from __future__ import annotations

from qrlib.eval import published
from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.stats import verdict
from qrlib.workbook.resultsdoc import Doc, Section, cite, md_table


def _sage(d: Doc) -> str:
    """SAGE (notebook 08): best-of-N curves, the trained reward variants against the raw
    query and each other, and the CRS finding."""
    if not d.has("08_sage_results"):
        return ""
    out = [f"## SAGE (notebook 08: "
           f"{cite('08_best_of_n', '08_strategy_best_share', '08_sage_results', '08_comparisons' if d.has('08_comparisons') else '08_sage_pairwise')})\n"]
    b, s = d.t("08_best_of_n"), d.t("08_strategy_best_share")
    nmax = int(b.N.max())
    fams = list(dict.fromkeys(b.family))
    beats = s.groupby(["dataset", "retriever", "family"])["family beats raw"].first()
    rows = []
    for (name, kind), g in b.groupby(["dataset", "retriever"], sort=False):
        g = g.set_index(["family", "N"])["best-of-N nDCG@10"]
        raw = b[(b.dataset == name) & (b.retriever == kind)]["raw nDCG@10"].iloc[0]
        rows.append([name, kind, d.n(raw)] + [
            f"{d.n(g[f, 1])} / {d.n(g[f, nmax])} ({d.n(beats[name, kind, f], '.0%')})"
            for f in fams])
    q = int(b.queries.iloc[0])
    out.append(f"\nStrategy-guided prompting (SAGE Sec. 3.1): nDCG@10 of one sampled rewrite "
               f"(best-of-1) and of the best of {nmax} chosen with the qrels (an oracle upper "
               f"bound), and in brackets the share of queries where some rewrite beats the raw "
               f"query; {q} test queries per dataset:\n\n"
               + md_table(["dataset", "retriever", "raw query"]
                           + [f"{f}: 1 / {nmax}" for f in fams], rows))
    if d.has("08_best_of_n_comparisons"):  # do the families separate?
        fc = select(check_comparisons(d.t("08_best_of_n_comparisons"), "08_best_of_n_comparisons"),
                    **{"baseline kind": "untrained"})
        rows = [[r.dataset, r.retriever, r.method, r.baseline, d.interval(r["diff"], r.lo, r.hi),
                 verdict(r.lo, r.hi)] for _, r in fc.iterrows()]
        out.append("\n\nThe families against each other, per-query best-of-N paired over the "
                   "test queries (`08_best_of_n_comparisons.md`, 95% paired bootstrap):\n\n"
                   + md_table(["dataset", "retriever", "family", "against", "Δ [95% CI]",
                                "verdict"], rows))
    res = d.t("08_sage_results")
    rows = [[r.dataset, r.retriever, r.model, d.n(r["nDCG@10"]),
             d.interval(r["ΔnDCG@10 vs raw"], r.lo, r.hi), d.n(r.modified, ".2f"),
             d.n(r["gen tokens"], ".1f"), d.scale(r)] for _, r in res.iterrows()]
    out.append("\n\nSAGE training (Sec. 2.3-2.5) on the test queries, with the copy penalty "
               "(Eq. 3); the exploration ablation (Table 3) is notebook 15, below:\n\n"
               + md_table(["dataset", "retriever", "model", "nDCG@10",
                            "Δ vs raw [95% CI]", "modified", "tokens", "training scale"], rows))
    if d.has("08_comparisons"):
        pw = select(check_comparisons(d.t("08_comparisons"), "08_comparisons"), paper="sage",
                    **{"baseline kind": "trained"})
        pw = pw.rename(columns={"method": "a", "baseline": "b", "diff": "Δ (a-b)"})
    else:  # a run published before 08 wrote the comparison schema
        pw = d.t("08_sage_pairwise")
    if len(pw):
        out.append("\n\nAgainst each other (95% paired bootstrap): "
                   + "; ".join(f"{r.a} − {r.b} {d.interval(r['Δ (a-b)'], r.lo, r.hi)}"
                               for _, r in pw.iterrows()) + ".")
        by = {(r.a, r.b): r for _, r in pw.iterrows()}
        need = [("SAGE-SCS", "SAGE Direct"), ("SAGE-CRS", "SAGE Direct"),
                ("SAGE Direct", "unguided RL (DeepRetrieval-style)")]
        if all(k in by for k in need):
            holds = all(by[k].lo > 0 for k in need)
            out.append(" The paper's ordering (SCS, CRS > Direct > unguided) "
                       + ("holds here with intervals above 0." if holds else
                          "is not shown here: not every one of these intervals lies above 0."))
    if d.has("08_crs_readings"):  # CRS trains as Direct under GRPO
        crs = d.t("08_crs_readings")
        g = crs[crs["CRS reading"] == "group"]
        other = crs[crs["CRS reading"] != "group"]
        out.append(f" CRS subtracts a group-constant baseline, which GRPO's group-mean centring "
                   f"removes, so CRS trains exactly as Direct: on the sampled groups "
                   f"(`08_crs_readings.md`) their update weights differ by at most "
                   f"{d.n(float(g['max |A_CRS - A_Direct|'].max()), '.1g')}; only a reading "
                   f"without the centring or with a per-strategy baseline changes them (up to "
                   f"{d.n(float(other['max |A_CRS - A_Direct|'].max()), '.2f')}).")
    if d.has("15_sage_ablation") and d.has("15_comparisons"):  # Table 3, notebook 15
        abl = d.t("15_sage_ablation").set_index(["dataset", "model"])
        cmp = select(check_comparisons(d.t("15_comparisons"), "15_comparisons"),
                     kind="trained", **{"baseline kind": "baseline"})
        rows = [[r.dataset, r.method, d.n(r.score),
                 d.interval(r["diff"], r.lo, r.hi),
                 d.n(abl.loc[(r.dataset, r.method), "modified"], ".2f"), d.scale(r)]
                for _, r in cmp.iterrows()]
        t3 = published.table("sage", "Table 3")
        t3 = t3[t3.column == "modification rate"]
        out.append(f"\n\nExploration ablation (SAGE Table 3, notebook 15: "
                   f"{cite('15_sage_ablation', '15_comparisons')}), SCS with the conservative "
                   f"or the proactive prompt and copy penalties p; the paper's modification "
                   f"rates: " + "; ".join(f"{r.row} {d.n(r.value, '.3g')}" for _, r in t3.iterrows())
                   + ":\n\n"
                   + md_table(["dataset", "model", "nDCG@10", "Δ vs raw [95% CI]", "modified",
                                "training scale"], rows))
    return "".join(out) + "\n"


#: ``(order, title, function)``, in RESULTS.md's order (:mod:`qrlib.workbook.resultsdoc`).
SECTIONS: list[Section] = [(100, "sage", _sage)]
