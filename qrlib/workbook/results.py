"""RESULTS.md, generated from the tables of one profile: ``python -m qrlib results``.

This module assembles the document: the shared sections (intro, scoreboard, retrieval
baselines, rewards, wall times, what is not yet reproduced, other tables) and each paper's,
which live in ``qrlib/methods/<paper>/results.py`` and are found through the entry-point
group :data:`GROUP` (``qrlib.results`` in ``pyproject.toml``); every section carries an order
number and RESULTS.md lists them sorted by it (:mod:`qrlib.workbook.resultsdoc`, which also
holds :class:`Doc` and the helpers sections share).

Every number in RESULTS.md is formatted from ``tables/<profile>/*.csv``, from the
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

import importlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrlib.core.io import REPO_ROOT, atomic_write, read_table
from qrlib.core.errors import QrlibError
from qrlib.core.registry import paper_entries
from qrlib.eval import published
from qrlib.workbook.freshness import profile_status
from qrlib.workbook.profiles import load_profile, long_notebooks
from qrlib.workbook.publish import timing_table
from qrlib.workbook.resultsdoc import Doc, Section, cite, md_table
from qrlib.workbook import scoreboard
from qrlib.workbook.trained_sections import seeds_section, trained_rows_section

#: The entry-point group of the papers' sections: ``<paper> = "<module>:SECTIONS"``.
GROUP = "qrlib.results"


# ---------------------------------------------------------------------------- numbers
# References that contain digits but are not results (Table 4, Eq. 1-2, notebook 10, ...)
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
    table = md_table(["dataset (test)", "BM25 (bm25s) nDCG@10", "Pyserini BM25 flat / multifield",
                       "rank-bm25 nDCG@10", "MiniLM dense nDCG@10", "MTEB (MiniLM)", "BM25 R@100"],
                      rows)
    diffs = ag["nDCG@10 diff"].abs()
    text = [f"## Retrieval baselines (notebook 02: {cite('02_baselines', '02_bm25_agreement', '02_speed', '02_hnsw_vs_flat')})\n",
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
                                       f"{cite('01_dataset_stats')})" if qw is not None else "")
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


def _rewards(d: Doc) -> str:
    s = d.t("04_reward_stats")
    cp = d.t("04_copy_penalty")
    col = "frac_reward_zero_std"
    parts = [f"{r['reward']} {d.n(r[col], '.2f')}" for _, r in s.iterrows()]
    p0 = cp[cp["p"] == 0]
    pos = cp[cp["p"] > 0].sort_values("p")
    share = "share of groups where a copy is a top rollout"
    t = (f"## Rewards (notebook 04: {cite('04_reward_stats', '04_copy_penalty')})\n\n"
         "Share of groups of pseudo-rollouts with zero reward variance (TRL's "
         f"`frac_reward_zero_std`: no GRPO signal at all): {'; '.join(parts)}. Rank maps and "
         "format terms give GRPO a signal in more groups than a plain nDCG@10.")
    if len(p0) and len(pos):
        t += (f" With SAGE's copy penalty p = 0 a verbatim copy of the query is a top rollout in "
              f"{d.n(p0[share].iloc[0] * 100, '.0f')} % of groups; p = {d.n(pos['p'].iloc[0], 'g')} "
              f"already brings that to {d.n(pos[share].iloc[0] * 100, '.0f')} % (the paper uses "
              f"p = {d.n(d.pub('sage', 'Sec. 4.3')['value'].iloc[0], 'g')}).")
    return t + "\n"


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
                 f"{d.n(len(lng), 'd', derived='run_timings: count of fresh long-set notebooks')} fresh "
                 f"notebook{'' if len(lng) == 1 else 's'}, "
                 f"{d.n(float(lng['wall_s'].sum()) / 60, '.1f', derived='run_timings: sum(wall_s of fresh long set) / 60')} min more, "
                 f"{d.n(_cold_total(lng) / 60, '.1f', derived='run_timings: sum(cold wall_s of fresh long set) / 60')} min from scratch"
                 f"{_lower_bound_note(lng)}."
                 if d.long else "")
    return (f"## Wall time of the `{d.profile}` profile (`run_timings.md`)\n\n"
            "The last run of each notebook, as measured by the runner "
            f"(`tables/{d.profile}/manifest.json`), each from its own run:\n\n"
            + md_table(["notebook", "state", "commit", "wall time (s)", "peak memory (GB)",
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


def _machines_note(*frames: Any) -> str:
    """Which CPUs the counted runs took their time on (``machine`` in ``run_timings``)."""
    from collections import Counter

    counts = Counter((f"on {label}" if isinstance(label, str) and label else
                      "not recorded (run before the runner recorded machines)")
                     for t in frames for label in
                     (t["machine"] if "machine" in t else [""] * len(t)))
    if not counts:
        return ""
    parts = [f"{n} {label}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return (f" Machines of the fresh notebooks' runs, main run and long set (`run_timings.md`, "
            f"'machine'): {'; '.join(parts)}.")


README_BLOCK = re.compile(r"(<!-- qrlib:timing -->\n)(.*?)(\n<!-- /qrlib:timing -->)", re.S)


def readme_timing(d: Doc) -> str:
    """The README's sentence on the main job's time: the fresh notebooks' own runs, those of
    ``make reproduce`` first and the profile's long set (``long:``) apart."""
    ft, stale = fresh_timings(d)
    lng = ft[ft["notebook"].isin(d.long)]
    ft = ft[~ft["notebook"].isin(d.long)]
    total, peak = float(ft["wall_s"].sum()), float(ft["peak_rss_mb"].max()) if len(ft) else 0.0
    text = (f"Measured (`tables/{d.profile}/run_timings.md`): the **{len(ft)} fresh "
            f"notebook{'' if len(ft) == 1 else 's'}** of "
            f"`make reproduce` took **{total / 60:.1f} min** together with warm caches, "
            f"each from its own run at the commit its stamp names; peak memory "
            f"**{peak / 1024:.1f} GB**.")
    text += _machines_note(ft, lng)
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
                 f"that time; its {len(lng)} fresh notebook{'' if len(lng) == 1 else 's'} took **"
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
     "ACQO Tables 3 and 6", "notebooks 06-07", ("07_acqo_results",)),
    ("SAGE's strategy-guided training (Direct, SCS, CRS against unguided RL)",
     "notebook 08", ("08_sage", "08_best_of_n")),
    ("SAGE's exploration ablation (Table 3)", "notebook 15", ("15_",)),
    ("RL-QR's annotation-free training on synthesised queries", "notebook 14",
     ("14_",)),
    ("DeepRetrieval's SQL database search (Table 3)", "notebook 13", ("13_",)),
    ("DeepRetrieval's evidence-seeking rewriters trained with the answer-rank reward, and "
     "reasoning vs no reasoning (Fig. 4)", "notebook 17", ("17_",)),
    ("ACQO out of domain, cross-retriever and with a reader (Table 10)", "notebook 16",
     ("16_",)),
    ("ACQO's ablation without RSF, Stage II or decomposition (Table 5)", "notebook 18",
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


def _scoreboard(d: Doc) -> str:
    """The papers' claims against this profile's tables (qrlib.workbook.scoreboard); the
    tables it reads are cited, the papers whose numbers it quotes registered."""
    for c in scoreboard.load_claims(d.root):
        if d.has(c.table):
            d.t(c.table)
        if c.paper_cells and c.paper not in d.papers:
            d.papers.append(c.paper)
    return scoreboard.render(d.profile, d.root)


SHARED_SECTIONS: list[Section] = [
    (10, "scoreboard", _scoreboard), (13, "trained rows", trained_rows_section),
    (16, "seeds", seeds_section), (20, "baselines", _baselines), (40, "rewards", _rewards),
    (160, "timings", _timings), (170, "gaps", _gaps), (180, "other tables", _other_tables)]


def sections() -> list[Section]:
    """The shared sections and every registered paper's (the ``SECTIONS`` of each module of
    the entry-point group :data:`GROUP`), sorted by their order numbers."""
    found = list(SHARED_SECTIONS)
    for name, module in paper_entries(group=GROUP).items():
        try:
            found += importlib.import_module(module).SECTIONS
        except (ImportError, AttributeError) as exc:
            raise QrlibError(f"entry point {name} = {module} of group {GROUP!r} has no "
                             f"sections ({exc})") from None
    orders = [order for order, _, _ in found]
    if len(set(orders)) != len(orders):
        twice = sorted({o for o in orders if orders.count(o) > 1})
        raise QrlibError(f"RESULTS.md sections share an order number: {twice}")
    return sorted(found, key=lambda s: s[0])


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
    for _, name, fn in sections():
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
