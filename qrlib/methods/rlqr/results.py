"""RESULTS.md sections of RL-QR: query synthesis and the annotation-free rewriters
(notebook 14). Assembled by :mod:`qrlib.workbook.results` (entry-point group
``qrlib.results``)."""
from __future__ import annotations

from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.stats import verdict
from qrlib.workbook.resultsdoc import Doc, Section, cite, md_table


def _rlqr(d: Doc) -> str:
    """RL-QR (notebook 14): synthesis and the annotation-free rewriters against the raw
    query, by column of ``14_comparisons``. Empty until 14 has run in this profile."""
    if not (d.has("14_rlqr_results") and d.has("14_comparisons")):
        return ""
    syn, res = d.t("14_synthesis"), d.t("14_rlqr_results")
    cmp = check_comparisons(d.t("14_comparisons"), "14_comparisons")
    out = [f"## RL-QR (notebook 14: {cite('14_synthesis', '14_rlqr_results', '14_comparisons')})\n"]
    ci = {(r.dataset, r.retriever, r.method): r for _, r in select(cmp, metric="nDCG@3").iterrows()}
    rows = []
    for _, r in res.iterrows():
        c = ci.get((r.dataset, r.retriever, r.model))
        rows.append([r.dataset, r.retriever, r.model, d.n(r["nDCG@3"]),
                     d.interval(c["diff"], c.lo, c.hi) if c is not None else "-",
                     f"{d.n(r['query words mean'], '.1f')} ± {d.n(r['query words std'], '.1f')}",
                     d.n(r.modified, ".2f"), d.scale(r)])
    trained = select(cmp, kind="trained", metric="nDCG@3")
    out.append("\nQuery synthesis (Alg. 1): "
               + "; ".join(f"{r.dataset}: {int(r.usable)} of {int(r.documents)} documents gave "
                           f"a usable question ({d.n(r['usable share'], '.0%')}), BM25 ranks the "
                           f"source first for {d.n(r['bm25 source@1'], '.0%')}"
                           for _, r in syn.iterrows() if "bm25 source@1" in r) + ".")
    out.append(" Rewriters trained only on synthetic queries, tested on the real ones "
               "(RL-QR Table 2's layout, nDCG@3):\n\n"
               + md_table(["dataset", "retriever", "model", "nDCG@3", "Δ vs raw [95% CI]",
                            "query words", "modified", "training scale"], rows))
    verdicts = [f"{r.dataset} / {r.retriever}: RL-QR {verdict(r.lo, r.hi)} the raw query"
                for _, r in trained.iterrows()]
    out.append("\n\n" + "; ".join(verdicts) + ". The paper trains Qwen3-4B to 14B on GPUs; "
               "here a 0.5B policy or smaller on 2 CPU cores (the scale column says how much).")
    return "".join(out) + "\n"


#: ``(order, title, function)``, in RESULTS.md's order (:mod:`qrlib.workbook.resultsdoc`).
SECTIONS: list[Section] = [(110, "rl-qr", _rlqr)]
