# ---
# jupyter:
#   qrlib:
#     reads: [06_acqo_stage1, 07_acqo_stage2]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # reads 06's and 07's adapters from here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (must be 06's and 07's)
trained_with = ["bm25"]  # retrievers 06 and 07 trained with (one Stage I and one Stage II adapter each)
test_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # test splits (out of domain when not in 06's train_datasets)
n_test_queries = 6  # test questions per dataset; None means all
n_test_distractors = 60  # corpus cut: judged paragraphs + this many others; None means full
eval_retrievers = ["bm25", "dense"]  # every decomposition is searched with each (cross-retriever, ACQO Fig. 5)
eval_k = 100  # depth of each sub-query's list and of the fused list
eval_batch_size = 16  # questions decoded together
eval_autocast = False  # bf16 autocast of the greedy decoding (False keeps the fp32 outputs)
reader_model = "smollm2"  # the local reader (ACQO Table 10 uses Qwen2.5-7B-Instruct)
reader_retriever = "bm25"  # the retriever whose fused top documents the reader sees
reader_top_k = 5  # passages given to the reader (ACQO Table 10: top 10)
reader_passage_words = 80  # words kept of each passage
reader_max_new_tokens = 16  # budget of one answer
reader_n_queries = None  # questions the reader answers per dataset (first ones of the cut); None means all
reader_autocast = False  # bf16 reader (autocast on HF, a bf16 engine on vLLM): several times faster on CPU; the same reader reads every row
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 4  # example decompositions shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 16 · ACQO away from home: another dataset, another retriever, and a reader
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# Notebooks 06-07 train ACQO's decomposer on one training set with one retriever and test
# it there. ACQO (Sec. 4.3-4.4) asks three more questions, which this notebook answers with
# the same adapters and no further training:
#
# 1. **Out of domain**: does a decomposer trained on 2WikiMultihopQA questions help on
#    HotpotQA (a test set whose training split it never saw)?
# 2. **Cross-retriever** (ACQO Fig. 5): sub-queries learned against BM25's rankings,
#    searched with a dense retriever instead. Each question's lists are fused by
#    Rank-Score Fusion (RSF, ACQO Eq. 1-2) either way.
# 3. **End to end** (ACQO Table 10): does better retrieval give better answers? A small
#    local reader answers each question from the top documents of each method; exact match
#    and token F1 against the gold answer and its aliases (SQuAD v1.1's measures,
#    `qrlib.eval.qa`).
#
# Every row is compared with the raw question on the same questions by a 95% paired
# bootstrap (`qrlib.eval.compare`), and carries the training scale of its adapter.

# %%
import time

from qrlib import session

S = session.start("16_acqo_transfer", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.eval import metrics, qa
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import scale_columns
from qrlib.generation import engine, policy, reader
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.curriculum import search_fused
from qrlib.methods.acqo.transfer import Stage2Record, decompose, ranked_ids, rule_split
from qrlib.methods.deepretrieval.evidence import dataset_answers
from qrlib.retrieval import retrievers as retrieval

S1 = Stage1Record.load(run_dir / "06_acqo_stage1")
S2 = Stage2Record.load(run_dir / "07_acqo_stage2")
IN_DOMAIN = set(S1.train_datasets)
print(f"profile={profile} model={model}; trained on {sorted(IN_DOMAIN)} with {trained_with}")

# %% [markdown]
# ## 1. Test sets and retrievers
#
# Each test set is searched against its own corpus (cut in small profiles to the judged
# paragraphs plus `n_test_distractors`), with every evaluation retriever.

# %%
TEST = {}
for name in test_datasets:
    ds = qdata.load_dataset(name, "test", data_dir=data_dir)
    TEST[name] = qdata.subset(ds, n_queries=n_test_queries, n_distractors=n_test_distractors,
                              seed=seed)
    print(f"{name} ({'in domain' if name in IN_DOMAIN else 'out of domain'}): "
          f"{len(TEST[name].queries)} questions, {len(TEST[name].corpus)} paragraphs")
RETR = {(name, kind): retrieval.build_retriever(
            kind, TEST[name].corpus,
            **({"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}))
        for name in test_datasets for kind in eval_retrievers}

# %% [markdown]
# ## 2. Sub-queries of every row
#
# The raw question (one query), the rule split (the question plus up to two rule-based
# sub-queries, no model), and per training retriever the Stage I adapter (06) and the
# Stage I + II adapter (07, ACQO), greedy, each with its training's decoding contract
# (prompt, prefill, stop strings, token budget, parser: the adapter's `decoding.json`).

# %%
ROWS = {"raw question": None, "rule: question + heuristic split": None}
KIND = {"raw question": "baseline", "rule: question + heuristic split": "model-free"}
TRAINED_WITH, SCALE = {}, {}  # label -> training retriever; label -> (logs, SFT steps, SFT questions)
for kind in trained_with:
    s1_log = pd.read_csv(S1.summary(kind)["log"], dtype={"qids": str})
    s2_log = pd.read_csv(S2.summaries[kind]["log"], dtype={"qids": str})
    sft = S1.sft_steps if S1.summary(kind).get("sft_adapter") else 0
    warm = S1.sft_questions.get(kind, 0) if sft else 0
    for label, adapter, logs in ((f"Stage I ({kind}-trained)", S1.summary(kind)["adapter"],
                                  [s1_log]),
                                 (f"ACQO: Stage I+II ({kind}-trained)", S2.adapter(kind),
                                  [s1_log, s2_log])):
        ROWS[label], KIND[label], TRAINED_WITH[label] = adapter, "trained", kind
        SCALE[label] = (logs, sft, warm)
SUBS = {}  # (row, dataset) -> {qid: sub-queries}
GEN = {}  # (row, dataset) -> decompositions (for examples and timing)
for name, ds in TEST.items():
    SUBS["raw question", name] = {q: [t] for q, t in ds.queries.items()}
    SUBS["rule: question + heuristic split", name] = {q: rule_split(t)
                                                      for q, t in ds.queries.items()}
t0 = time.perf_counter()
for label, adapter in ROWS.items():
    if adapter is None:
        continue
    for name, dec in decompose(model, adapter, TEST, batch_size=eval_batch_size,
                               autocast=eval_autocast).items():  # the adapter's own contract
        GEN[label, name] = dec
        SUBS[label, name] = {d["qid"]: d["subqueries"] for d in dec}
engine.close_engines()
print(f"decompositions in {time.perf_counter() - t0:.0f}s")
_ = save_json({f"{k[0]} | {k[1]}": v for k, v in GEN.items()}, out_dir / "decompositions.json")

# %% [markdown]
# ## 3. Retrieval: in and out of domain, with the training retriever and the other one
#
# nDCG@10 and R@10 of every row on every test set and evaluation retriever, each row minus
# the raw question with the 95% paired bootstrap.

# %%
def row_scale(label, n, name):
    """The scale columns of a row (from its runs' logs when trained) and its test validity."""
    if label in SCALE:
        logs, sft, warm = SCALE[label]
        valid = sum(d["format_ok"] for d in GEN[label, name]) / len(GEN[label, name])
        return scale_columns(model, logs, test_queries=n, sft_steps=sft, sft_queries=warm,
                             test_valid=valid)
    return scale_columns(None, test_queries=n)


RUNS, PER_Q, cmp_rows = {}, {}, []
for name, ds in TEST.items():
    for kind in eval_retrievers:
        for label in ROWS:
            RUNS[label, name, kind], _ = search_fused(RETR[name, kind], SUBS[label, name],
                                                      k=eval_k)
            PER_Q[label, name, kind] = metrics.evaluate(
                RUNS[label, name, kind], ds.qrels, ("nDCG@10", "R@10"),
                per_query=True).set_index("query_id")
        raw = PER_Q["raw question", name, kind]["nDCG@10"].to_dict()
        for label in ROWS:
            if label == "raw question":
                continue
            pq = PER_Q[label, name, kind]["nDCG@10"]
            cmp_rows.append(compare(pq.to_dict(), raw, paper="acqo", dataset=name,
                                    retriever=kind, metric="nDCG@10", method=label,
                                    kind=KIND[label], baseline="raw question",
                                    scale=row_scale(label, len(pq), name), resamples=bootstrap,
                                    seed=seed))
rows = []
for (label, name, kind), pq in PER_Q.items():
    rows.append({"dataset": name, "domain": "in" if name in IN_DOMAIN else "out",
                 "retriever": kind,
                 "cross-retriever": label in TRAINED_WITH and TRAINED_WITH[label] != kind,
                 "model": label, "nDCG@10": pq["nDCG@10"].mean(), "R@10": pq["R@10"].mean(),
                 "sub-queries": pd.Series({q: len(s) for q, s in SUBS[label, name].items()}).mean()})
TRANSFER = pd.DataFrame(rows)
for _, r in TRANSFER.iterrows():
    record(f"{r.dataset}.{r.retriever}.{r.model}.ndcg10", r["nDCG@10"])
save_table(TRANSFER.round(4), "16_transfer", tables_dir,
           caption=("ACQO's decomposer on every test set (in / out of the training domain) and "
                    "evaluation retriever (the training one, or the other: cross-retriever, "
                    f"ACQO Fig. 5); nDCG@10, R@10, sub-queries per question [profile: {profile}]"))
TRANSFER.round(3)

# %% [markdown]
# Example sub-queries on the out-of-domain set (or the first test set):

# %%
ood = [n for n in test_datasets if n not in IN_DOMAIN] or list(test_datasets)
EXAMPLES = pd.DataFrame([{"question": TEST[ood[0]].queries[q], "row": label,
                          "sub-queries": " | ".join(SUBS[label, ood[0]][q])}
                         for q in list(TEST[ood[0]].queries)[:n_examples] for label in ROWS])
EXAMPLES

# %% [markdown]
# ## 4. End to end: a local reader answers from each row's top documents (ACQO Table 10)
#
# The reader (`qrlib.generation.reader`) sees the first `reader_top_k` documents of each
# row's fused list (with `reader_retriever`), each cut to `reader_passage_words` words, and
# answers greedily; its first line is the prediction. EM and F1 are SQuAD v1.1's, against
# the gold answer and its aliases. With `reader_autocast` the reader runs in bf16: its
# answers differ a little from fp32's, but one reader reads every row, so each Δ stays a
# paired comparison.

# %%
reader_m, reader_tok = policy.load_policy(reader_model)
ANSWERS, QA_PQ = {}, {}
for name, ds in TEST.items():
    qids = list(ds.queries)[:reader_n_queries] if reader_n_queries else list(ds.queries)
    golds = dataset_answers(ds, qids)
    for label in ROWS:
        ranked = ranked_ids(RUNS[label, name, reader_retriever], qids)
        ANSWERS[label, name] = reader.answer(
            reader_m, reader_tok, {q: ds.queries[q] for q in qids}, ranked, ds.corpus,
            top_k=reader_top_k, passage_words=reader_passage_words,
            max_new_tokens=reader_max_new_tokens, autocast=reader_autocast)
        QA_PQ[label, name] = qa.score_answers(ANSWERS[label, name], golds)
del reader_m
engine.close_engines()
save_json({f"{k[0]} | {k[1]}": v for k, v in ANSWERS.items()}, out_dir / "reader_answers.json")
rows = []
for name in test_datasets:
    base = QA_PQ["raw question", name]
    for label in ROWS:
        pq = QA_PQ[label, name]
        row = {"dataset": name, "retriever": reader_retriever, "model": label,
               "EM": pq.EM.mean(), "F1": pq.F1.mean(), "questions": len(pq)}
        if label != "raw question":
            for m in ("EM", "F1"):
                c = compare(pq[m].to_dict(), base[m].to_dict(), paper="acqo", dataset=name,
                            retriever=reader_retriever, metric=f"reader {m}", method=label,
                            kind=KIND[label], baseline="raw question",
                            scale=row_scale(label, len(pq), name), resamples=bootstrap, seed=seed)
                cmp_rows.append(c)
                row[f"Δ{m} vs raw"], row[f"{m} lo"], row[f"{m} hi"] = c["diff"], c["lo"], c["hi"]
        rows.append(row)
READER = pd.DataFrame(rows)
for _, r in READER.iterrows():
    record(f"reader.{r.dataset}.{r.model}.f1", r.F1)
save_table(READER.round(4), "16_reader", tables_dir,
           caption=(f"End to end (ACQO Table 10's setting): {reader_model} "
                    f"({'bf16' if reader_autocast else 'fp32'}) answers from the top "
                    f"{reader_top_k} documents of each row's fused {reader_retriever} list; EM and "
                    f"token F1 (SQuAD v1.1) with Δ vs the raw question and its 95% paired "
                    f"bootstrap [profile: {profile}]"))
READER.round(3)

# %% [markdown]
# A few answers next to the gold ones (first questions of each test set):

# %%
pd.DataFrame([{"dataset": name, "question": TEST[name].queries[q], "gold": " | ".join(golds_[q]),
               **{label: ANSWERS[label, name][q] for label in ROWS}}
              for name in test_datasets
              for golds_ in [dataset_answers(TEST[name], list(ANSWERS["raw question", name]))]
              for q in list(ANSWERS["raw question", name])[:n_examples]])

# %%
CMP = comparison_table(cmp_rows)
for _, r in CMP.iterrows():
    record(f"{r.dataset}.{r.retriever}.{r.metric}.{r.method}.vs_raw", [r["diff"], r.lo, r.hi])
save_table(CMP.round(4), "16_comparisons", tables_dir,
           caption=("Every row minus the raw question: nDCG@10 on every test set and retriever, "
                    "and the reader's EM / F1; 95% paired bootstrap over the test questions "
                    f"(qrlib.eval.compare schema) [profile: {profile}]"))
fig, axes = plt.subplots(1, len(eval_retrievers), figsize=(5.5 * len(eval_retrievers), 3.4),
                         squeeze=False)
for j, kind in enumerate(eval_retrievers):
    ax = axes[0][j]
    sel = CMP[(CMP.retriever == kind) & (CMP.metric == "nDCG@10")]
    labels = list(dict.fromkeys(sel.method))
    for i, name in enumerate(test_datasets):
        g = sel[sel.dataset == name].set_index("method").reindex(labels)
        x = [k + 0.35 * i for k in range(len(labels))]
        ax.errorbar(x, g["diff"], yerr=[g["diff"] - g.lo, g.hi - g["diff"]], fmt="o",
                    color=f"C{i}", label=f"{name} ({'in' if name in IN_DOMAIN else 'out of'} domain)")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(labels)), [lab.split(":")[0] for lab in labels], rotation=20,
                  ha="right")
    ax.set(title=f"searched with {kind}", ylabel="ΔnDCG@10 vs raw question")
fig.tight_layout()
plots.legend_outside(fig, *axes[0][0].get_legend_handles_labels(), title="test set")
_ = plots.save_figure(fig, "16_transfer", figures_dir, profile=profile,
                  setting=f"{model}; {', '.join(f'{n}: {len(TEST[n].queries)} q' for n in TEST)}",
                  caption="ACQO's rows minus the raw question (nDCG@10, 95% paired bootstrap) in "
                          "and out of the training domain, with the training retriever and the "
                          "other one (ACQO Fig. 5's question)")

# %% [markdown]
# ## What we found
#
# Built from `16_comparisons` of this run by `qrlib.workbook.findings`; the decomposers were
# trained in notebooks 06 and 07 (their training health is there):

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

ndcg_16 = CMP[CMP.metric == "nDCG@10"]
out_16 = ndcg_16[(ndcg_16.kind == "trained") & ~ndcg_16.dataset.isin(IN_DOMAIN)]
extra = [] if out_16.empty else [
    f"Out of domain ({', '.join(sorted(set(out_16.dataset)))}), the trained rows beat the raw "
    f"question in {int((out_16.lo > 0).sum())} of {len(out_16)} comparisons."]
rule_16 = ndcg_16[ndcg_16.kind == "model-free"]
extra += [f"The model-free rule split beats the raw question in {int((rule_16.lo > 0).sum())} and "
          f"falls below it in {int((rule_16.hi < 0).sum())} of {len(rule_16)} comparisons."]
display(Markdown(what_we_found(ndcg_16, notebook="16_acqo_transfer", tables_dir=tables_dir,
                               extra=extra)))
