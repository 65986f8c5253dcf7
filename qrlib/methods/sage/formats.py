"""SAGE's completion format ``sage``.

JSON ``{"query": "...", "strategy": k}`` with integer ``k`` in 1..5 (SAGE Sec. 2.3, App. A.1
Fig. 5); it may sit inside ``<answer>`` tags after a ``<think>`` block. The SFT target is
the bare JSON object ``{"query": ...}``.
"""
from __future__ import annotations

import re

from qrlib.generation.parsing import (ANS_CLOSE, ANS_OPEN, MAX_QUERY_CHARS, OutputFormat,
                                      ParseResult, answer_blocks, clean_query, drop_think,
                                      fail_result, find_json_object, load_json_object,
                                      outside_chars, recover_query_fragment, register_format,
                                      think_content)

# A single quantifier between literals: linear time (see qrlib.generation.parsing).
_STRATEGY_FRAG_RE = re.compile(r'"strategy"\s*:\s*"?(\d+)')


def _parse_sage(text: str, lenient: bool, n_strategies: int = 5) -> ParseResult:
    fmt = "sage"
    blocks = answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = think_content(text)
    n_out = outside_chars(text, blocks) if answers else 0
    body = answers[-1] if answers else drop_think(text)

    def recover() -> tuple[list[str], int | None]:
        obj = find_json_object(body) or find_json_object(text)
        q = obj.get("query") if obj else None
        s = obj.get("strategy") if obj else None
        if not isinstance(q, str):
            q = recover_query_fragment(body) or recover_query_fragment(text)
        if s is None:
            m = _STRATEGY_FRAG_RE.search(body) or _STRATEGY_FRAG_RE.search(text)
            s = m.group(1) if m else None
        try:
            s = int(s) if s is not None and not isinstance(s, bool) else None
        except (TypeError, ValueError):
            s = None
        if s is not None and not 1 <= s <= n_strategies:
            s = None
        q = clean_query(q) if q is not None else None
        return ([q[:MAX_QUERY_CHARS]] if q else []), s

    def fail(err: str) -> ParseResult:
        qs, s = recover() if lenient else ([], None)
        res = fail_result(fmt, err, lenient, qs, think=think_txt, n_outside=n_out)
        res.strategy = s if lenient else None
        return res

    if len(answers) > 1:
        return fail(f"expected at most one <answer> block, found {len(answers)}")
    if text.count(ANS_OPEN) != len(answers) or text.count(ANS_CLOSE) != len(answers):
        return fail("unbalanced <answer> tags")
    obj, err = load_json_object(body)
    if obj is None:
        return fail(err or "bad JSON")
    q, s = obj.get("query"), obj.get("strategy")
    if not isinstance(q, str):
        return fail("JSON has no string 'query'")
    q = clean_query(q)
    if not q:
        return fail("query is empty")
    if len(q) > MAX_QUERY_CHARS:
        return fail(f"query is longer than {MAX_QUERY_CHARS} characters")
    if isinstance(s, bool) or not isinstance(s, int):
        return fail(f"'strategy' must be an integer 1-{n_strategies}, got {type(s).__name__}")
    if not 1 <= s <= n_strategies:
        return fail(f"'strategy' must be in 1-{n_strategies}, got {s}")
    return ParseResult(ok=True, queries=[q], strategy=s, think=think_txt, fmt=fmt,
                       n_outside=n_out)


def parse(text: str, *, fmt: str, lenient: bool, think: bool | None, think_prefilled: bool,
          max_subqueries: int) -> ParseResult:
    return _parse_sage(text, lenient)


register_format(OutputFormat("sage", parse, source="SAGE Sec. 2.3, App. A.1 Fig. 5"))
