"""Evidence-seeking retrieval: answer-span hits (H@N) and the knowledge-injection analysis.

DeepRetrieval (Jiang et al., 2025; Table 1, right) scores evidence-seeking retrieval with
H@N, the "retrieval accuracy" of Ma et al. (2021): 1 when at least one of the top-N
documents contains a span matching one of the question's answer strings. Its training
reward for the task (Table 8, App. F) tiers the rank of the first such document.

Matching, here as in DPR's ``has_answer`` that Ma et al. use: answers and documents are
compared as token sequences after SQuAD-style normalisation (Rajpurkar et al., 2016:
lower-case, no punctuation, no articles a/an/the, single spaces), so an answer matches only
whole tokens ("he" is not found in "the"). One deviation from SQuAD's script: punctuation
becomes a token boundary instead of being deleted, as in DPR's tokeniser, so "Franklin's"
and "Detroit-born" still contain "Franklin" and "Detroit".

Knowledge injection (DeepRetrieval Sec. 4, Fig. 3, App. E): a rewrite injects knowledge when
it contains an answer string the question does not. The paper asks an auxiliary LLM
(Claude-3.5-Sonnet, Fig. 18) to find and remove such spans; we use the string rule above
instead, which finds exact (normalised) answer spans only, not paraphrases.

Every function is pure and runs in time linear in its text (no backtracking regex).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data.collection import doc_text
from qrlib.data.rows import answers_of
from qrlib.retrieval.fusion import unique_ranked
from qrlib.retrieval.retrievers import run_queries

__all__ = ["ARTICLES", "DEFAULT_NS", "normalise_answer", "answer_strings", "dataset_answers",
           "span_answerable", "contains_answer", "first_answer_rank", "hits_at_n",
           "answer_qrels", "score_run", "injected_answers", "strip_spans", "injection_frame",
           "injection_rate"]

#: Articles dropped by the normalisation (SQuAD v1.1 evaluation script)
ARTICLES = frozenset({"a", "an", "the"})
#: The cut-offs of DeepRetrieval Table 1 (H@1, H@5, H@20)
DEFAULT_NS = (1, 5, 20)
#: Answers that no passage can "contain" meaningfully (HotpotQA/2Wiki comparison questions)
YES_NO = frozenset({"yes", "no"})

_NON_WORD = re.compile(r"[\W_]+")      # one char class, no nesting: linear
_WORD = re.compile(r"[^\W_]+")


def _check_text(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise QrlibError(f"{what} must be a str, got {type(text).__name__}")
    return text


def _tokens(text: str) -> list[str]:
    """Normalised tokens of ``text`` (see :func:`normalise_answer`)."""
    text = unicodedata.normalize("NFKC", text).lower()
    return [t for t in _NON_WORD.sub(" ", text).split() if t not in ARTICLES]


def normalise_answer(text: str) -> str:
    """SQuAD-style normalisation (lower-case, punctuation and the articles a/an/the removed,
    whitespace collapsed), with punctuation read as a token boundary (DPR); NFKC first.

    >>> normalise_answer("The  U.S.-born Franklin's")
    'u s born franklin s'
    """
    return " ".join(_tokens(_check_text(text, "answer text")))


def answer_strings(metadata: Mapping[str, Any], question: str | None = None) -> list[str]:
    """The answer and its aliases (``answer``, ``answers``, ``answer_aliases`` of a query's
    metadata), first spelling kept per normalised form, empty ones dropped.

    Raises a one-line :class:`QrlibError` naming ``question`` when none is left.
    """
    if not isinstance(metadata, Mapping):
        raise QrlibError(f"query metadata must be a mapping, got {type(metadata).__name__}"
                         + (f" (question {question!r})" if question else ""))
    seen: dict[str, str] = {}
    for a in answers_of(metadata):
        key = normalise_answer(a)
        if key and key not in seen:
            seen[key] = a
    if not seen:
        raise QrlibError(f"no answer string for question {question!r}: metadata has no "
                         "non-empty 'answer', 'answers' or 'answer_aliases'")
    return list(seen.values())


def dataset_answers(ds: Any, qids: Iterable[str] | None = None) -> dict[str, list[str]]:
    """``{qid: answer strings}`` of a :class:`qrlib.data.collection.Dataset` (its
    ``query_meta``), for ``qids`` or every query in order; a query without one is an
    error naming it."""
    out = {}
    for q in (ds.queries if qids is None else qids):
        out[q] = answer_strings(ds.query_meta.get(q, {}), f"{q}: {ds.queries.get(q, '')}")
    return out


def span_answerable(answers: Sequence[str]) -> bool:
    """False when every answer is "yes" or "no" (comparison questions): no passage states
    such an answer as a span, so H@N means nothing for them (NQ, TriviaQA and SQuAD, the
    paper's sets, have none)."""
    return any(normalise_answer(a) not in YES_NO for a in _answer_list(answers))


def _answer_list(answers: Sequence[str]) -> list[str]:
    if isinstance(answers, str):
        raise QrlibError("answers must be a list of strings, got a single string; wrap it "
                         "as [answer]")
    out = [_check_text(a, "each answer") for a in answers]
    if not out:
        raise QrlibError("no answer strings given")
    return out


def _padded_answers(answers: Sequence[str]) -> list[str]:
    """``" tok tok "`` per non-empty normalised answer (padding makes ``in`` whole-token)."""
    pads = list(dict.fromkeys(f" {n} " for n in map(normalise_answer, _answer_list(answers))
                              if n))
    if not pads:
        raise QrlibError(f"every answer normalises to nothing: {list(answers)[:3]}")
    return pads


def _padded(text: str) -> str:
    return f" {' '.join(_tokens(text))} "


def _has(padded_text: str, padded_answers: Sequence[str]) -> bool:
    # str.__contains__ is CPython's fastsearch (two-way for long needles): linear-ish
    return any(a in padded_text for a in padded_answers)


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether some answer occurs in ``text`` as a whole-token span after normalisation
    (the answer-span test of H@N; DeepRetrieval Table 1, Ma et al. 2021)."""
    return _has(_padded(_check_text(text, "text")), _padded_answers(answers))


def _ranked_ids(ranked: Sequence[Any]) -> list[tuple[str, None]]:
    if isinstance(ranked, str):
        raise QrlibError("ranked_doc_ids must be a list of doc ids, got a single string")
    return [(r[0] if isinstance(r, (tuple, list)) else r, None) for r in ranked]


def _doc(doc_texts: Mapping[str, Any], d: str) -> str:
    try:
        return doc_text(doc_texts[d])
    except KeyError:
        raise QrlibError(f"ranked document {d!r} is not in the corpus given") from None


def first_answer_rank(ranked_doc_ids: Sequence[Any], doc_texts: Mapping[str, Any],
                      answers: Sequence[str], k: int | None = None, *,
                      cache: dict[str, str] | None = None) -> int | None:
    """1-based rank of the first answer-bearing document within the top ``k`` (a repeated
    document counts once, at its first position; :func:`qrlib.retrieval.fusion.unique_ranked`), or
    None. This rank is what DeepRetrieval's evidence-seeking reward tiers (Table 8;
    :func:`qrlib.methods.deepretrieval.rewards.answer_rank_tier_reward`). ``cache``: a dict kept
    across calls that holds each document's normalised text (doc id -> text)."""
    pads = _padded_answers(answers)
    for r, d, _ in unique_ranked(_ranked_ids(ranked_doc_ids)):
        if k is not None and r > k:
            break
        if cache is None:
            text = _padded(_doc(doc_texts, d))
        else:
            text = cache.get(d)
            if text is None:
                text = cache[d] = _padded(_doc(doc_texts, d))
        if _has(text, pads):
            return r
    return None


def _check_ns(ns: Sequence[int]) -> tuple[int, ...]:
    ns = tuple(ns)
    if not ns or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in ns):
        raise QrlibError(f"H@N cut-offs must be positive integers, got {list(ns)}")
    return ns


def hits_at_n(ranked_doc_ids: Sequence[Any], doc_texts: Mapping[str, Any],
              answers: Sequence[str], ns: Sequence[int] = DEFAULT_NS, *,
              cache: dict[str, str] | None = None) -> dict[str, int]:
    """H@N for each N in ``ns`` (DeepRetrieval Table 1; Ma et al. 2021): ``{"H@N": 1}`` when
    one of the top-N distinct documents contains an answer span, else 0.

    ``ranked_doc_ids``: doc ids best first (``(doc_id, score)`` pairs are accepted);
    ``doc_texts``: doc id -> text or ``{title, text}`` (titles count, as BM25 indexes them).
    """
    ns = _check_ns(ns)
    first = first_answer_rank(ranked_doc_ids, doc_texts, answers, max(ns), cache=cache)
    return {f"H@{n}": int(first is not None and first <= n) for n in ns}


def answer_qrels(doc_texts: Mapping[str, Any],
                 answers: Mapping[str, Sequence[str]]) -> dict[str, dict[str, int]]:
    """``{qid: {doc_id: 1}}`` for every document containing one of the qid's answers, so
    the qrels-based rewards (``deepretrieval_answer_rank``) and metrics see the same
    answer-bearing documents as :func:`contains_answer`. An inverted index of the first
    answer token narrows the candidates; each is then checked in full."""
    padded = {d: _padded(doc_text(t)) for d, t in doc_texts.items()}
    index: dict[str, set[str]] = {}
    for d, p in padded.items():
        for tok in set(p.split()):
            index.setdefault(tok, set()).add(d)
    out: dict[str, dict[str, int]] = {}
    for q, ans in answers.items():
        pads = _padded_answers(ans)
        cands = set().union(*(index.get(a.split()[0], set()) for a in pads))
        out[q] = {d: 1 for d in sorted(cands) if _has(padded[d], pads)}
    return out


def score_run(retriever: Any, queries: Mapping[str, str], corpus: Any,
              answers: Mapping[str, Sequence[str]], ns: Sequence[int] = DEFAULT_NS, *,
              k: int | None = None, batch_size: int = 256) -> Any:
    """Search every ``{qid: text}`` with ``retriever`` (``search(texts, k)``, top ``k``,
    default ``max(ns)``) and score H@N per question.

    ``corpus``: a :class:`qrlib.data.collection.Dataset` or doc id -> text / ``{title, text}``;
    ``answers``: ``{qid: answer strings}`` (:func:`dataset_answers`). Returns a pandas
    DataFrame indexed by qid with ``query``, ``H@N`` per N and ``first_rank`` (rank of the
    first answer-bearing document within ``k``, NaN if none), ready for
    :func:`qrlib.eval.stats.paired_bootstrap` between two query sets on the same qids.
    """
    import pandas as pd

    ns = _check_ns(ns)
    k = max(ns) if k is None else k
    if not isinstance(k, int) or k < max(ns):
        raise QrlibError(f"k must be an integer >= max(ns) = {max(ns)}, got {k!r}")
    missing = [q for q in queries if q not in answers]
    if missing:
        raise QrlibError(f"{len(missing)} queries have no answers, e.g. {missing[:3]}")
    docs = getattr(corpus, "corpus", corpus)
    if not isinstance(docs, Mapping):
        raise QrlibError(f"corpus must be a Dataset or a mapping doc_id -> text, got "
                         f"{type(corpus).__name__}")
    run = run_queries(retriever, queries, k=k, batch_size=batch_size)
    cache: dict[str, str] = {}
    rows = []
    for q, text in queries.items():
        first = first_answer_rank(run[q], docs, answers[q], k, cache=cache)
        rows.append({"qid": q, "query": text,
                     **{f"H@{n}": int(first is not None and first <= n) for n in ns},
                     "first_rank": float("nan") if first is None else float(first)})
    return pd.DataFrame(rows).set_index("qid")


# --------------------------------------------------------------------------- injection
def injected_answers(question: str, rewrite: str, answers: Sequence[str]) -> list[str]:
    """Answer strings found in ``rewrite`` but not in ``question`` (whole-token spans after
    normalisation): the knowledge-injection test of DeepRetrieval App. E, by string match
    instead of the paper's LLM judge. An answer the question already names (a comparison
    question's option) is not an injection."""
    _check_text(question, "question")
    _check_text(rewrite, "rewrite")
    q, r = _padded(question), _padded(rewrite)
    out: dict[str, str] = {}
    for a in _answer_list(answers):
        n = normalise_answer(a)
        if n and n not in out and f" {n} " in r and f" {n} " not in q:
            out[n] = a
    return list(out.values())


def _kmp_all(seq: Sequence[str], pat: Sequence[str]) -> list[int]:
    """Start indices of every (possibly overlapping) occurrence of ``pat`` in ``seq``
    (Knuth-Morris-Pratt: O(len(seq) + len(pat)))."""
    m = len(pat)
    if m == 0:
        return []
    fail = [0] * m
    j = 0
    for i in range(1, m):
        while j and pat[i] != pat[j]:
            j = fail[j - 1]
        if pat[i] == pat[j]:
            j += 1
        fail[i] = j
    out, j = [], 0
    for i, t in enumerate(seq):
        while j and t != pat[j]:
            j = fail[j - 1]
        if t == pat[j]:
            j += 1
            if j == m:
                out.append(i - m + 1)
                j = fail[j - 1]
    return out


_EMPTY_GROUP = re.compile(r"\(\s*\)|\"\s*\"|'\s*'")
_OPS = r"(?:AND|OR)"
_OP_RUN = re.compile(rf"\b{_OPS}(?:\s+{_OPS})+\b")
_OP_OPEN = re.compile(rf"\(\s*{_OPS}\b\s*")
_OP_CLOSE = re.compile(rf"\s*\b{_OPS}\s*\)")
_OP_EDGE = re.compile(rf"^\s*{_OPS}\b|\b{_OPS}\s*$")


def _tidy(text: str) -> str:
    """Collapse what removing spans leaves behind in a boolean query: empty quotes and
    parentheses, runs of AND/OR, AND/OR at a group's or the query's edge (a few passes
    for nesting, so the cost stays linear)."""
    prev = None
    for _ in range(8):
        if prev == text:
            break
        prev = text
        text = " ".join(text.split())
        text = _EMPTY_GROUP.sub("", text)
        text = _OP_RUN.sub(lambda m: m.group(0).split()[-1], text)
        text = _OP_OPEN.sub("(", text)
        text = _OP_CLOSE.sub(")", text)
        text = _OP_EDGE.sub("", text)
    return " ".join(text.split())


def strip_spans(rewrite: str, spans: Sequence[str]) -> str:
    """``rewrite`` with every occurrence of each span removed (the "cleaned" query of
    DeepRetrieval App. E): spans are matched as whole normalised tokens, case-insensitive,
    longest first; an article right before a removed span goes with it; then empty quotes,
    empty parentheses and dangling AND/OR are dropped. The rest is kept as written."""
    _check_text(rewrite, "rewrite")
    words = [(m.start(), m.end(), _tokens(m.group(0))) for m in _WORD.finditer(rewrite)]
    # one normalised token per stream position, pointing back at its source word
    stream: list[str] = []
    owner: list[int] = []
    for w, (_, _, toks) in enumerate(words):
        stream += toks
        owner += [w] * len(toks)
    pats = sorted({tuple(_tokens(_check_text(s, "span"))) for s in _answer_list(spans)}
                  - {()}, key=len, reverse=True)
    drop = [False] * len(words)
    cuts: list[tuple[int, int]] = []   # character ranges: first word's start, last's end
    for pat in pats:
        for s in _kmp_all(stream, pat):
            first, last = owner[s], owner[s + len(pat) - 1]
            if any(drop[first:last + 1]):  # overlaps a longer span already removed
                continue
            drop[first:last + 1] = [True] * (last - first + 1)
            before = first - 1
            if before >= 0 and not words[before][2] and not drop[before] and \
                    rewrite[words[before][0]:words[before][1]].lower() in ARTICLES:
                drop[before] = True
                first = before
            cuts.append((words[first][0], words[last][1]))
    if not cuts:
        return rewrite
    pieces, pos = [], 0
    for a, b in sorted(cuts):
        pieces.append(rewrite[pos:a])
        pos = b
    pieces.append(rewrite[pos:])
    return _tidy("".join(pieces))


def injection_frame(questions: Mapping[str, str], rewrites: Mapping[str, str],
                    answers: Mapping[str, Sequence[str]]) -> Any:
    """One row per qid of ``rewrites``: ``question``, ``rewrite``, ``injected`` (answer
    strings added by the rewrite), ``has_injection`` and ``cleaned`` (the rewrite with
    them stripped; unchanged when none), DeepRetrieval App. E step by step."""
    import pandas as pd

    rows = []
    for q, rw in rewrites.items():
        if q not in questions or q not in answers:
            raise QrlibError(f"qid {q!r} of the rewrites has no question or no answers")
        inj = injected_answers(questions[q], rw, answers[q])
        rows.append({"qid": q, "question": questions[q], "rewrite": rw, "injected": inj,
                     "has_injection": bool(inj),
                     "cleaned": strip_spans(rw, inj) if inj else rw})
    return pd.DataFrame(rows, columns=["qid", "question", "rewrite", "injected",
                                       "has_injection", "cleaned"]).set_index("qid")


def injection_rate(items: Iterable[tuple[str, str, Sequence[str]]]) -> float:
    """Share of ``(question, rewrite, answers)`` triples whose rewrite injects an answer
    (the "injection rate" of DeepRetrieval App. E.2); an empty batch is an error."""
    n = hit = 0
    for question, rewrite, answers in items:
        n += 1
        hit += bool(injected_answers(question, rewrite, answers))
    if n == 0:
        raise QrlibError("injection_rate: no (question, rewrite, answers) triples")
    return hit / n
