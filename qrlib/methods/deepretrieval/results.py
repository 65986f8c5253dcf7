"""RESULTS.md sections of DeepRetrieval: RL training (notebooks 05 and 10), beyond BEIR
(11), SQL database search (13) and trained evidence seeking (17). Assembled by
:mod:`qrlib.workbook.results` (entry-point group ``qrlib.results``)."""
from __future__ import annotations

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.stats import verdict
from qrlib.workbook.profiles import load_profile
from qrlib.workbook.resultsdoc import Doc, Section, cite, comparisons_section, md_table


def _rl(d: Doc) -> str:
    ts = d.t("05_training_summary")
    te = d.t("05_test_results")
    prof = load_profile(d.root / "params" / f"{d.profile}.yaml", validate=False)
    p05 = prof["notebooks"].get("05_vanilla_rl", {})
    rows = []
    for _, r in ts.iterrows():
        rows.append([r["run"], f"{d.n(r.reward_first_quarter, '.2f')} → {d.n(r.reward_last_quarter, '.2f')}",
                     f"{d.n(r.format_first_quarter, '.2f')} → {d.n(r.format_last_quarter, '.2f')}",
                     f"{d.n(r.gain_first_half, '.2f', signed=True)} → {d.n(r.gain_second_half, '.2f', signed=True)}",
                     d.n(r.s_per_step, '.0f')])
    head = (f"## RL training (notebooks 05 and 10: {cite('05_training_summary', '05_test_results', '05_comparisons', '10_latency', '10_generated_tokens')})\n\n"
            f"`{p05.get('model', '?')}` with LoRA, GRPO, {p05.get('train_steps', '?')} steps × "
            f"{p05.get('prompts_per_step', 1)} claims × {p05.get('num_generations', '?')} "
            f"rollouts per retriever, reward nDCG@"
            f"{p05.get('reward_k', '?')} with a format penalty (DeepRetrieval Table 8 style), "
            f"SciFact train claims in the mode of each run name:\n\n"
            + md_table(["run", "mean reward, first → last quarter", "format-valid, first → last quarter",
                         "gain over raw claim, first → second half", "s/step"], rows))
    rows = []
    for kind in dict.fromkeys(te.retriever):
        sub = te[te.retriever == kind].set_index("method")
        raw = sub.loc["raw"] if "raw" in sub.index else None
        unt = sub[sub.index.str.startswith("untrained")]
        tr = sub[sub.index.str.startswith("trained")]
        for meth in tr.index:
            rows.append([kind, d.n(raw["nDCG@10"]) if raw is not None else "–",
                         d.n(unt["nDCG@10"].iloc[0]) if len(unt) else "–",
                         d.n(tr.loc[meth, "nDCG@10"]),
                         f"{d.n(raw['R@100']) if raw is not None else '–'} / {d.n(tr.loc[meth, 'R@100'])}",
                         d.n(tr.loc[meth, "modified"], ".2f"), d.scale(tr.loc[meth])])
    body = ("\n\nTest claims (" + (str(p05.get("n_test_queries")) if p05.get("n_test_queries") else "all")
            + " SciFact test claims):\n\n"
            + md_table(["retriever", "raw claim nDCG@10", "untrained nDCG@10", "trained nDCG@10",
                         "R@100 raw / trained", "modification rate", "training scale"], rows))
    src = "05_comparisons" if d.has("05_comparisons") else "10_comparisons"
    if d.has(src):
        vs = select(check_comparisons(d.t(src), src), kind="trained",
                    dataset="scifact", **{"baseline kind": "baseline"})
        sig = [r for _, r in vs.iterrows() if r.lo > 0]
        verdict = (("**No trained rewrite beats the raw claim with a 95% paired-bootstrap "
                    f"interval that excludes 0** (`{src}.md`): "
                    if not sig else "**Trained rewrites that beat the raw claim with a 95% "
                    f"paired-bootstrap interval excluding 0** (`{src}.md`): "
                    + ", ".join(f"{r.retriever} ({r.method})" for r in sig) + "; all: ")
                   + "; ".join(f"{r.retriever} {d.interval(r['diff'], r.lo, r.hi)}"
                               for _, r in vs.iterrows()) + ". ")
    else:
        verdict = "Neither 05 nor 10 has written its comparison table in this run. "
    body += ("\n\n" + verdict
             + "DeepRetrieval trains a 3B policy for thousands of GPU steps; the scale column "
               "says what was trained here, and the reward gain over the raw claim's own score "
               "(`05_gain_over_raw.png`) is the learning curve to watch. "
               "`params/cpu-long.yaml` trains longer and adds NFCorpus.")
    lat = d.t("10_latency")
    tok = d.t("10_generated_tokens")
    gen = lat[lat.generation_ms > 0]
    a6 = d.pub("acqo", "Table 6a", wide=True)
    a8 = d.pub("acqo", "Table 8", wide=True)
    body += ("\n\nLatency per query (ACQO Table 6a layout, `10_latency.md`): generation "
             f"{d.rng(gen.generation_ms, '.0f', what='gen')} ms (batched greedy decoding on this CPU), "
             f"retrieval {d.rng(lat[lat.retriever == 'bm25'].retrieval_ms, '.2f', what='bm25')} ms for BM25 and "
             f"{d.rng(lat[lat.retriever == 'dense'].retrieval_ms, '.1f', what='dense')} ms for MiniLM "
             "(query encoding included); single-query methods have no fusion step. ACQO reports "
             f"{d.n(a6.loc['ACQO', 'generation'], '.0f')} ms generation, "
             f"{d.n(a6.loc['ACQO', 'retrieval'], '.0f')} ms retrieval and "
             f"{d.n(a6.loc['ACQO', 'rerank'], '.0f')} ms fusion on a GPU. Generated tokens per "
             f"query: {d.rng(tok[tok.method != 'raw'].mean_tokens, '.1f', what='tok')} (ACQO Table 8: "
             f"{d.n(a8.loc['ACQO (BM25)', 'total'], '.0f')} with BM25, "
             f"{d.n(a8.loc['ACQO (ANCE)', 'total'], '.0f')} with ANCE).")
    try:
        fr = d.t("10_generation_timing")
        body += (f" Re-timed alone, the trained adapters generate in "
                 f"{d.rng(fr.generation_ms_per_query, '.0f', what='fresh')} ms per query, one "
                 f"query at a time or all in one batch (`10_generation_timing.md`).")
    except QrlibError:
        pass
    return head + body + "\n"


def _audit(d: Doc) -> str:
    """DeepRetrieval's published BM25 baselines against Lucene with and without the
    released code's query prefix (notebook 11), and evidence-seeking H@N of the raw question."""
    if not d.has("11_baseline_audit"):
        return ""
    a = d.t("11_baseline_audit")
    out = [f"## DeepRetrieval beyond BEIR (notebook 11: {cite('11_baseline_audit')})\n"]
    if "Lucene contents:" in a.columns:
        rows = [[r.dataset, d.n(r["published BM25"]), d.n(r["Lucene plain"]),
                 d.n(r["Lucene contents:"]), d.n(r["Lucene contents:, released eval"]),
                 d.n(r["bm25s"])] for _, r in a.iterrows()]
        out.append("BM25 nDCG@10 on the test sets: DeepRetrieval Table 2's published baseline, "
                   "Lucene (Pyserini 0.22.1) with plain queries, with the `contents:` prefix of the "
                   "released search code (`code/src/Lucene/<dataset>/search.py` in "
                   "pat-jj/DeepRetrieval), prefix plus the released evaluation, and bm25s:\n\n"
                   + md_table(["dataset", "published", "Lucene plain", "Lucene contents:",
                                "contents: + released eval", "bm25s"], rows)
                   + "\n\nA finding about released code, not a claim about intent: the prefix "
                     "reproduces the low published NFCorpus baseline; see notebook 11 for what it "
                     "does and does not explain.")
    else:
        out.append("Lucene (Pyserini) was not installed in this run; bm25s nDCG@10: "
                   + ", ".join(f"{r.dataset} {d.n(r['bm25s'])}" for _, r in a.iterrows()) + ".")
    try:
        e = d.t("11_evidence_raw")
        ours = e[e.source.str.startswith("ours")]
        out.append("\n\nEvidence-seeking retrieval (`11_evidence_raw.md`): the raw question with "
                   "bm25s finds a passage containing the answer within the top 1 / 5 / 20 for "
                   + "; ".join(f"{r.source.split(': ')[1].split(' ')[0]} "
                               f"{d.n(r['H@1'])} / {d.n(r['H@5'])} / {d.n(r['H@20'])}"
                               for _, r in ours.iterrows())
                   + " of the span-answerable test questions (pooled corpora, not the paper's "
                     "21M passages).")
    except QrlibError:
        pass
    return "\n".join(out) + "\n"


def _sql(d: Doc) -> str:
    """DeepRetrieval's SQL database search (notebook 13): Table 3's rows on Spider dev's
    held-out databases, each against zero-shot by column of ``13_comparisons``. Empty until
    13 has run in this profile (the gaps section then names it)."""
    if not (d.has("13_sql_results") and d.has("13_comparisons")):
        return ""
    res = d.t("13_sql_results")
    cmp = check_comparisons(d.t("13_comparisons"), "13_comparisons").set_index("method")
    split = d.t("13_split").set_index("part") if d.has("13_split") else None
    head = (f"## DeepRetrieval's SQL database search (notebook 13: "
            f"{cite('13_split', '13_sql_results', '13_comparisons')})\n\n")
    where = ""
    if split is not None:
        where = (f"Spider dev split by database: {int(split.loc['train', 'databases'])} training "
                 f"databases ({int(split.loc['train', 'used'])} training questions used) and "
                 f"{int(split.loc['test', 'databases'])} test databases "
                 f"({int(split.loc['test', 'used'])} test questions). ")
    rows = []
    for _, r in res.iterrows():
        c = cmp.loc[r.model] if r.model in cmp.index else None
        rows.append([r.model, d.n(r["execution accuracy"]),
                     " / ".join(d.n(r[lv], ".2f") if r[lv] == r[lv] else "–"
                                for lv in ("easy", "medium", "hard", "extra")),
                     d.interval(c["diff"], c.lo, c.hi) if c is not None else "–", d.scale(r)])
    table = md_table(["row", "execution accuracy", "easy / medium / hard / extra",
                       "Δ vs zero-shot (nothink) [95% CI]", "training scale"], rows)
    trained = cmp[cmp["kind"] == "trained"]
    tail = "".join(f" {m} {verdict(r.lo, r.hi)} zero-shot without reasoning."
                   for m, r in trained.iterrows())
    return (head + where + "Execution accuracy as Spider's evaluation defines it, per Spider "
            "hardness level; every generated statement ran in the read-only, time-limited "
            "sandbox.\n\n" + table + "\n\n" + tail.strip() + "\n")


def _evidence(d: Doc) -> str:
    """DeepRetrieval's evidence seeking with trained rewriters (notebook 17)."""
    return comparisons_section(
        d, "17_comparisons", "DeepRetrieval evidence seeking, trained (notebook 17)",
        "H@N of each rewriter's rewrite and of the rewrite with its injected answer strings "
        "removed (App. E, string match) against the raw question; `17_evidence.md` has the "
        "injection rates.")


#: ``(order, title, function)``, in RESULTS.md's order (:mod:`qrlib.workbook.resultsdoc`).
SECTIONS: list[Section] = [
    (60, "rl", _rl),
    (120, "beyond BEIR", _audit),
    (130, "sql", _sql),
    (140, "evidence", _evidence)]
