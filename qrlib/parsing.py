"""Completion -> query (or sub-queries) for every output format of the four methods.

``parse_completion(text, fmt)`` never raises on model output: junk (truncated JSON,
unbalanced tags, empty queries, too many sub-queries, huge or non-UTF-8 text) gives a
:class:`ParseResult` with ``ok=False`` and an ``error`` naming the rule that broke. Only a
bad *argument* (unknown ``fmt``) raises :class:`~qrlib.errors.QrlibError`.

Formats
-------
``deepretrieval``
    ``<think>...</think><answer>{"query": "..."}</answer>`` (DeepRetrieval Sec. 2.2, App. H):
    exactly one of each tag, in this order, nothing but whitespace after ``</answer>``;
    the content of the *last* ``<answer>`` block is used. ``think=False`` (or
    ``fmt="deepretrieval-nothink"``) expects only the ``<answer>`` block.
    ``think_prefilled=True``: the prompt already ended with ``<think>`` (as the paper's
    prompts do), so the completion starts inside the think block.
``acqo``
    One JSON object ``{"query": "a%%b%%c"}`` (ACQO App. C, Fig. 7a): sub-queries split
    on ``%%``, at most ``max_subqueries`` (3) of them, none empty. Markdown code fences
    around the object are tolerated.
``sage``
    JSON ``{"query": "...", "strategy": k}`` with integer ``k`` in 1..5 (SAGE Sec. 2.3,
    App. A.1 Fig. 5); it may sit inside ``<answer>`` tags after a ``<think>`` block.
``plain``
    The rewritten query as text (RL-QR); if ``<answer>...</answer>`` is present its
    content is used and the characters outside it are counted in ``n_outside`` (RL-QR
    Sec. 3.2 penalises format misses and redundant text outside the answer).

``lenient=True`` recovers a query from malformed output (a ``"query": "..."`` fragment in
broken JSON, an answer without tags, too many sub-queries cut to the limit ...). The
result then has ``queries`` filled but ``ok=False`` and ``recovered=True``: the format did
not hold, so format-gated rewards still see a failure, while retrieval can still run.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from qrlib.errors import QrlibError

FORMATS = ("deepretrieval", "deepretrieval-nothink", "acqo", "sage", "plain")
MAX_CHARS = 32_768          # longer completions are truncated before parsing (and flagged)
MAX_QUERY_CHARS = 4_096     # a single (sub-)query longer than this is rejected
SUBQUERY_SEP = "%%"

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_ANS_OPEN, _ANS_CLOSE = "<answer>", "</answer>"
_FENCE = "```"
# Every scanner below runs in time linear in the text: tags and fences are found with
# str.find/str.strip (no regex with nested or adjacent quantifiers over the same
# characters, which backtrack polynomially on an unclosed fence followed by whitespace or
# on thousands of unclosed tags). This one regex has a single quantifier between literals.
_STRATEGY_FRAG_RE = re.compile(r'"strategy"\s*:\s*"?(\d+)')


@dataclass
class ParseResult:
    """What a completion said.

    ok: the required format held (strict rules); queries: the (sub-)queries, empty when
    nothing usable was found (in strict mode also whenever ``ok`` is False); strategy:
    SAGE strategy id; error: why the format failed (None when ok); think: the reasoning
    block's text if any; recovered: queries came from lenient recovery; n_outside: number
    of non-space characters outside the ``<answer>`` block (RL-QR penalty input).
    """

    ok: bool
    queries: list[str] = field(default_factory=list)
    strategy: int | None = None
    error: str | None = None
    think: str | None = None
    fmt: str = ""
    recovered: bool = False
    n_outside: int = 0
    truncated: bool = False

    @property
    def query(self) -> str:
        """All sub-queries joined by a space ('' when none)."""
        return " ".join(self.queries)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "queries": list(self.queries), "strategy": self.strategy,
                "error": self.error, "think": self.think, "fmt": self.fmt,
                "recovered": self.recovered, "n_outside": self.n_outside,
                "truncated": self.truncated}


# --------------------------------------------------------------------------- helpers
def _to_text(text: Any) -> tuple[str | None, str | None]:
    """Coerce a completion to str; (text, error)."""
    if text is None:
        return None, "completion is None"
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", errors="replace"), None
    if isinstance(text, list):  # chat messages
        parts = [m.get("content", "") for m in text if isinstance(m, dict)
                 and m.get("role", "assistant") == "assistant"]
        text = "".join(p for p in parts if isinstance(p, str))
    if not isinstance(text, str):
        return None, f"completion has type {type(text).__name__}, expected str"
    # lone surrogates cannot be encoded; replace them
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8")
    return text, None


def completion_text(completion: Any) -> str:
    """A completion (str, bytes or chat messages) as text; ``""`` when it has none."""
    text, _ = _to_text(completion)
    return text or ""


def _clean_query(q: Any) -> str | None:
    if not isinstance(q, str):
        return None
    q = " ".join(q.replace("\x00", " ").split())
    return q or None


def _strip_fence(s: str) -> str:
    """Content of a Markdown code fence around the whole text (```json ... ```), else the
    stripped text. The closing fence is the last ``` with only whitespace after it."""
    t = s.strip()
    if len(t) >= 2 * len(_FENCE) and t.startswith(_FENCE) and t.endswith(_FENCE):
        inner = t[len(_FENCE):-len(_FENCE)]
        if inner.startswith(("json", "JSON")):
            inner = inner[4:]
        return inner.strip()
    return t


def _answer_blocks(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping ``<answer>...</answer>`` blocks, left to right: (start, end, content).

    Each block closes at the first ``</answer>`` after its opening tag (what the non-greedy
    regex ``<answer>(.*?)</answer>`` finds), in one pass over the text.
    """
    out = []
    pos = 0
    while True:
        i = text.find(_ANS_OPEN, pos)
        if i < 0:
            break
        j = text.find(_ANS_CLOSE, i + len(_ANS_OPEN))
        if j < 0:  # no closing tag after this opening: none after any later one either
            break
        out.append((i, j + len(_ANS_CLOSE), text[i + len(_ANS_OPEN):j]))
        pos = j + len(_ANS_CLOSE)
    return out


def _think_content(text: str) -> str | None:
    """Stripped content of the first complete ``<think>...</think>`` block, else None."""
    i = text.find(_THINK_OPEN)
    if i < 0:
        return None
    j = text.find(_THINK_CLOSE, i + len(_THINK_OPEN))
    return None if j < 0 else text[i + len(_THINK_OPEN):j].strip()


def _drop_think(text: str, unclosed_to_end: bool = False) -> str:
    """``text`` without its complete ``<think>...</think>`` blocks; with
    ``unclosed_to_end`` an unclosed ``<think>`` also drops everything after it."""
    parts = []
    pos = 0
    while True:
        i = text.find(_THINK_OPEN, pos)
        if i < 0:
            break
        j = text.find(_THINK_CLOSE, i + len(_THINK_OPEN))
        if j < 0:
            if unclosed_to_end:
                parts.append(text[pos:i])
                pos = len(text)
            break
        parts.append(text[pos:i])
        pos = j + len(_THINK_CLOSE)
    parts.append(text[pos:])
    return "".join(parts)


def _load_json_object(s: str) -> tuple[dict | None, str | None]:
    s = _strip_fence(s)
    if not s:
        return None, "empty answer"
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError) as exc:
        return None, f"answer is not valid JSON ({type(exc).__name__})"
    if not isinstance(obj, dict):
        return None, f"answer JSON is a {type(obj).__name__}, expected an object"
    return obj, None


def _find_json_object(s: str) -> dict | None:
    """First decodable JSON object anywhere in ``s`` (lenient recovery)."""
    dec = json.JSONDecoder()
    start = s.find("{")
    tries = 0
    while start != -1 and tries < 20:
        try:
            obj, _ = dec.raw_decode(s, start)
            if isinstance(obj, dict):
                return obj
        except (ValueError, RecursionError):
            pass
        start = s.find("{", start + 1)
        tries += 1
    return None


def _query_fragment(s: str) -> str | None:
    """Raw string content after the first ``"query" : "`` (JSON escapes kept), up to the
    closing quote or the end of the text; None when there is no such fragment."""
    key = '"query"'
    pos = s.find(key)
    n = len(s)
    while pos >= 0:
        i = pos + len(key)
        while i < n and s[i].isspace():
            i += 1
        if i < n and s[i] == ":":
            i += 1
            while i < n and s[i].isspace():
                i += 1
            if i < n and s[i] == '"':
                start = j = i + 1
                while j < n and s[j] != '"':
                    if s[j] == "\\":
                        if j + 1 == n:  # a lone backslash at the end escapes nothing
                            break
                        j += 1
                    j += 1
                return s[start:j]
        pos = s.find(key, pos + 1)
    return None


def _recover_query_fragment(s: str) -> str | None:
    raw = _query_fragment(s)
    if raw is None:
        return None
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw.replace('\\"', '"')


def _split_sub(q: str, max_sub: int, split: bool = True
               ) -> tuple[list[str], str | None, list[str]]:
    """Split on %% (when ``split``); (strict list, error, lenient list)."""
    parts = [_clean_query(p) for p in q.split(SUBQUERY_SEP)] if split else [q]
    kept = [p for p in parts if p]
    err = None
    if any(p is None for p in parts):
        err = "empty sub-query between %% separators"
    if len(parts) > max_sub:
        err = f"{len(parts)} sub-queries, at most {max_sub} allowed"
    if any(len(p) > MAX_QUERY_CHARS for p in kept):
        err = f"a query is longer than {MAX_QUERY_CHARS} characters"
    lenient = [p[:MAX_QUERY_CHARS] for p in kept][:max_sub]
    return (kept if err is None else []), err, lenient


def _fail(fmt: str, error: str, lenient: bool, queries: list[str] | None = None,
          **kw: Any) -> ParseResult:
    q = [x for x in (queries or []) if x] if lenient else []
    return ParseResult(ok=False, queries=q, error=error, fmt=fmt,
                       recovered=bool(q), **kw)


def _tag_structure(text: str, think: bool) -> str | None:
    """None if the DeepRetrieval tag layout holds, else the reason."""
    counts = {t: text.count(t) for t in (_THINK_OPEN, _THINK_CLOSE, _ANS_OPEN, _ANS_CLOSE)}
    need = (_THINK_OPEN, _THINK_CLOSE, _ANS_OPEN, _ANS_CLOSE) if think else (_ANS_OPEN, _ANS_CLOSE)
    for t in need:
        if counts[t] != 1:
            return f"expected exactly one {t}, found {counts[t]}"
    if not think and (counts[_THINK_OPEN] or counts[_THINK_CLOSE]):
        return "think tags are not expected in the no-think format"
    pos = [text.find(t) for t in need]
    if pos != sorted(pos):
        return "tags out of order (expected " + " < ".join(need) + ")"
    if text[:pos[0]].strip():
        return f"text before {need[0]}"
    if text[text.rfind(_ANS_CLOSE) + len(_ANS_CLOSE):].strip():
        return "text after </answer>"
    return None


def _outside_chars(text: str, blocks: list[tuple[int, int, str]] | None = None) -> int:
    """Non-space characters outside the last <answer> block and any think block."""
    blocks = _answer_blocks(text) if blocks is None else blocks
    rest = text if not blocks else text[:blocks[-1][0]] + text[blocks[-1][1]:]
    rest = _drop_think(rest)
    return sum(1 for c in rest if not c.isspace())


# --------------------------------------------------------------------------- formats
def _parse_deepretrieval(text: str, lenient: bool, think: bool, think_prefilled: bool,
                         fmt: str, max_sub: int) -> ParseResult:
    if think and think_prefilled and not text.lstrip().startswith(_THINK_OPEN):
        text = _THINK_OPEN + text
    blocks = _answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = _think_content(text)
    n_out = _outside_chars(text, blocks)
    # best-effort query for lenient mode
    def recover() -> list[str]:
        src = answers[-1] if answers else text.split(_ANS_OPEN)[-1] if _ANS_OPEN in text else text
        obj = _find_json_object(src)
        q = obj.get("query") if obj else None
        if not isinstance(q, str):
            q = _recover_query_fragment(src)
        if q is None and answers:
            q = _strip_fence(answers[-1])
        if q is None and not think:  # bare text as the query
            q = src
        q = _clean_query(q)
        if not q:
            return []
        return _split_sub(q, max_sub, max_sub > 1)[2]

    err = _tag_structure(text, think)
    if err is not None:
        return _fail(fmt, err, lenient, recover() if lenient else None,
                     think=think_txt, n_outside=n_out)
    obj, err = _load_json_object(answers[-1])
    if obj is None:
        return _fail(fmt, err or "bad answer", lenient, recover() if lenient else None,
                     think=think_txt, n_outside=n_out)
    q = obj.get("query")
    if not isinstance(q, str):
        return _fail(fmt, "answer JSON has no string 'query'", lenient,
                     recover() if lenient else None, think=think_txt, n_outside=n_out)
    q = _clean_query(q)
    if not q:
        return _fail(fmt, "query is empty", lenient, None, think=think_txt, n_outside=n_out)
    queries, err, len_q = _split_sub(q, max_sub, max_sub > 1)
    if err:
        return _fail(fmt, err, lenient, len_q, think=think_txt, n_outside=n_out)
    return ParseResult(ok=True, queries=queries, think=think_txt, fmt=fmt, n_outside=n_out)


def _parse_acqo(text: str, lenient: bool, max_sub: int) -> ParseResult:
    fmt = "acqo"
    n_out = 0

    def recover() -> list[str]:
        obj = _find_json_object(text)
        q = obj.get("query") if obj else None
        if isinstance(q, list):
            q = SUBQUERY_SEP.join(x for x in q if isinstance(x, str))
        if not isinstance(q, str):
            q = _recover_query_fragment(text)
        q = _clean_query(q) if q is not None else None
        return _split_sub(q, max_sub)[2] if q else []

    obj, err = _load_json_object(text)
    if obj is None:
        return _fail(fmt, err or "bad JSON", lenient, recover() if lenient else None,
                     n_outside=n_out)
    q = obj.get("query")
    if not isinstance(q, str):
        return _fail(fmt, "JSON has no string 'query'", lenient,
                     recover() if lenient else None)
    q = _clean_query(q)
    if not q:
        return _fail(fmt, "query is empty", lenient, None)
    queries, err, len_q = _split_sub(q, max_sub)
    if err:
        return _fail(fmt, err, lenient, len_q)
    return ParseResult(ok=True, queries=queries, fmt=fmt)


def _parse_sage(text: str, lenient: bool, n_strategies: int = 5) -> ParseResult:
    fmt = "sage"
    blocks = _answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = _think_content(text)
    n_out = _outside_chars(text, blocks) if answers else 0
    body = answers[-1] if answers else _drop_think(text)

    def recover() -> tuple[list[str], int | None]:
        obj = _find_json_object(body) or _find_json_object(text)
        q = obj.get("query") if obj else None
        s = obj.get("strategy") if obj else None
        if not isinstance(q, str):
            q = _recover_query_fragment(body) or _recover_query_fragment(text)
        if s is None:
            m = _STRATEGY_FRAG_RE.search(body) or _STRATEGY_FRAG_RE.search(text)
            s = m.group(1) if m else None
        try:
            s = int(s) if s is not None and not isinstance(s, bool) else None
        except (TypeError, ValueError):
            s = None
        if s is not None and not 1 <= s <= n_strategies:
            s = None
        q = _clean_query(q) if q is not None else None
        return ([q[:MAX_QUERY_CHARS]] if q else []), s

    def fail(err: str) -> ParseResult:
        qs, s = recover() if lenient else ([], None)
        res = _fail(fmt, err, lenient, qs, think=think_txt, n_outside=n_out)
        res.strategy = s if lenient else None
        return res

    if len(answers) > 1:
        return fail(f"expected at most one <answer> block, found {len(answers)}")
    if text.count(_ANS_OPEN) != len(answers) or text.count(_ANS_CLOSE) != len(answers):
        return fail("unbalanced <answer> tags")
    obj, err = _load_json_object(body)
    if obj is None:
        return fail(err or "bad JSON")
    q, s = obj.get("query"), obj.get("strategy")
    if not isinstance(q, str):
        return fail("JSON has no string 'query'")
    q = _clean_query(q)
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


def _parse_plain(text: str, lenient: bool) -> ParseResult:
    fmt = "plain"
    blocks = _answer_blocks(text)
    answers = [b[2] for b in blocks]
    think_txt = _think_content(text)
    if answers:
        n_out = _outside_chars(text, blocks)
        q = _clean_query(answers[-1])
        if q and len(answers) == 1:
            q = q.strip('"').strip() or None
            if q:
                return ParseResult(ok=True, queries=[q[:MAX_QUERY_CHARS]], think=think_txt,
                                   fmt=fmt, n_outside=n_out)
        err = "empty <answer> block" if not q else "several <answer> blocks"
        return _fail(fmt, err, lenient, [q[:MAX_QUERY_CHARS]] if q else None,
                     think=think_txt, n_outside=n_out)
    if _ANS_OPEN in text or _ANS_CLOSE in text:
        tail = text.split(_ANS_OPEN)[-1].replace(_ANS_CLOSE, "")
        q = _clean_query(tail)
        n_out = sum(1 for c in text if not c.isspace()) - (len(q.replace(" ", "")) if q else 0)
        return _fail(fmt, "unbalanced <answer> tags", lenient,
                     [q[:MAX_QUERY_CHARS]] if q else None, think=think_txt, n_outside=n_out)
    body = _drop_think(text, unclosed_to_end=True)
    q = _clean_query(body)
    if not q:
        return ParseResult(ok=False, error="empty completion", fmt=fmt, think=think_txt)
    q = q.strip('"').strip()
    if not q:
        return ParseResult(ok=False, error="empty completion", fmt=fmt, think=think_txt)
    if len(q) > MAX_QUERY_CHARS:
        return _fail(fmt, f"query is longer than {MAX_QUERY_CHARS} characters", lenient,
                     [q[:MAX_QUERY_CHARS]])
    return ParseResult(ok=True, queries=[q], think=think_txt, fmt=fmt)


# --------------------------------------------------------------------------- public
def parse_completion(text: Any, fmt: str, *, lenient: bool = False, think: bool | None = None,
                     think_prefilled: bool = False, max_subqueries: int | None = None
                     ) -> ParseResult:
    """Parse one model completion in format ``fmt`` (see module docstring).

    ``text`` may be str, bytes (decoded as UTF-8 with replacement) or a list of chat
    messages (assistant contents are concatenated). ``max_subqueries`` defaults to 3 for
    ``acqo`` (ACQO App. C: "no more than 3") and 1 elsewhere.
    """
    if fmt not in FORMATS:
        raise QrlibError(f"unknown completion format {fmt!r}; accepted: {list(FORMATS)}")
    s, err = _to_text(text)
    if s is None:
        return ParseResult(ok=False, error=err, fmt=fmt)
    truncated = len(s) > MAX_CHARS
    if truncated:
        if not lenient:
            return ParseResult(ok=False, error=f"completion longer than {MAX_CHARS} characters",
                               fmt=fmt, truncated=True)
        s = s[:MAX_CHARS]
    if max_subqueries is None:
        max_subqueries = 3 if fmt == "acqo" else 1
    if max_subqueries < 1:
        raise QrlibError(f"max_subqueries must be >= 1, got {max_subqueries}")
    try:
        if fmt.startswith("deepretrieval"):
            use_think = (fmt == "deepretrieval") if think is None else bool(think)
            res = _parse_deepretrieval(s, lenient, use_think, think_prefilled, fmt,
                                       max_subqueries)
        elif fmt == "acqo":
            res = _parse_acqo(s, lenient, max_subqueries)
        elif fmt == "sage":
            res = _parse_sage(s, lenient)
        else:
            res = _parse_plain(s, lenient)
    except Exception as exc:  # noqa: BLE001 - the contract is: never raise on model text
        res = ParseResult(ok=False, error=f"parser failure: {type(exc).__name__}", fmt=fmt)
    if truncated:
        res.truncated = True
        if res.ok:
            res.ok, res.error, res.recovered = False, "completion truncated", True
    return res


def parse_batch(texts: list[Any], fmt: str, **kwargs: Any) -> list[ParseResult]:
    """:func:`parse_completion` over a list."""
    return [parse_completion(t, fmt, **kwargs) for t in texts]
