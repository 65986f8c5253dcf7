"""RL-QR's completion format ``plain``.

The rewritten query as text; if ``<answer>...</answer>`` is present its content is used and
the characters outside it are counted in ``n_outside`` (RL-QR Sec. 3.2 penalises format
misses and redundant text outside the answer). The SFT target is the query itself.
"""
from __future__ import annotations

from qrlib.generation.parsing import (ANS_CLOSE, ANS_OPEN, MAX_QUERY_CHARS, OutputFormat,
                                      ParseResult, answer_blocks, clean_query, drop_think,
                                      fail_result, outside_chars, register_format,
                                      think_content)


def _parse_plain(text: str, lenient: bool) -> ParseResult:
    fmt = "plain"
    blocks = answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = think_content(text)
    if answers:
        n_out = outside_chars(text, blocks)
        q = clean_query(answers[-1])
        if q and len(answers) == 1:
            q = q.strip('"').strip() or None
            if q:
                return ParseResult(ok=True, queries=[q[:MAX_QUERY_CHARS]], think=think_txt,
                                   fmt=fmt, n_outside=n_out)
        err = "empty <answer> block" if not q else "several <answer> blocks"
        return fail_result(fmt, err, lenient, [q[:MAX_QUERY_CHARS]] if q else None,
                           think=think_txt, n_outside=n_out)
    if ANS_OPEN in text or ANS_CLOSE in text:
        tail = text.split(ANS_OPEN)[-1].replace(ANS_CLOSE, "")
        q = clean_query(tail)
        n_out = sum(1 for c in text if not c.isspace()) - (len(q.replace(" ", "")) if q else 0)
        return fail_result(fmt, "unbalanced <answer> tags", lenient,
                           [q[:MAX_QUERY_CHARS]] if q else None, think=think_txt, n_outside=n_out)
    body = drop_think(text, unclosed_to_end=True)
    q = clean_query(body)
    if not q:
        return ParseResult(ok=False, error="empty completion", fmt=fmt, think=think_txt)
    q = q.strip('"').strip()
    if not q:
        return ParseResult(ok=False, error="empty completion", fmt=fmt, think=think_txt)
    if len(q) > MAX_QUERY_CHARS:
        return fail_result(fmt, f"query is longer than {MAX_QUERY_CHARS} characters", lenient,
                           [q[:MAX_QUERY_CHARS]])
    return ParseResult(ok=True, queries=[q], think=think_txt, fmt=fmt)


def parse(text: str, *, fmt: str, lenient: bool, think: bool | None, think_prefilled: bool,
          max_subqueries: int) -> ParseResult:
    return _parse_plain(text, lenient)


register_format(OutputFormat("plain", parse, sft_target=lambda q: q, source="RL-QR Sec. 3.2"))
