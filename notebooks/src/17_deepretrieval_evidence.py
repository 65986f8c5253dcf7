# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters, logs and rewrites go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for the training subset, training and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # the rewriter policy (DeepRetrieval: Qwen2.5-3B-Instruct)
datasets = ["hotpotqa-large", "2wikimultihopqa-mini"]  # question sets with answers: train split for RL, test split for evaluation
drop_yes_no = True  # leave out questions whose only answers are yes / no (no passage states them)
n_train_queries = 16  # training questions per dataset (random, span-answerable); None means all
n_test_queries = 8  # test questions per dataset (first span-answerable ones); None means all
runs = ["nothink"]  # RL runs: nothink (deepretrieval/evidence-nothink) | think (the same run with <think>, Fig. 4) | room (nothink on training questions whose raw question ranks the first answer-bearing passage within room_ranks)
room_ranks = [2, 50]  # the room run's window of the raw question's first answer-bearing rank
room_pool_queries = None  # training questions drawn before the room filter keeps n_train_queries of them (None: 3 x n_train_queries)
think_datasets = None  # datasets the think run trains and tests on (None: all of datasets); Fig. 4 needs one task
ns = [1, 5, 20]  # H@N cut-offs (DeepRetrieval Table 1)
train_steps = 2  # GRPO optimizer steps per run
prompts_per_step = 1  # questions per step
num_generations = 4  # rollouts per question
max_completion_length = 32  # token budget of one rollout without reasoning
think_max_completion_length = 64  # token budget of one rollout with reasoning
temperature = 0.6  # rollout temperature (DeepRetrieval App. B.2: 0.6)
beta = 0.001  # KL coefficient (App. B.2)
learning_rate = 5e-5  # LoRA learning rate
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of vLLM rollouts (kept in the completion), e.g. ["</answer>"]
eval_batch_size = 8  # questions rewritten together
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 3  # example rewrites shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)

# %% [markdown]
# # 17 · DeepRetrieval's evidence seeking, trained: H@N, knowledge injection, reasoning
#
# *Paper:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# In evidence seeking (DeepRetrieval Sec. 3.2, Table 1 right) the policy rewrites a question
# for BM25 and succeeds when a retrieved passage **contains the answer**; there are no
# relevance judgements, only answer strings. The training reward (Table 8) tiers the rank
# $r$ of the first answer-bearing passage:
#
# $$ R(r) = \begin{cases} 5 & r \le 5\\ 4 & r \le 20\\ 2 & r \le 50\\ 1 & r\le 100\\
#    0.5 & r \le 1000\\ 0.1 & r \le 3000\\ -3.5 & \text{otherwise,} \end{cases} $$
#
# plus the format term, and the test metric is H@N (the share of questions with an
# answer-bearing passage in the top N). Notebook 11 audits the task and scores the raw
# question; here a rewriter is trained and tested, with two analyses the paper makes:
#
# * **knowledge injection** (Fig. 3, App. E): a model can write the answer into the query
#   from memory, and retrieval then "succeeds" without a better query. Each rewrite's
#   injected answer strings are found by string match (`evidence.injected_answers`, where
#   the paper uses an LLM judge), removed, and the *cleaned* rewrite searched again;
# * **reasoning or not** (Fig. 4): the same RL run with and without a `<think>` block,
#   comparing reward, reasoning length and query length over steps, and the test result.
#
# Our collections are the pooled multi-hop paragraph sets (HotpotQA-large, 2Wiki), not the
# paper's 21M Wikipedia passages (see notebook 11): compare rows within a collection.

# %%
import time
from pathlib import Path

from qrlib import session

S = session.start("17_deepretrieval_evidence", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd

from qrlib import plots
from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.eval import published
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval import curves
from qrlib.eval.scale import SCALE_COLUMNS, scale_columns
from qrlib.generation.contract import DecodingContract
from qrlib.generation.prompts import as_template
from qrlib.methods.deepretrieval import evidence as ev
from qrlib.methods.deepretrieval import evidence_rl as er
from qrlib.methods.deepretrieval import reasoning
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.rows import room_filter

PROMPTS = {"nothink": "deepretrieval/evidence-nothink", "think": "deepretrieval/evidence-think",
           "room": "deepretrieval/evidence-nothink"}
unknown = [r for r in runs if r not in PROMPTS]
if unknown:
    raise QrlibError(f"unknown run(s) {unknown}; accepted: {', '.join(PROMPTS)}")
extra = sorted(set(think_datasets or []) - set(datasets))
if extra:
    raise QrlibError(f"think_datasets {extra} are not in datasets; accepted: {', '.join(datasets)}")
RUN_DATASETS = {run: [n for n in datasets if run != "think" or think_datasets is None
                      or n in think_datasets] for run in runs}  # run -> the datasets it covers
NS = tuple(int(n) for n in ns)
HN = [f"H@{n}" for n in NS]
print(f"profile={profile} model={model} runs={RUN_DATASETS}")

# %% [markdown]
# ## 1. Questions, answers and answer-bearing passages
#
# Training: a random subset of each dataset's train split (span-answerable questions),
# pooled, over the train split's paragraphs. Test: the span-answerable questions of each
# test split over its paragraphs. For every question, the passages that contain one of
# its answer strings are its qrels, for the reward and for H@N alike.

# %%
TRAIN, TEST, SEARCH = {}, {}, {}
for name in datasets:
    tr = qdata.load_dataset(name, "train", data_dir=data_dir)
    ok = set(er.answerable_qids(tr, drop_yes_no=drop_yes_no))  # no corpus scan yet
    qids = list(qdata.subset(qdata.filter_queries(tr, lambda q, t, meta: q in ok),
                             n_queries=n_train_queries, n_distractors=0, seed=seed).queries)
    TRAIN[name] = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=qids)
    SEARCH["train", name] = retrieval.build_retriever("bm25", tr.corpus)
    if "room" in runs:  # a larger draw, then only the questions with room to improve
        pool = list(qdata.subset(qdata.filter_queries(tr, lambda q, t, meta: q in ok),
                                 n_queries=room_pool_queries or 3 * n_train_queries,
                                 n_distractors=0, seed=seed).queries)
        cand = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=pool)
        first = ev.score_run(SEARCH["train", name], cand.questions, cand.ds, cand.answers,
                             NS, k=max(room_ranks[1], max(NS)))
        keep = room_filter(first["first_rank"].to_dict(), *room_ranks)[:n_train_queries]
        TRAIN[name, "room"] = er.evidence_set(tr, drop_yes_no=drop_yes_no, qids=keep)
        print(f"{name}: room run trains on {len(keep)} of {len(pool)} drawn questions (raw "
              f"first answer-bearing rank {room_ranks[0]}-{room_ranks[1]})")
    TEST[name] = er.evidence_set(qdata.load_dataset(name, "test", data_dir=data_dir),
                                 drop_yes_no=drop_yes_no, n_queries=n_test_queries)
    SEARCH["test", name] = retrieval.build_retriever("bm25", TEST[name].ds.corpus)
SETS = pd.DataFrame([{"dataset": n, "split": split, "questions": len(s.questions),
                      "yes/no left out": s.yes_no_left_out, "paragraphs": len(s.ds.corpus),
                      "answer-bearing passages (median)":
                          pd.Series([len(s.qrels[q]) for q in s.questions]).median()}
                     for n in datasets for split, s in (("train", TRAIN[n]), ("test", TEST[n]))])
SETS

# %% [markdown]
# ## 2. Training: the answer-rank reward, with and without reasoning
#
# One GRPO run per entry of `runs` on the pooled training questions of every dataset: the
# reward needs each question's own corpus, so each dataset gets its own run here
# (DeepRetrieval trains one model per dataset too).

# %%
SUMMARIES, LOGS = {}, {}
for name in datasets:
    for run in [r for r in runs if name in RUN_DATASETS[r]]:
        t0 = time.perf_counter()
        SUMMARIES[name, run] = s_ = er.train_rewriter(
            TRAIN[name, "room"] if run == "room" else TRAIN[name], SEARCH["train", name],
            name=f"17-evidence-{name}-{run}",
            prompt=PROMPTS[run], run_dir=run_dir, model=model, dataset=name, retriever="bm25",
            max_steps=train_steps, prompts_per_step=prompts_per_step,
            num_generations=num_generations,
            max_completion_length=(think_max_completion_length if run == "think"
                                   else max_completion_length),
            temperature=temperature, beta=beta, learning_rate=learning_rate, seed=seed,
            dynamic_sampling=dynamic_sampling, stop=list(stop),
            save_steps=max(1, train_steps // 4))
        LOGS[name, run] = pd.read_csv(s_["log"], dtype={"qids": str})
        print(f"{name} {run}: {s_['steps']} steps, {time.perf_counter() - t0:.0f}s")
_ = save_json({f"{n}:{r}": s for (n, r), s in SUMMARIES.items()}, out_dir / "train_summaries.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report(SUMMARIES, "17_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Reward, reasoning length and query length over steps (Fig. 4)
#
# The per-step log has the mean reward and the completion length; with `<think>` the
# completion holds the reasoning and the query, without it the query alone.

# %%
CURVES = {f"{name} · {run}": lg for (name, run), lg in LOGS.items()}
fig = curves.reward_and_length(CURVES, reward="mean answer-rank reward")
_ = plots.save_figure(fig, "17_training_curves", figures_dir, profile=profile,
                  setting=f"{model}; from the logs: " + curves.scale_setting(CURVES),
                  caption="Evidence seeking: reward and completion length per GRPO step, with "
                          "and without reasoning (DeepRetrieval Fig. 4's comparison)")

# %% [markdown]
# ## 3. Test: raw question, untrained and trained rewriters, injection removed
#
# Greedy rewrites of every test question by the untrained model and each trained adapter
# with the decoding contract of its training (prompt, prefill, stop strings, token budget,
# parser); a completion without a query is searched as the raw
# question. For each: H@N of the rewrite, the injection rate, and H@N of the cleaned
# rewrite, each paired with the raw question (and the rewrite with its cleaned self) by a
# 95% bootstrap over questions.

# %%
RAW = {name: ev.score_run(SEARCH["test", name], TEST[name].questions, TEST[name].ds,
                          TEST[name].answers, NS) for name in datasets}
RESULTS, rows, cmp_rows = {}, [], []
for run in runs:
    # the untrained model in one pass over every dataset, with the decoding contract its
    # training used (read from the first dataset's adapter); each dataset's own adapter after
    first = SUMMARIES[RUN_DATASETS[run][0], run]["adapter"]
    same = next((r for r in runs[:runs.index(run)] if PROMPTS[r] == PROMPTS[run]
                 and DecodingContract.load(SUMMARIES[RUN_DATASETS[r][0], r]["adapter"])
                 == DecodingContract.load(first)), None)  # the room run's is nothink's
    untrained = ({(PROMPTS[run], n): RESULTS[f"untrained {same}", n] for n in RUN_DATASETS[run]}
                 if same else
                 er.rewrite_and_score(model, None, {PROMPTS[run]: DecodingContract.load(first)},
                                      {n: TEST[n] for n in RUN_DATASETS[run]},
                                      {n: SEARCH["test", n] for n in RUN_DATASETS[run]}, NS,
                                      batch_size=eval_batch_size))
    for name in RUN_DATASETS[run]:
        n = len(TEST[name].questions)
        RESULTS[f"untrained {run}", name] = untrained[PROMPTS[run], name]
        a = SUMMARIES[name, run]["adapter"]
        trained = er.rewrite_and_score(model, a, {PROMPTS[run]: a}, {name: TEST[name]},
                                       {name: SEARCH["test", name]}, NS,
                                       batch_size=eval_batch_size)
        RESULTS[f"trained {run}", name] = trained[PROMPTS[run], name]
        valid = {s_: RESULTS[f"{s_} {run}", name]["rewrites"]["format_ok"].mean()
                 for s_ in ("untrained", "trained")}  # test validity of each row
        for label, kind, scale in (
                (f"untrained {run}", "untrained",
                 scale_columns(model, test_queries=n, test_valid=valid["untrained"])),
                (f"trained {run}", "trained",
                 scale_columns(model, [LOGS[name, run]], test_queries=n,
                               test_valid=valid["trained"]))):
            r_, c_ = er.evidence_rows(RAW[name], RESULTS[label, name], dataset=name,
                                      rewriter=label, kind=kind, scale=scale, ns=NS,
                                      resamples=bootstrap, seed=seed)
            rows += r_
            cmp_rows += c_
BOTH = [n for n in datasets if all(n in RUN_DATASETS.get(r, []) for r in ("think", "nothink"))]
for name in BOTH:  # with vs without reasoning, the same model state, question by question
    n = len(TEST[name].questions)
    valid = {s_: RESULTS[f"{s_} think", name]["rewrites"]["format_ok"].mean()
             for s_ in ("untrained", "trained")}
    for state, kind, scale in (("untrained", "untrained",
                                scale_columns(model, test_queries=n, test_valid=valid["untrained"])),
                               ("trained", "trained", scale_columns(
                                   model, [LOGS[name, "think"]], test_queries=n,
                                   test_valid=valid["trained"]))):
        cmp_rows += [compare(RESULTS[f"{state} think", name]["rewrite"][h].to_dict(),
                             RESULTS[f"{state} nothink", name]["rewrite"][h].to_dict(),
                             paper="deepretrieval", dataset=name, retriever="bm25", metric=h,
                             method=f"{state} think: rewrite", kind=kind,
                             baseline=f"{state} nothink: rewrite", baseline_kind=kind,
                             scale=scale, resamples=bootstrap, seed=seed) for h in HN]
EVIDENCE = pd.DataFrame(rows)
CMP = comparison_table(cmp_rows)
for (label, name), res in RESULTS.items():
    record(f"{name}.{label}.injection_rate", float(res["injection"]["has_injection"].mean()))
    record(f"{name}.{label}.{HN[-1]}", float(res["rewrite"][HN[-1]].mean()))
for name in datasets:
    record(f"{name}.raw.{HN[-1]}", float(RAW[name][HN[-1]].mean()))
save_table(EVIDENCE.round(4), "17_evidence", tables_dir,
           caption=("H@N of the raw question, each rewriter's rewrite and the rewrite with its "
                    "injected answer strings removed, with format, modification and injection "
                    f"rates (DeepRetrieval Table 1 right, Fig. 3; string-match injection test) "
                    f"[profile: {profile}]"))
save_table(CMP.round(4), "17_comparisons", tables_dir,
           caption=("Rewrite vs raw question, rewrite vs cleaned rewrite, cleaned rewrite vs "
                    "raw question and, where both runs exist, the rewriter with reasoning vs "
                    "without; H@N, 95% paired bootstrap over the test questions, with the "
                    f"rewriter's training scale ({', '.join(SCALE_COLUMNS)}) [profile: {profile}]"))
EVIDENCE.round(3)

# %% [markdown]
# The paper's Table 1 (NQ, TriviaQA, SQuAD over 21M passages; DeepRetrieval-3B with and
# without reasoning), for the direction of the effects only:

# %%
published.table("deepretrieval", "Table 1", wide=True, fraction=True)

# %% [markdown]
# Rewrites that injected an answer, with the cleaned query that was searched instead:

# %%
ex = []
for (label, name), res in RESULTS.items():
    inj = res["injection"]
    for q, r in inj[inj["has_injection"]].head(n_examples).iterrows():
        ex.append({"dataset": name, "rewriter": label, "question": r["question"],
                   "rewrite": r["rewrite"], "injected": "; ".join(r["injected"]),
                   "cleaned": r["cleaned"],
                   "first rank rewrite": res["rewrite"].loc[q, "first_rank"],
                   "first rank cleaned": res["cleaned"].loc[q, "first_rank"]})
pd.DataFrame(ex)

# %% [markdown]
# ## 4. Reasoning or not (Fig. 4): how long the chain and the query are
#
# DeepRetrieval's Fig. 4 (literature search on PubMed, which is not offline here; we use
# evidence seeking as the one task) follows the reasoning length and the query length over
# training: with `<think>` the chain shortens as the reward rises, and without it the query
# grows. Both lengths are read from the completions each step logs (`samples.jsonl`, a few
# rollouts per step) and from the greedy test rewrites
# (`qrlib.methods.deepretrieval.reasoning`: words before `</think>`, words of the query the
# lenient parser recovers). Early and late are the first and last quarter of the steps.
#
# A short chain is not necessarily concise reasoning: a prompt whose layout shows an
# example chain (the paper's App. H shows `<think> [thinking process] </think>`) invites a
# small policy to copy it, and an earlier version of this workbook's prompt
# (`<think> your reasoning </think>`) was copied in every trained test chain. The prompt
# now describes the layout in words and shows no chain; the **echo share** counts chains
# equal to one the prompt shows (case and spacing ignored; none, so NaN, when it shows none).

# %%
EXAMPLE = {run: reasoning.layout_chain(as_template(PROMPTS[run]).user) for run in runs}
LENGTHS = {(name, run): reasoning.length_curves(reasoning.sample_lengths(
    Path(SUMMARIES[name, run]["log"]).with_name("samples.jsonl"),
    as_template(PROMPTS[run]).meta["fmt"], EXAMPLE[run])) for (name, run) in SUMMARIES}
rows = []
for (label, name), res in RESULTS.items():
    run = label.split()[-1]  # "untrained think" -> think
    meta = as_template(PROMPTS[run]).meta
    row = {"dataset": name, "rewriter": label, "questions": len(TEST[name].questions),
           **res["rewrite"][HN].mean().to_dict(),
           "format ok": res["rewrites"]["format_ok"].mean(),
           "gen tokens": res["rewrites"]["gen_tokens"].mean(),
           **{f"test {k}": v for k, v in reasoning.mean_lengths(
               res["rewrites"]["completion"], meta["fmt"], prefill=meta["prefill"],
               example=EXAMPLE[run]).items()}}
    if label.startswith("trained"):
        row.update(reasoning.early_late(LOGS[name, run], LENGTHS[name, run]))
    rows.append(row)
REASONING = pd.DataFrame(rows)
save_table(REASONING.round(4), "17_reasoning", tables_dir,
           caption=("With and without reasoning (DeepRetrieval Fig. 4, Table 1 'w/o reasoning'): "
                    "test H@N, format rate, generated tokens, reasoning and query words and "
                    "the share of chains that copy the prompt's example chain (echo share) of "
                    "the greedy test rewrites; for trained rewriters the mean training reward "
                    "and the reasoning and query words and echo share of the logged rollouts in "
                    f"the first and last quarter of the steps [profile: {profile}]"))
SHOWN = [(n, r) for (n, r) in LENGTHS if n in BOTH or r == "think"]  # think runs, partners
if SHOWN:
    fig = reasoning.reasoning_figure({f"{n} · {r}": (LOGS[n, r], LENGTHS[n, r]) for n, r in SHOWN})
    plots.save_figure(fig, "17_reasoning_lengths", figures_dir, profile=profile,
                      setting=f"{model}; from the logs: " + curves.scale_setting(
                          {f"{n} · {r}": LOGS[n, r] for n, r in SHOWN}),
                      caption="Training reward, reasoning length and query length per GRPO step "
                              "(words, from the rollouts each step logs), with and without "
                              "<think> (DeepRetrieval Fig. 4's study, on evidence seeking)")
REASONING.round(3)

# %% [markdown]
# ## What we found
#
# Built from `17_comparisons` (H@N at the deepest N), `17_reasoning`, `17_evidence` and
# `17_health` of this run by `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

deep = CMP[(CMP.metric == HN[-1]) & ~CMP.method.str.contains("cleaned")]
extra = []
think = REASONING[REASONING.rewriter.str.endswith(" think")]
if len(think):
    extra.append("With reasoning, " + "; ".join(
        f"{r['rewriter']} on {r['dataset']} copies the prompt's example chain in "
        f"{r['test echo share']:.0%} of test rewrites" for r in think.to_dict("records")) + ".")
inj = [res["injection"]["has_injection"].mean() for (label, _), res in RESULTS.items()
       if label.startswith("trained")]
if inj:
    extra.append(f"Trained rewrites put an answer string into the query for {min(inj):.1%}-"
                 f"{max(inj):.1%} of the questions (string match).")
display(Markdown(what_we_found(deep, notebook="17_deepretrieval_evidence", tables_dir=tables_dir,
                               health=HEALTH, extra=extra)))
