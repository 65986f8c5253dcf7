"""ACQO's completion format ``acqo``.

One JSON object ``{"query": "a%%b%%c"}`` (ACQO App. C, Fig. 7a): sub-queries split on
``%%``, at most ``max_subqueries`` (3, the format's default) of them, none empty. Markdown
code fences around the object are tolerated. The SFT target is the bare JSON object.
"""
from __future__ import annotations

from qrlib.generation.parsing import (SUBQUERY_SEP, OutputFormat, ParseResult, clean_query,
                                      fail_result, find_json_object, load_json_object,
                                      recover_query_fragment, register_format,
                                      split_subqueries)


def _parse_acqo(text: str, lenient: bool, max_sub: int) -> ParseResult:
    fmt = "acqo"
    n_out = 0

    def recover() -> list[str]:
        obj = find_json_object(text)
        q = obj.get("query") if obj else None
        if isinstance(q, list):
            q = SUBQUERY_SEP.join(x for x in q if isinstance(x, str))
        if not isinstance(q, str):
            q = recover_query_fragment(text)
        q = clean_query(q) if q is not None else None
        return split_subqueries(q, max_sub)[2] if q else []

    obj, err = load_json_object(text)
    if obj is None:
        return fail_result(fmt, err or "bad JSON", lenient, recover() if lenient else None,
                           n_outside=n_out)
    q = obj.get("query")
    if not isinstance(q, str):
        return fail_result(fmt, "JSON has no string 'query'", lenient,
                           recover() if lenient else None)
    q = clean_query(q)
    if not q:
        return fail_result(fmt, "query is empty", lenient, None)
    queries, err, len_q = split_subqueries(q, max_sub)
    if err:
        return fail_result(fmt, err, lenient, len_q)
    return ParseResult(ok=True, queries=queries, fmt=fmt)


def parse(text: str, *, fmt: str, lenient: bool, think: bool | None, think_prefilled: bool,
          max_subqueries: int) -> ParseResult:
    return _parse_acqo(text, lenient, max_subqueries)


register_format(OutputFormat("acqo", parse, max_subqueries=3, source="ACQO App. C, Fig. 7a"))
