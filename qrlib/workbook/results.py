"""RESULTS.md, generated from the tables of one profile: ``python -m qrlib results``.

Every number in RESULTS.md is formatted here from ``tables/<profile>/*.csv``, from the
papers' published numbers (:mod:`qrlib.eval.published`), from the profile's parameters
(``params/<profile>.yaml``) or from ``tables/<profile>/run_timings.csv`` (the runner's
timings); numbers computed from those (a ratio, a sum, a range) are declared with the
formula that produced them. The explanations (why a number differs from a paper) are
template text without numbers. ``tests/test_results.py`` checks that the committed file is
what this module writes and that every number in it is found in a cited source.

A section whose table is missing (a partial run, a notebook that does not exist yet)
says so instead of failing.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrlib.core.io import REPO_ROOT, atomic_write, read_table
from qrlib.core.errors import QrlibError
from qrlib.eval import published
from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.scale import missing_scale
from qrlib.methods.bandits import bandits as B
from qrlib.eval.stats import verdict
from qrlib.workbook.freshness import profile_status
from qrlib.workbook.profiles import load_profile, long_notebooks
from qrlib.workbook.publish import timing_table
from qrlib.workbook import scoreboard

# ---------------------------------------------------------------------------- numbers
# References that contain digits but are not results (Table 4, Eq. 1-2, issue 10, ...)
_STRUCTURAL = re.compile(
    r"(?:\b(?:issues?|notebooks?|Tables?|Eqs?\.|Figures?|Figs?\.|Sec\.|Secs\.|Alg\.|Algorithms?|"
    r"App\.|Appendix|Algorithm)\s+[A-Z]?\d+(?:\.\d+)?[a-z]?"
    r"(?:\s*(?:[-–,]|and|&)\s*[A-Z]?\d+(?:\.\d+)?[a-z]?)*"
    r"|\b\d{2}'s\b)")  # "07's adapters": a notebook, not a number
_CODE = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\]\([^)]*\)")
# a number not glued to letters (Qwen2.5, 0.5B, nDCG@10, MiniLM-L6 are names, not numbers)
_NUMBER = re.compile(r"(?<![\w@.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:x(?!\w))?(?![\w@]|\.\d)(\s?%)?")


@dataclass(frozen=True)
class Number:
    text: str        # as written
    value: float     # parsed (percent sign: divided by 100 as an alternative in matches)
    decimals: int
    percent: bool


def numbers_in(text: str) -> list[Number]:
    """Every result-like number in a markdown text (code spans, links and references to
    tables/equations/issues/notebooks are skipped)."""
    text = _CODE.sub(" ", text)
    text = _LINK.sub("]", text)
    text = re.sub(r"([A-Za-z])-(?=\d)", r"\1_", text)   # top-10, L-6: names, not numbers
    text = _STRUCTURAL.sub(" ", text)
    out = []
    for m in _NUMBER.finditer(text):
        whole, frac, pct = m.group(1), m.group(2), m.group(3)
        v = float(whole.replace(",", "") + ("." + frac if frac else ""))
        out.append(Number(m.group(0).strip().replace("x", ""), v, len(frac or ""), bool(pct)))
    return out


def matches(n: Number, value: float) -> bool:
    """Is ``n`` (as written, with its decimals) a rounding of ``value`` (or of 100x it
    for a percentage, or of its absolute value)?"""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    tol = 0.5 * 10 ** (-n.decimals) + 1e-9
    cands = [abs(value)]
    if n.percent:
        cands.append(abs(value) * 100)
    return any(abs(c - n.value) <= tol for c in cands)


def table_values(path: Path) -> list[float]:
    """Every number in a table: numeric cells, numbers inside text cells ("0.653 ± 0.012",
    "12/12 policies") and in the Markdown caption."""
    vals: list[float] = []
    df = read_table(path)
    for col in df.columns:
        s = df[col]
        if s.dtype.kind in "fiub":
            vals += [float(x) for x in s.dropna()]
        else:
            for x in s.dropna().astype(str):
                vals += [float(t) for t in re.findall(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", x)]
    md = path.with_suffix(".md")
    if md.exists():
        text = "\n".join(ln for ln in md.read_text().split("\n") if not ln.startswith("`qrlib:"))
        vals += [float(t) for t in re.findall(r"\d+(?:\.\d+)?", text.strip().split("\n\n")[-1])]
    return vals


# ---------------------------------------------------------------------------- document
@dataclass
class Doc:
    profile: str
    root: Path
    cited: list[str] = field(default_factory=list)          # table stems read
    papers: list[str] = field(default_factory=list)         # published papers read
    derived: list[tuple[str, str]] = field(default_factory=list)  # (text, formula)
    _tables: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)    # notebook -> freshness.Status
    long: list[str] = field(default_factory=list)           # the profile's long set

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables" / self.profile

    def t(self, name: str):
        """Read ``tables/<profile>/<name>.csv`` (and cite it)."""
        if name not in self._tables:
            path = self.tables_dir / f"{name}.csv"
            if not path.exists():
                raise QrlibError(f"tables/{self.profile}/{name}.csv is missing")
            self._tables[name] = read_table(path)
            if name not in self.cited:
                self.cited.append(name)
        return self._tables[name]

    def has(self, name: str) -> bool:
        """Whether this profile wrote ``tables/<profile>/<name>.csv``."""
        return (self.tables_dir / f"{name}.csv").exists()

    def interval(self, diff: float, lo: float, hi: float) -> str:
        """``+0.027 [+0.018, +0.038]``, each number sourced like :meth:`n`."""
        return (f"{self.n(diff, signed=True)} [{self.n(lo, signed=True)}, "
                f"{self.n(hi, signed=True)}]")

    def scale(self, r: Any) -> str:
        """A row's training scale (:data:`qrlib.eval.scale.SCALE_COLUMNS`): ``"64 RL + 24 SFT
        steps, 200 q, 1,100 rollouts, 31 RL min"``, ``"24 SFT steps, 55 q"``, ``"untrained"``,
        or ``–`` for a table written before it carried the scale."""

        if missing_scale(list(r.index)):
            return "–"
        if not (r["RL steps"] or r["SFT steps"]):
            return "untrained" if r["policy"] != "-" else "no model"
        if not r["RL steps"]:  # a warm start alone: its minutes are not in any RL log
            return f"{int(r['SFT steps'])} SFT steps, {int(r['train queries'])} q"
        steps = f"{int(r['RL steps'])} RL" + (f" + {int(r['SFT steps'])} SFT"
                                               if r["SFT steps"] else "")
        flag = r.get("valid flag")  # a trained row whose test outputs are mostly malformed
        flag = (f"; **flagged: test valid {self.n(r['test valid'], '.2f')}, training "
                f"{self.n(r['train valid'], '.2f')}**" if isinstance(flag, str) and flag else "")
        return (f"{steps} steps, {int(r['train queries'])} q, {int(r['rollouts']):,} rollouts, "
                f"{self.n(r['train min'], '.0f')} RL min{flag}")

    def pub(self, paper: str, table: str, **kw):

        if paper not in self.papers:
            self.papers.append(paper)
        return published.table(paper, table, **kw)

    def n(self, value: float, fmt: str = ".3f", *, derived: str | None = None,
          signed: bool = False) -> str:
        """Format ``value``; ``derived`` names the formula when the number is computed
        from sources rather than read from one."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        s = format(value, ("+" if signed else "") + fmt)
        if derived:
            self.derived.append((s.lstrip("+-"), derived))
        return s.replace("-", "−") if signed or value < 0 else s

    def rng(self, values, fmt: str = ".3f", *, what: str) -> str:
        vals = [float(v) for v in values if v == v]
        lo, hi = min(vals), max(vals)
        a, b = self.n(lo, fmt), self.n(hi, fmt)
        return a if a == b else f"{a}–{b}"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _cite(*names: str) -> str:
    return ", ".join(f"`{n}.md`" for n in names)


# ---------------------------------------------------------------------------- sections
def _intro(d: Doc) -> str:
    return (f"# Measured results (profile `{d.profile}`)\n\n"
            f"> Generated by `python -m qrlib results --profile {d.profile}` from "
            f"`tables/{d.profile}/` (and, for the papers' values, `qrlib/methods/<paper>/published.yaml`); "
            f"do not edit by hand. The runner rewrites it at the end of every `{d.profile}` run, "
            f"and `tests/test_results.py` checks that every number below is found in the table "
            f"a section cites. Executed notebooks with all outputs: "
            f"`notebooks/executed/{d.profile}/`.\n\n"
            "Our data are the offline BEIR-layout copies described in the README (full SciFact "
            "and NFCorpus test splits; pooled-paragraph subsets of HotpotQA and "
            "2WikiMultihopQA), our models are small (MiniLM-L6 encoder; Qwen2.5-Coder-0.5B and "
            "SmolLM2-135M policies) and our training budgets are CPU minutes, not GPU-days: "
            "gaps to the papers are expected, and each section says where they come from.\n")


def _baselines(d: Doc) -> str:
    b = d.t("02_baselines").set_index(["dataset", "retriever"])
    ag = d.t("02_bm25_agreement")
    sp = d.t("02_speed").set_index(["dataset", "retriever"])
    st = d.t("01_dataset_stats").set_index(["dataset", "split"])
    flat = d.pub("references", "BM25 flat", wide=True)
    mf = d.pub("references", "BM25 multifield", wide=True)
    mteb = d.pub("references", "MiniLM MTEB", wide=True)

    def get(ds, r, col):
        return b.loc[(ds, r), col] if (ds, r) in b.index else float("nan")

    rows = []
    for ds in dict.fromkeys(b.index.get_level_values(0)):
        ref_key = "hotpotqa" if ds.startswith("hotpotqa") else ds
        ref = (f"{d.n(flat.loc[ref_key, 'nDCG@10'], '.3f')} / {d.n(mf.loc[ref_key, 'nDCG@10'], '.3f')}"
               if ref_key in flat.index else "")
        if ds.startswith("hotpotqa") and ref:
            ref += " (full corpus)"
        rows.append([ds, d.n(get(ds, "bm25", "nDCG@10")), ref, d.n(get(ds, "bm25-ref", "nDCG@10")),
                     d.n(get(ds, "dense", "nDCG@10")),
                     d.n(mteb.loc[ds, "nDCG@10"]) if ds in mteb.index else "",
                     d.n(get(ds, "bm25", "R@100"))])
    table = _md_table(["dataset (test)", "BM25 (bm25s) nDCG@10", "Pyserini BM25 flat / multifield",
                       "rank-bm25 nDCG@10", "MiniLM dense nDCG@10", "MTEB (MiniLM)", "BM25 R@100"],
                      rows)
    diffs = ag["nDCG@10 diff"].abs()
    text = [f"## Retrieval baselines (notebook 02: {_cite('02_baselines', '02_bm25_agreement', '02_speed', '02_hnsw_vs_flat')})\n",
            table, "",
            "BM25 is k1 = 1.2, b = 0.75 with lower-casing, English stopwords and the Snowball "
            "(Porter2) stemmer over title and text concatenated (\"flat\"); Pyserini's regressions "
            "use Lucene's Porter stemmer and Lucene's default k1, b, the remaining source of the "
            "small gaps to its numbers (`qrlib/eval/published/references.yaml`). Empty cells: no "
            "dense index or no published value for that collection in this profile."]
    text.append(f"\nbm25s and rank-bm25 fed identical tokens differ by {d.rng(diffs, '.3f', what='|diff|')} "
                f"nDCG@10 with a mean top-10 overlap of {d.rng(ag['mean top-10 overlap'], '.2f', what='overlap')}. ")
    parts = []
    for ds in ("scifact", "nfcorpus"):
        if (ds, "bm25") in sp.index:
            parts.append(f"{d.n(sp.loc[(ds, 'bm25'), 'speed-up vs rank_bm25'], '.1f')}x on {ds}")
    if parts:
        qw = st.loc[("nfcorpus", "test"), "query words (mean)"] if ("nfcorpus", "test") in st.index else None
        text[-1] += (f"In the same notebook run bm25s is {' and '.join(parts)} faster than "
                     "rank-bm25" + (f" (NFCorpus queries average {d.n(qw, '.1f')} words, so "
                                       "there is little per-query work to vectorise; "
                                       f"{_cite('01_dataset_stats')})" if qw is not None else "")
                     + "; `benchmarks/bench_retrieval.py` measures the ratio on an idle machine.")
    try:
        h = d.t("02_hnsw_vs_flat").iloc[0]
        text.append(f"\nHNSW (ACQO App. A.1 settings) recovers {d.n(h['top-10 recall vs flat'], '.4f')} of "
                    f"the exact top-10 on {h['dataset']}, nDCG@10 {d.n(h['nDCG@10 HNSW'], '.4f')} vs "
                    f"{d.n(h['nDCG@10 flat'], '.4f')} for the flat index.")
    except QrlibError:
        pass
    if ("hotpotqa-mini", "bm25") in b.index and ("hotpotqa-mini+pool", "bm25") in b.index:
        drop = get("hotpotqa-mini", "bm25", "nDCG@10") - get("hotpotqa-mini+pool", "bm25", "nDCG@10")
        text.append(f"\nThe pooled multi-hop corpora are easy: each question's own distractor "
                    f"paragraphs make up most of the corpus, so BM25 scores well above its full-"
                    f"corpus HotpotQA value; pooling the other Wikipedia sets as extra distractors "
                    f"lowers BM25 nDCG@10 by "
                    f"{d.n(drop, '.3f', derived='02_baselines: hotpotqa-mini bm25 nDCG@10 - hotpotqa-mini+pool bm25 nDCG@10')}.")
    return "\n".join(text) + "\n"


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
    t = (f"## Fusion of sub-query lists (notebook 03: {_cite('03_fusion_metrics', '03_fusion_ties', '03_fusion_timing')})\n\n"
         f"Model-free sub-queries (oracle: one per gold title; heuristic: a rule-based split), "
         f"lists of depth 100, nDCG@10 on {ds} with BM25:\n\n"
         + _md_table(["method", "heuristic split", "oracle split"], rows) + "\n\n"
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


def _rewards(d: Doc) -> str:
    s = d.t("04_reward_stats")
    cp = d.t("04_copy_penalty")
    col = "frac_reward_zero_std"
    parts = [f"{r['reward']} {d.n(r[col], '.2f')}" for _, r in s.iterrows()]
    p0 = cp[cp["p"] == 0]
    pos = cp[cp["p"] > 0].sort_values("p")
    share = "share of groups where a copy is a top rollout"
    t = (f"## Rewards (notebook 04: {_cite('04_reward_stats', '04_copy_penalty')})\n\n"
         "Share of groups of pseudo-rollouts with zero reward variance (TRL's "
         f"`frac_reward_zero_std`: no GRPO signal at all): {'; '.join(parts)}. Rank maps and "
         "format terms give GRPO a signal in more groups than a plain nDCG@10.")
    if len(p0) and len(pos):
        t += (f" With SAGE's copy penalty p = 0 a verbatim copy of the query is a top rollout in "
              f"{d.n(p0[share].iloc[0] * 100, '.0f')} % of groups; p = {d.n(pos['p'].iloc[0], 'g')} "
              f"already brings that to {d.n(pos[share].iloc[0] * 100, '.0f')} % (the paper uses "
              f"p = {d.n(d.pub('sage', 'Sec. 4.3')['value'].iloc[0], 'g')}).")
    return t + "\n"


def _bandits(d: Doc) -> str:

    pool = d.t("09_pool_stats")
    chk = d.t("09_direction_checks")
    sh = d.t("09_serial_vs_hierarchical")
    an = d.t("09_alpha_ndcg")
    label2key = {p.label: k for k, p in B.POLICIES.items()}
    t4 = d.pub("bandit", "Table 4", wide=True, index="key")
    parts = [f"## Bandit selection of sub-query documents (notebook 09: "
             f"{_cite('09_pool_stats', '09_direction_checks', '09_serial_vs_hierarchical', '09_alpha_ndcg')})\n"]
    parts.append(f"Requests pool {d.rng(pool['pool'], '.1f', what='pool')} unique documents on average "
                 f"(per dataset and decomposition), of which {d.rng(pool['relevant_in_pool'], '.1f', what='rel')} "
                 "are relevant. The paper's findings, checked on this run:\n")
    rows = [[r.iloc[0], f"**{r.iloc[1]}**" if r.iloc[1] != "yes" else r.iloc[1], r.iloc[2]]
            for _, r in chk.iterrows()]
    parts.append(_md_table(list(chk.columns), rows))
    key = ["random", "rank", "egreedy", "bernoulli", "bernoulli_top3", "gaussian", "topk_ucb_div"]
    rows = []
    for _, r in sh.iterrows():
        k = label2key.get(r["policy"])
        if k not in key or k not in t4.index:
            continue
        rows.append([r["policy"], d.n(r["Ser. b=10%"]), d.n(r["Hier. b=10%"]),
                     d.n(t4.loc[k, "Ser. 10%"]), d.n(t4.loc[k, "Hier. 10%"]),
                     d.n(r["Ser. b=20%"]), d.n(t4.loc[k, "Ser. 20%"])])
    parts.append("\nPrecision of the selected documents, serial vs hierarchical bandits, next to "
                 "the paper's Table 4 (ResearchyQuestions; paper values from "
                 "`qrlib/methods/bandits/published.yaml`):\n")
    parts.append(_md_table(["policy", "ours Ser. 10%", "ours Hier. 10%", "paper Ser. 10%",
                            "paper Hier. 10%", "ours Ser. 20%", "paper Ser. 20%"], rows))
    ours5 = [c for c in an.columns if c.endswith("/@5")]
    non_random = an[an["policy"] != "Random"]
    t3 = d.pub("bandit", "Table 3", column="Researchy @5")
    setup = d.pub("bandit", "Sec. 4", wide=True)["value"]
    neuclir_pool = d.n(setup["NeuCLIR sub-queries per request k"]
                       * setup["documents retrieved per sub-query n"], ".0f",
                       derived="bandit Sec. 4: sub-queries per request k x documents per sub-query n")
    parts.append(
        f"\nWhy the levels differ: our pools are small (see above) against up to {neuclir_pool} "
        "documents per NeuCLIR request in the paper, so a 10 % budget is two or three documents and the first arm "
        "tried decides precision; each request has few relevant documents, so the paper's "
        "expansion rule (a parent must look relevant on several observations in a row) can "
        "hardly fire and the hierarchical run becomes \"parents first\"; our two-level "
        "hierarchy is deterministic rather than model-generated. The α-nDCG@5 of every "
        f"non-random policy lies in {d.rng(non_random[ours5].to_numpy().ravel(), '.2f', what='alpha')} here "
        f"against {d.rng(t3['value'], '.2f', what='paper alpha')} on ResearchyQuestions in the paper "
        "(our subtopics are the few sub-queries of a request); compare orderings, not levels.\n")
    return "\n".join(parts)


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
    head = (f"## RL training (notebooks 05 and 10: {_cite('05_training_summary', '05_test_results', '05_comparisons', '10_latency', '10_generated_tokens')})\n\n"
            f"`{p05.get('model', '?')}` with LoRA, GRPO, {p05.get('train_steps', '?')} steps × "
            f"{p05.get('prompts_per_step', 1)} claims × {p05.get('num_generations', '?')} "
            f"rollouts per retriever, reward nDCG@"
            f"{p05.get('reward_k', '?')} with a format penalty (DeepRetrieval Table 8 style), "
            f"SciFact train claims in the mode of each run name:\n\n"
            + _md_table(["run", "mean reward, first → last quarter", "format-valid, first → last quarter",
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
            + _md_table(["retriever", "raw claim nDCG@10", "untrained nDCG@10", "trained nDCG@10",
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


def _acqo(d: Doc) -> str:
    """ACQO (notebooks 06-07): cold start, curriculum and the test table vs the raw question.
    Empty until 07 has run in this profile (the gaps section then names it)."""
    if not d.has("07_acqo_results"):
        return ""
    res = d.t("07_acqo_results")
    head = (f"## ACQO: the trained decomposer against the raw question (notebooks 06-07: "
            f"{_cite('06_warm_start', '07_tau_filter', '07_stage_summary', '07_acqo_results')})\n\n")
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
    table = _md_table(["test set", "retriever", "model", "nDCG@10", "R@10", "sub-queries",
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
                     f"{_cite('12_comparisons', '12_vanilla_results')}): {r.method} on "
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


def _sage(d: Doc) -> str:
    """SAGE (notebook 08): best-of-N curves, the trained reward variants against the raw
    query and each other, and the CRS finding."""
    if not d.has("08_sage_results"):
        return ""
    out = [f"## SAGE (notebook 08: "
           f"{_cite('08_best_of_n', '08_strategy_best_share', '08_sage_results', '08_comparisons' if d.has('08_comparisons') else '08_sage_pairwise')})\n"]
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
               + _md_table(["dataset", "retriever", "raw query"]
                           + [f"{f}: 1 / {nmax}" for f in fams], rows))
    if d.has("08_best_of_n_comparisons"):  # issue 26 item 4: do the families separate?
        fc = select(check_comparisons(d.t("08_best_of_n_comparisons"), "08_best_of_n_comparisons"),
                    **{"baseline kind": "untrained"})
        rows = [[r.dataset, r.retriever, r.method, r.baseline, d.interval(r["diff"], r.lo, r.hi),
                 verdict(r.lo, r.hi)] for _, r in fc.iterrows()]
        out.append("\n\nThe families against each other, per-query best-of-N paired over the "
                   "test queries (`08_best_of_n_comparisons.md`, 95% paired bootstrap):\n\n"
                   + _md_table(["dataset", "retriever", "family", "against", "Δ [95% CI]",
                                "verdict"], rows))
    res = d.t("08_sage_results")
    rows = [[r.dataset, r.retriever, r.model, d.n(r["nDCG@10"]),
             d.interval(r["ΔnDCG@10 vs raw"], r.lo, r.hi), d.n(r.modified, ".2f"),
             d.n(r["gen tokens"], ".1f"), d.scale(r)] for _, r in res.iterrows()]
    out.append("\n\nSAGE training (Sec. 2.3-2.5) on the test queries, with the copy penalty "
               "(Eq. 3); the exploration ablation (Table 3) is notebook 15, below:\n\n"
               + _md_table(["dataset", "retriever", "model", "nDCG@10",
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
    if d.has("08_crs_readings"):  # issue 26 item 5: CRS trains as Direct under GRPO
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
                   f"{_cite('15_sage_ablation', '15_comparisons')}), SCS with the conservative "
                   f"or the proactive prompt and copy penalties p; the paper's modification "
                   f"rates: " + "; ".join(f"{r.row} {d.n(r.value, '.3g')}" for _, r in t3.iterrows())
                   + ":\n\n"
                   + _md_table(["dataset", "model", "nDCG@10", "Δ vs raw [95% CI]", "modified",
                                "training scale"], rows))
    return "".join(out) + "\n"


def _rlqr(d: Doc) -> str:
    """RL-QR (notebook 14): synthesis and the annotation-free rewriters against the raw
    query, by column of ``14_comparisons``. Empty until 14 has run in this profile."""
    if not (d.has("14_rlqr_results") and d.has("14_comparisons")):
        return ""
    syn, res = d.t("14_synthesis"), d.t("14_rlqr_results")
    cmp = check_comparisons(d.t("14_comparisons"), "14_comparisons")
    out = [f"## RL-QR (notebook 14: {_cite('14_synthesis', '14_rlqr_results', '14_comparisons')})\n"]
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
               + _md_table(["dataset", "retriever", "model", "nDCG@3", "Δ vs raw [95% CI]",
                            "query words", "modified", "training scale"], rows))
    verdicts = [f"{r.dataset} / {r.retriever}: RL-QR {verdict(r.lo, r.hi)} the raw query"
                for _, r in trained.iterrows()]
    out.append("\n\n" + "; ".join(verdicts) + ". The paper trains Qwen3-4B to 14B on GPUs; "
               "here a 0.5B policy or smaller on 2 CPU cores (the scale column says how much).")
    return "".join(out) + "\n"


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
            f"{_cite('13_split', '13_sql_results', '13_comparisons')})\n\n")
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
    table = _md_table(["row", "execution accuracy", "easy / medium / hard / extra",
                       "Δ vs zero-shot (nothink) [95% CI]", "training scale"], rows)
    trained = cmp[cmp["kind"] == "trained"]
    tail = "".join(f" {m} {verdict(r.lo, r.hi)} zero-shot without reasoning."
                   for m, r in trained.iterrows())
    return (head + where + "Execution accuracy as Spider's evaluation defines it, per Spider "
            "hardness level; every generated statement ran in the read-only, time-limited "
            "sandbox.\n\n" + table + "\n\n" + tail.strip() + "\n")


def _audit(d: Doc) -> str:
    """DeepRetrieval's published BM25 baselines against Lucene with and without the
    released code's query prefix (notebook 11), and evidence-seeking H@N of the raw question."""
    if not d.has("11_baseline_audit"):
        return ""
    a = d.t("11_baseline_audit")
    out = [f"## DeepRetrieval beyond BEIR (notebook 11: {_cite('11_baseline_audit')})\n"]
    if "Lucene contents:" in a.columns:
        rows = [[r.dataset, d.n(r["published BM25"]), d.n(r["Lucene plain"]),
                 d.n(r["Lucene contents:"]), d.n(r["Lucene contents:, released eval"]),
                 d.n(r["bm25s"])] for _, r in a.iterrows()]
        out.append("BM25 nDCG@10 on the test sets: DeepRetrieval Table 2's published baseline, "
                   "Lucene (Pyserini 0.22.1) with plain queries, with the `contents:` prefix of the "
                   "released search code (`code/src/Lucene/<dataset>/search.py` in "
                   "pat-jj/DeepRetrieval), prefix plus the released evaluation, and bm25s:\n\n"
                   + _md_table(["dataset", "published", "Lucene plain", "Lucene contents:",
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


def fresh_timings(d: Doc) -> tuple[Any, list[str]]:
    """The rows of ``run_timings`` whose notebook is fresh, and the names of the others."""
    t = d.t("run_timings")
    fresh = [n for n, st in d.status.items() if st.state == "fresh"]
    others = [n for n in d.status if n not in fresh]
    return t[t["notebook"].isin(fresh)], others


def _cold_total(t: Any) -> float:
    """Seconds of the rows' last runs from scratch (``cold wall_s``; the run itself when a
    table predates the column)."""
    if "cold wall_s" not in t:
        return float(t["wall_s"].sum())
    return float(t["cold wall_s"].fillna(t["wall_s"]).sum())


def _no_cold_record(t: Any) -> list[str]:
    """Notebooks of ``t`` that reused a finished training and have no run from scratch on
    record: ``_cold_total`` counts their own (shorter) time, so it is a lower bound."""
    if "cold wall_s" not in t or "reused training" not in t:
        return []
    reused = t["reused training"].fillna("").astype(str).str.len() > 0
    return t[reused & t["cold wall_s"].isna()]["notebook"].tolist()


def _lower_bound_note(t: Any) -> str:
    """``; a lower bound: 13_x reused a finished training and no run of it from scratch with
    today's parameters is on record`` or ``""``."""
    names = _no_cold_record(t)
    if not names:
        return ""
    one = len(names) == 1
    return (f"; a lower bound: {', '.join(names)} reused {'a finished training' if one else 'finished trainings'} "
            f"and no run of {'it' if one else 'them'} from scratch with today's parameters "
            f"is on record")


def _reuse_note(d: Doc, r: Any) -> str:
    """``acqo-stage1-bm25 (finished, step 100); 88.8 min at `b3a998ca40` `` or ``–``."""
    reused = r.get("reused training")
    if not isinstance(reused, str) or not reused:
        return "–"
    cold = r.get("cold wall_s")
    if cold != cold or cold is None:
        return f"{reused}; no run from scratch on record"
    return f"{reused}; {d.n(cold / 60, '.1f', derived='run_timings: cold wall_s / 60')} min at `{r['cold commit']}`"


def _timings(d: Doc) -> str:
    t = d.t("run_timings")
    ft, stale = fresh_timings(d)
    rows = [[r.notebook, (d.status[r.notebook].state if r.notebook in d.status else "?")
             + (" (long set)" if r.notebook in d.long else ""),
             f"`{r.commit}`", d.n(r.wall_s, ".0f"),
             d.n(r.peak_rss_mb / 1024, ".1f", derived="run_timings: peak_rss_mb / 1024")
             if r.peak_rss_mb == r.peak_rss_mb else "–", _reuse_note(d, r)]
            for _, r in t.iterrows()]
    lng = ft[ft["notebook"].isin(d.long)]
    ft = ft[~ft["notebook"].isin(d.long)]
    total = float(ft["wall_s"].sum())
    cold = _cold_total(ft)
    peak = float(ft["peak_rss_mb"].max()) if len(ft) else float("nan")
    long_note = (f" The long set (`long:` in `params/{d.profile}.yaml`, `make reproduce LONG=1`): "
                 f"{d.n(len(lng), 'd', derived='run_timings: count of fresh long-set notebooks')} fresh notebooks, "
                 f"{d.n(float(lng['wall_s'].sum()) / 60, '.1f', derived='run_timings: sum(wall_s of fresh long set) / 60')} min more, "
                 f"{d.n(_cold_total(lng) / 60, '.1f', derived='run_timings: sum(cold wall_s of fresh long set) / 60')} min from scratch"
                 f"{_lower_bound_note(lng)}."
                 if d.long else "")
    return (f"## Wall time of the `{d.profile}` profile (`run_timings.md`)\n\n"
            "The last run of each notebook, as measured by the runner "
            f"(`tables/{d.profile}/manifest.json`), each from its own run:\n\n"
            + _md_table(["notebook", "state", "commit", "wall time (s)", "peak memory (GB)",
                         "trainings found done in runs/ (last run from scratch)"], rows)
            + "\n\n"
            f"The fresh notebooks of `make reproduce` took **{d.n(total / 60, '.1f', derived='run_timings: sum(wall_s of fresh) / 60')} min** "
            f"together, peak memory {d.n(peak / 1024, '.1f', derived='run_timings: max(peak_rss_mb of fresh) / 1024')} GB"
            + (f"; from scratch (the last run of each that trained everything itself) "
               f"{d.n(cold / 60, '.1f', derived='run_timings: sum(cold wall_s of fresh) / 60')} min"
               f"{_lower_bound_note(ft)}" if cold != total or _no_cold_record(ft) else "")
            + (f"; not counted, because stale or never run: {', '.join(f'`{n}`' for n in stale)}"
               if stale else "") + "." + long_note + " A cold cache adds the MiniLM encoding of "
            "SciFact and NFCorpus and the one-time assembly and dequantisation of the Qwen GGUF.\n")


README_BLOCK = re.compile(r"(<!-- qrlib:timing -->\n)(.*?)(\n<!-- /qrlib:timing -->)", re.S)


def readme_timing(d: Doc) -> str:
    """The README's sentence on the main job's time: the fresh notebooks' own runs, those of
    ``make reproduce`` first and the profile's long set (``long:``) apart."""
    ft, stale = fresh_timings(d)
    lng = ft[ft["notebook"].isin(d.long)]
    ft = ft[~ft["notebook"].isin(d.long)]
    total, peak = float(ft["wall_s"].sum()), float(ft["peak_rss_mb"].max()) if len(ft) else 0.0
    text = (f"Measured (`tables/{d.profile}/run_timings.md`): the **{len(ft)} fresh notebooks** of "
            f"`make reproduce` took **{total / 60:.1f} min** together on 2 cores with warm caches, "
            f"each from its own run at the commit its stamp names; peak memory "
            f"**{peak / 1024:.1f} GB**.")
    cold = _cold_total(ft)
    if cold != total or _no_cold_record(ft):
        reusing = ft[ft["reused training"].fillna("").astype(bool)]["notebook"].tolist()
        text += (f" {', '.join(reusing)} found {'its' if len(reusing) == 1 else 'their'} "
                 f"training already done in `runs/` (same config); counting the last run of "
                 f"each notebook that trained everything itself, the fresh notebooks take "
                 f"**{cold / 60:.1f} min** from scratch{_lower_bound_note(ft)}.")
    if d.long:
        numbers = ", ".join(n.split("_", 1)[0] for n in d.long)
        text += (f" The profile's **long set** (notebooks {numbers}: `long:` in "
                 f"`params/{d.profile}.yaml`, run by `make reproduce LONG=1`) is left out of "
                 f"that time; its {len(lng)} fresh notebooks took **"
                 f"{float(lng['wall_s'].sum()) / 60:.1f} min** more (**"
                 f"{_cold_total(lng) / 60:.1f} min** from scratch{_lower_bound_note(lng)}).")
    if stale:
        text += (f" Stale or never run at HEAD, so not counted: {', '.join(stale)} "
                 f"(`python -m qrlib status --profile {d.profile}` says why).")
        t = d.t("run_timings")
        ran = t[t["notebook"].isin(stale)]
        if len(ran):
            text += (f" Their last runs (each at its own commit) took "
                     f"**{float(ran['wall_s'].sum()) / 60:.1f} min** more for the "
                     f"{len(ran)} of them that ran")
            never = [n for n in stale if n not in set(ran["notebook"])]
            text += (f"; never run: {', '.join(never)}." if never else ".")
    return text


def write_readme_timing(d: Doc, root: Path, *, check: bool = False) -> bool:
    """Rewrite the README's timing block; with ``check``, only say whether it is current."""
    path = root / "README.md"
    if not path.exists():
        return True
    text = path.read_text(encoding="utf-8")
    m = README_BLOCK.search(text)
    if not m:
        raise QrlibError("README.md has no <!-- qrlib:timing --> block for the measured time")
    new = text[:m.start(2)] + readme_timing(d) + text[m.end(2):]
    if check:
        return new == text
    if new != text:
        atomic_write(path, new)
    return True


def _provenance(d: Doc, tables: list[str]) -> str:
    """One line under a section heading: the commit its tables came from, and whether any
    of their notebooks is stale."""
    nbs = sorted({d_ for t in tables for d_ in d.status if t.startswith(d_.split("_", 1)[0] + "_")})
    if not nbs:
        return ""
    parts, stale = [], []
    for n in nbs:
        st = d.status[n]
        commit = st.entry.get("commit", "?")
        parts.append(f"`{n}` at `{commit}`")
        if st.state != "fresh":
            stale.append(f"`{n}` ({st.state}: `{'; '.join(st.reasons)[:160]}`)")
    if stale:
        return ("> **Stale section**: " + "; ".join(stale) + ". Tables from " + ", ".join(parts)
                + f"; rerun with `python -m qrlib run params/{d.profile}.yaml --stale`.\n")
    return "> Fresh: tables from " + ", ".join(parts) + ".\n"


GAPS = [  # (what, where it will be run, table-name prefixes of its notebooks)
    ("ACQO's decomposing rewriter trained with the two-stage curriculum, and its rows of "
     "ACQO Tables 3 and 6", "issue 10, notebooks 06-07", ("07_acqo_results",)),
    ("SAGE's strategy-guided training (Direct, SCS, CRS against unguided RL)",
     "issue 26, notebook 08", ("08_sage", "08_best_of_n")),
    ("SAGE's exploration ablation (Table 3)", "issue 26, notebook 15", ("15_",)),
    ("RL-QR's annotation-free training on synthesised queries", "issue 26, notebook 14",
     ("14_",)),
    ("DeepRetrieval's SQL database search (Table 3)", "issue 26, notebook 13", ("13_",)),
    ("DeepRetrieval's evidence-seeking rewriters trained with the answer-rank reward, and "
     "reasoning vs no reasoning (Fig. 4)", "issue 26, notebook 17", ("17_",)),
    ("ACQO out of domain, cross-retriever and with a reader (Table 10)", "issue 26, notebook 16",
     ("16_",)),
    ("ACQO's ablation without RSF, Stage II or decomposition (Table 5)", "issue 26, notebook 18",
     ("18_",)),
]


def _gaps(d: Doc) -> str:
    have = {p.stem for p in d.tables_dir.glob("*.csv")}
    missing, present = [], []
    for what, where, prefixes in GAPS:
        tabs = sorted(t for t in have if t.startswith(prefixes) and t not in d.cited)
        if any(t.startswith(prefixes) for t in d.cited):
            continue  # summarised in a section above
        if tabs:
            present.append(f"- {what} ({where}): tables {', '.join(f'`{t}.md`' for t in tabs)}.")
        else:
            missing.append(f"- {what} ({where}).")
    out = ["## Not yet reproduced\n"]
    if missing:
        out.append("The workbook has the formulas, rewards and prompts of every paper (notebooks "
                   "03-04), but these parts of the papers have no results in this profile yet, "
                   "so the tables above have no rows for them; the papers' numbers are already "
                   "in `qrlib/methods/<paper>/published.yaml`:\n")
        out += missing
    if present:
        out.append("\nRun in this profile but not yet summarised here (see the notebooks' own "
                   "\"What we found\" cells and their tables):\n")
        out += present
    if not missing and not present:
        out.append("Every part of the papers that this workbook's notebooks cover has tables in "
                   "this profile; what the `cpu` profile leaves to `cpu-long` or `gpu` is in "
                   "README's \"not in `cpu`\" column, and which claims hold is the scoreboard "
                   "at the top.")
    return "\n".join(out) + "\n"


def _other_tables(d: Doc) -> str:
    rest = sorted(p.stem for p in d.tables_dir.glob("*.csv") if p.stem not in d.cited)
    if not rest:
        return ""
    return ("## Other tables of this run\n\nNot quoted above, in `tables/" + d.profile + "/`: "
            + ", ".join(f"`{t}.md`" for t in rest) + ".\n")


def _comparisons_section(d: Doc, table: str, title: str, intro: str, *,
                         metrics: tuple[str, ...] | None = None,
                         baseline_kind: str = "baseline") -> str:
    """A section that lists one notebook's comparison table by column (``qrlib.eval.compare``
    schema): every method against its baselines of ``baseline_kind`` (the raw query by
    default), the interval, verdict and training scale. Empty until the notebook has run
    in this profile."""
    if not d.has(table):
        return ""
    cmp = select(check_comparisons(d.t(table), table), **{"baseline kind": baseline_kind})
    if metrics is not None:
        cmp = cmp[cmp.metric.isin(metrics)]
    raw = baseline_kind == "baseline"
    rows = [[r.dataset, r.retriever, r.metric, r.method]
            + ([] if raw else [r.baseline])
            + [d.n(r.score), d.n(r["baseline score"]), d.interval(r["diff"], r.lo, r.hi),
               verdict(r.lo, r.hi), d.scale(r)]
            for _, r in cmp.iterrows()]
    head = (["test set", "retriever", "metric", "method"] + ([] if raw else ["against"])
            + ["score", "raw" if raw else "its score", "Δ [95% CI]",
               "vs raw" if raw else "verdict", "training scale"])
    return f"## {title} ({_cite(table)})\n\n{intro}\n\n" + _md_table(head, rows) + "\n"


def _acqo_transfer(d: Doc) -> str:
    """ACQO without retraining (notebook 16): out of domain, cross-retriever, a reader."""
    return _comparisons_section(
        d, "16_comparisons", "ACQO out of domain, across retrievers and end to end (notebook 16)",
        "07's adapters on each test set (out of domain where 06 did not train on it), searched "
        "with each retriever, and a local reader's EM / F1 from each row's top passages (ACQO "
        "Table 10's setting); every row minus the raw question, 95% paired bootstrap.")


def _evidence(d: Doc) -> str:
    """DeepRetrieval's evidence seeking with trained rewriters (notebook 17)."""
    return _comparisons_section(
        d, "17_comparisons", "DeepRetrieval evidence seeking, trained (notebook 17)",
        "H@N of each rewriter's rewrite and of the rewrite with its injected answer strings "
        "removed (App. E, string match) against the raw question; `17_evidence.md` has the "
        "injection rates.")


def _acqo_ablation(d: Doc) -> str:
    """ACQO Table 5 (notebook 18): ACQO against each row with one component removed."""
    return _comparisons_section(
        d, "18_comparisons", "ACQO's ablation, Table 5 (notebook 18)",
        "ACQO (Stage I + II, RSF) minus each row with one component removed, on 07's test "
        "questions: RRF instead of RSF (retrained; `18_ablation.md` names the reading), no "
        "Stage II (06's adapter), no decomposition (12's single-query RL); a positive Δ says "
        "the component helped. `18_vs_paper.md` sets the differences beside Table 5's.",
        baseline_kind="trained")


def _prompting(d: Doc) -> str:
    """The training-free rows every RL row is measured against (notebook 19)."""
    return _comparisons_section(
        d, "19_comparisons", "Prompting baselines without training (notebook 19)",
        "The untrained policy used without RL (Xu et al., `arXiv:2510.17139`): SPQE's "
        "pseudo-document expansion in three readings (`spqe` q + d, `spqe-q2d` the query "
        "five times + d, `pseudo-doc` d alone) and the best of its rewriting prompts "
        "(chosen on training queries; `19_prompt_selection.md`), each against the raw query "
        "on the whole test split; a trained row is worth its training only where it beats "
        "these too.")


def _scoreboard(d: Doc) -> str:
    """The papers' claims against this profile's tables (qrlib.workbook.scoreboard); the
    tables it reads are cited, the papers whose numbers it quotes registered."""
    for c in scoreboard.load_claims(d.root):
        if d.has(c.table):
            d.t(c.table)
        if c.paper_cells and c.paper not in d.papers:
            d.papers.append(c.paper)
    return scoreboard.render(d.profile, d.root)


SECTIONS: list[tuple[str, Callable[[Doc], str]]] = [
    ("scoreboard", _scoreboard),
    ("baselines", _baselines), ("fusion", _fusion), ("rewards", _rewards),
    ("bandits", _bandits), ("rl", _rl), ("acqo", _acqo),
    ("acqo transfer", _acqo_transfer), ("acqo ablation", _acqo_ablation), ("sage", _sage), ("rl-qr", _rlqr),
    ("beyond BEIR", _audit), ("sql", _sql), ("evidence", _evidence),
    ("prompting", _prompting), ("timings", _timings), ("gaps", _gaps),
    ("other tables", _other_tables)]


def render(profile: str = "cpu", *, root: Path | None = None) -> tuple[str, Doc]:
    """The text of RESULTS.md for ``profile`` and the :class:`Doc` with its sources."""
    d = Doc(profile, Path(root or REPO_ROOT))
    if not d.tables_dir.exists():
        raise QrlibError(f"no tables for profile {profile!r} under {d.tables_dir}; run "
                         f"`python -m qrlib run params/{profile}.yaml` first")
    prof_path = d.root / "params" / f"{profile}.yaml"
    if prof_path.exists():
        d.status = {s.notebook: s for s in profile_status(prof_path, d.root, note_uncommitted=False)}
        d.long = long_notebooks(load_profile(prof_path, validate=False))
    out = [_intro(d)]
    for name, fn in SECTIONS:
        try:
            before = len(d.cited)
            text = fn(d)
            if text and name not in ("timings", "gaps", "other tables"):
                head, _, body = text.partition("\n\n")
                line = _provenance(d, d.cited[before:])
                text = f"{head}\n\n{line}\n{body}" if line else text
            if text:
                out.append(text)
        except (QrlibError, KeyError, IndexError, ValueError) as exc:
            out.append(f"## {name}\n\n*Not available in this run: {exc}.*\n")
    return "\n".join(out).rstrip() + "\n", d


def write_results(profile: str = "cpu", *, root: Path | None = None,
                  path: Path | None = None) -> Path:
    """Write RESULTS.md (``<root>/RESULTS.md`` unless ``path``)."""
    root = Path(root or REPO_ROOT)
    text, d = render(profile, root=root)
    if (path is None or Path(path).resolve() == (root / "RESULTS.md").resolve()) and d.status:
        write_readme_timing(d, root)
        write_scoreboard(profile, root)
    return atomic_write(path or root / "RESULTS.md", text)


SCOREBOARD_PAGE = Path("docs") / "scoreboard.md"


def scoreboard_page(profile: str, root: Path) -> str:
    return ("# Scoreboard\n\nGenerated by `python -m qrlib results` (also the top of "
            "RESULTS.md); do not edit.\n\n" + scoreboard.render(profile, root))


def write_scoreboard(profile: str, root: Path, *, check: bool = False) -> bool:
    """Write ``docs/scoreboard.md`` (or, with ``check``, whether it is up to date)."""
    text = scoreboard_page(profile, root)
    path = root / SCOREBOARD_PAGE
    if check:
        return path.exists() and path.read_text(encoding="utf-8") == text
    atomic_write(path, text)
    return True


def results_main(profile: str, output: str | None = None, *, check: bool = False) -> int:
    """CLI: refresh ``tables/<profile>/run_timings`` from the run folder when there is
    one, then write (or, with ``check``, compare) RESULTS.md."""
    root = REPO_ROOT
    timing_table(profile, root=root)
    target = Path(output) if output else root / "RESULTS.md"
    if check:
        text, d = render(profile, root=root)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            raise QrlibError(f"{target} is not what `python -m qrlib results --profile {profile}` "
                             "writes; regenerate it")
        if d.status and not write_readme_timing(d, root, check=True):
            raise QrlibError("README.md's timing block is not what `python -m qrlib results` "
                             "writes; regenerate it")
        if d.status and not write_scoreboard(profile, root, check=True):
            raise QrlibError(f"{SCOREBOARD_PAGE} is not what `python -m qrlib results` writes; "
                             "regenerate it")
        print(f"{target} is up to date")
        return 0
    print(write_results(profile, root=root, path=target))
    return 0


# ---------------------------------------------------------------------------- audit
_CITED = re.compile(r"`([0-9]{2}_[\w]+|run_timings)\.md`")


def allowed_numbers(d: Doc, section_tables: list[str]) -> list[float]:
    """Values a section may quote: its cited tables, the published papers read, the
    profile's parameters."""

    vals: list[float] = []
    for name in section_tables:
        path = d.tables_dir / f"{name}.csv"
        if path.exists():
            vals += table_values(path)
    for paper in d.papers:
        vals += [float(v) for v in published.records(paper)["value"]]
    prof_path = d.root / "params" / f"{d.profile}.yaml"
    if prof_path.exists():
        def walk(x):
            if isinstance(x, bool):
                return
            if isinstance(x, (int, float)):
                vals.append(float(x))
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(load_profile(prof_path, validate=False))
    return vals


def audit(text: str, d: Doc) -> list[str]:
    """Numbers of ``text`` found in no source of their section: [] when all are sourced.

    A section (``## ...``) may quote the tables it names (`` `NN_name.md` ``), the papers'
    published values, the profile's parameters and the generator's declared derived
    numbers."""
    derived = {t for t, _ in d.derived}
    bad = []
    for sec in re.split(r"(?m)^(?=## )", text):
        names = list(dict.fromkeys(_CITED.findall(sec)))
        allowed = allowed_numbers(d, names)
        for n in numbers_in(sec):
            if n.text.rstrip("% ").strip() in derived:
                continue
            if not any(matches(n, v) for v in allowed):
                head = sec.splitlines()[0][:60] if sec.strip() else "?"
                bad.append(f"{n.text!r} in section {head!r}")
    return bad
