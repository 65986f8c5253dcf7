"""A small local reader: answer a question from retrieved passages (ACQO Table 10's setting).

ACQO measures what its rewriter buys end to end by letting a reader LLM answer each test
question from the top documents each method retrieves. Here the reader is an offline
policy (:func:`qrlib.generation.policy.load_policy`), greedy, with the passages numbered in
retrieval order and cut to ``passage_words`` words each; it is asked for the answer span
only, and its first line is the prediction. Scoring is :mod:`qrlib.eval.qa`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.data.collection import doc_text
from qrlib.generation import policy
from qrlib.generation.prompts import render_prompt

READER_PROMPT = {
    "system": ("You are a question answering system. Use only the numbered passages. Reply "
               "with the answer alone: a name, date, number or short phrase, or yes / no; "
               "no explanation."),
    "user": "{passages}\n\nQuestion: {question}",
}


def passages_text(doc_ids: Sequence[str], corpus: Mapping[str, Any], *,
                  passage_words: int = 80) -> str:
    """The passages as ``[1] title. text`` lines, each cut to ``passage_words`` words."""
    if passage_words < 1:
        raise QrlibError(f"passage_words must be >= 1, got {passage_words}")
    lines = []
    for i, d in enumerate(doc_ids, 1):
        words = doc_text(corpus[d]).split()
        lines.append(f"[{i}] " + " ".join(words[:passage_words]))
    return "\n".join(lines) if lines else "(no passage was retrieved)"


def first_line(completion: str) -> str:
    """The prediction: the completion's first non-empty line, stripped of a leading
    ``Answer:`` / ``The answer is`` and of surrounding quotes or a final full stop."""
    for line in completion.splitlines():
        line = line.strip()
        if line:
            for lead in ("the answer is:", "the answer is", "answer:"):
                if line.lower().startswith(lead):
                    line = line[len(lead):].strip()
                    break
            return line.rstrip(".").strip().strip("\"'").rstrip(".").strip()
    return ""


def answer(model: Any, tokenizer: Any, questions: Mapping[str, str],
           ranked: Mapping[str, Sequence[str]], corpus: Mapping[str, Any], *, top_k: int = 5,
           passage_words: int = 80, max_new_tokens: int = 16, batch_size: int = 8,
           autocast: bool | None = False) -> dict[str, str]:
    """``{qid: predicted answer}``: greedy answers of ``questions`` from the first ``top_k``
    documents of each question's ranked list (``ranked[qid]``: doc ids, best first)."""
    qids = list(questions)
    prompts = [render_prompt(READER_PROMPT, tokenizer,
                             passages=passages_text(list(ranked.get(q, []))[:top_k], corpus,
                                                    passage_words=passage_words),
                             question=questions[q]) for q in qids]
    outs = policy.generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens,
                           batch_size=batch_size, autocast=autocast)
    return {q: first_line(o) for q, o in zip(qids, outs)}
