"""DeepRetrieval's completion formats: ``deepretrieval`` and ``deepretrieval-nothink``.

``<think>...</think><answer>{"query": "..."}</answer>`` (DeepRetrieval Sec. 2.2, App. H):
exactly one of each tag, in this order, nothing but whitespace after ``</answer>``; the
content of the *last* ``<answer>`` block is used. ``think=False`` (or
``fmt="deepretrieval-nothink"``) expects only the ``<answer>`` block.
``think_prefilled=True``: the prompt already ended with ``<think>`` (as the paper's prompts
do), so the completion starts inside the think block. SAGE's DMQR-RAG baselines and the
generic rewrite prompt answer in the no-think layout too.
"""
from __future__ import annotations

import json

from qrlib.generation.parsing import (ANS_CLOSE, ANS_OPEN, THINK_CLOSE, THINK_OPEN,
                                      OutputFormat, ParseResult, answer_blocks, clean_query,
                                      fail_result, find_json_object, load_json_object,
                                      outside_chars, recover_query_fragment, register_format,
                                      split_subqueries, strip_fence, think_content)

SOURCE = "DeepRetrieval Sec. 2.2, App. H"
LEAD_INS = ("Let me rewrite the query with reasoning.", "Let me write the SQL query with reasoning.")
"""The sentences the think prompts prefill before ``<think>`` (App. H: the assistant turn
starts "Let me rewrite the query with reasoning."); the only text allowed before it."""


def _tag_structure(text: str, think: bool) -> str | None:
    """None if the DeepRetrieval tag layout holds, else the reason."""
    counts = {t: text.count(t) for t in (THINK_OPEN, THINK_CLOSE, ANS_OPEN, ANS_CLOSE)}
    need = (THINK_OPEN, THINK_CLOSE, ANS_OPEN, ANS_CLOSE) if think else (ANS_OPEN, ANS_CLOSE)
    for t in need:
        if counts[t] != 1:
            return f"expected exactly one {t}, found {counts[t]}"
    if not think and (counts[THINK_OPEN] or counts[THINK_CLOSE]):
        return "think tags are not expected in the no-think format"
    pos = [text.find(t) for t in need]
    if pos != sorted(pos):
        return "tags out of order (expected " + " < ".join(need) + ")"
    if text[:pos[0]].strip():
        return f"text before {need[0]}"
    if text[text.rfind(ANS_CLOSE) + len(ANS_CLOSE):].strip():
        return "text after </answer>"
    return None


def _parse_deepretrieval(text: str, lenient: bool, think: bool, think_prefilled: bool,
                         fmt: str, max_sub: int) -> ParseResult:
    lead = text.lstrip()
    for s in LEAD_INS:  # the prefilled lead-in is not the model's text
        if lead.startswith(s):
            text = lead[len(s):]
            break
    if think and think_prefilled and not text.lstrip().startswith(THINK_OPEN):
        text = THINK_OPEN + text
    blocks = answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = think_content(text)
    n_out = outside_chars(text, blocks)
    # best-effort query for lenient mode
    def recover() -> list[str]:
        src = answers[-1] if answers else text.split(ANS_OPEN)[-1] if ANS_OPEN in text else text
        obj = find_json_object(src)
        q = obj.get("query") if obj else None
        if not isinstance(q, str):
            q = recover_query_fragment(src)
        if q is None and answers:
            q = strip_fence(answers[-1])
        if q is None and not think:  # bare text as the query
            q = src
        q = clean_query(q)
        if not q:
            return []
        return split_subqueries(q, max_sub, max_sub > 1)[2]

    err = _tag_structure(text, think)
    if err is not None:
        return fail_result(fmt, err, lenient, recover() if lenient else None,
                           think=think_txt, n_outside=n_out)
    obj, err = load_json_object(answers[-1])
    if obj is None:
        return fail_result(fmt, err or "bad answer", lenient, recover() if lenient else None,
                           think=think_txt, n_outside=n_out)
    q = obj.get("query")
    if not isinstance(q, str):
        return fail_result(fmt, "answer JSON has no string 'query'", lenient,
                           recover() if lenient else None, think=think_txt, n_outside=n_out)
    q = clean_query(q)
    if not q:
        return fail_result(fmt, "query is empty", lenient, None, think=think_txt, n_outside=n_out)
    queries, err, len_q = split_subqueries(q, max_sub, max_sub > 1)
    if err:
        return fail_result(fmt, err, lenient, len_q, think=think_txt, n_outside=n_out)
    return ParseResult(ok=True, queries=queries, think=think_txt, fmt=fmt, n_outside=n_out)


def parse(text: str, *, fmt: str, lenient: bool, think: bool | None, think_prefilled: bool,
          max_subqueries: int) -> ParseResult:
    """Either layout; ``think=None`` means: a think block iff ``fmt == "deepretrieval"``."""
    use_think = (fmt == "deepretrieval") if think is None else bool(think)
    return _parse_deepretrieval(text, lenient, use_think, think_prefilled, fmt, max_subqueries)


def _body(query: str) -> str:
    return json.dumps({"query": query}, ensure_ascii=False)


def _think_target(query: str) -> str:
    # a reasoning block is required; keep it minimal
    return f"<think>The query keeps the key terms.</think>\n<answer>{_body(query)}</answer>"


register_format(OutputFormat("deepretrieval", parse, source=SOURCE, sft_target=_think_target))
register_format(OutputFormat("deepretrieval-nothink", parse, source=SOURCE,
                             sft_target=lambda q: f"<answer>{_body(q)}</answer>"))
