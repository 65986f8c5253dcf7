"""Completion -> query (or sub-queries): the generic parse API and the registry of output
formats every paper registers into.

``parse_completion(text, fmt)`` never raises on model output: junk (truncated JSON,
unbalanced tags, empty queries, too many sub-queries, huge or non-UTF-8 text) gives a
:class:`ParseResult` with ``ok=False`` and an ``error`` naming the rule that broke. Only a
bad *argument* (unknown ``fmt``) raises :class:`~qrlib.core.errors.QrlibError`.

Each paper registers its formats (an :class:`OutputFormat`: the parser, the default number
of sub-queries, the SFT target layout) from ``qrlib/methods/<paper>/formats.py``:

``deepretrieval``, ``deepretrieval-nothink`` (:mod:`qrlib.methods.deepretrieval.formats`)
    ``<think>...</think><answer>{"query": "..."}</answer>`` (DeepRetrieval Sec. 2.2, App. H).
``acqo`` (:mod:`qrlib.methods.acqo.formats`)
    One JSON object ``{"query": "a%%b%%c"}`` (ACQO App. C, Fig. 7a), at most 3 sub-queries.
``sage`` (:mod:`qrlib.methods.sage.formats`)
    JSON ``{"query": "...", "strategy": k}`` (SAGE Sec. 2.3, App. A.1 Fig. 5).
``plain`` (:mod:`qrlib.methods.rlqr.formats`)
    The rewritten query as text, optionally inside ``<answer>`` tags (RL-QR Sec. 3.2).

:func:`parse_completion` imports every paper on a miss
(:func:`qrlib.core.registry.load_methods`); :func:`formats` lists the registered names.
The scanners below (tags, fences, JSON recovery, sub-query splitting) are public because
the papers' parsers are built from them.

``lenient=True`` recovers a query from malformed output (a ``"query": "..."`` fragment in
broken JSON, an answer without tags, too many sub-queries cut to the limit ...). The
result then has ``queries`` filled but ``ok=False`` and ``recovered=True``: the format did
not hold, so format-gated rewards still see a failure, while retrieval can still run.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.registry import load_methods

MAX_CHARS = 32_768          # longer completions are truncated before parsing (and flagged)
MAX_QUERY_CHARS = 4_096     # a single (sub-)query longer than this is rejected
SUBQUERY_SEP = "%%"

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANS_OPEN, ANS_CLOSE = "<answer>", "</answer>"
_FENCE = "```"
# Every scanner below runs in time linear in the text: tags and fences are found with
# str.find/str.strip (no regex with nested or adjacent quantifiers over the same
# characters, which backtrack polynomially on an unclosed fence followed by whitespace or
# on thousands of unclosed tags). The papers' parsers keep to the same rule.


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


SEARCH_MODES = ("rewrite", "expand")


def searched_text(original: str, rewrite: str, mode: str) -> str:
    """The text a rewrite searches with: the rewrite alone (``rewrite``, DeepRetrieval's task)
    or the original query followed by it (``expand``); an empty rewrite searches the
    original. The one rule of training rewards, test decoding and the prompting baselines."""
    if mode not in SEARCH_MODES:
        raise QrlibError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
    rewrite = (rewrite or "").strip()
    if not rewrite:
        return original
    return f"{original} {rewrite}".strip() if mode == "expand" else rewrite


def completion_text(completion: Any) -> str:
    """A completion (str, bytes or chat messages) as text; ``""`` when it has none."""
    text, _ = _to_text(completion)
    return text or ""


def clean_query(q: Any) -> str | None:
    if not isinstance(q, str):
        return None
    q = " ".join(q.replace("\x00", " ").split())
    return q or None


def strip_fence(s: str) -> str:
    """Content of a Markdown code fence around the whole text (```json ... ```), else the
    stripped text. The closing fence is the last ``` with only whitespace after it."""
    t = s.strip()
    if len(t) >= 2 * len(_FENCE) and t.startswith(_FENCE) and t.endswith(_FENCE):
        inner = t[len(_FENCE):-len(_FENCE)]
        if inner.startswith(("json", "JSON")):
            inner = inner[4:]
        return inner.strip()
    return t


def answer_blocks(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping ``<answer>...</answer>`` blocks, left to right: (start, end, content).

    Each block closes at the first ``</answer>`` after its opening tag (what the non-greedy
    regex ``<answer>(.*?)</answer>`` finds), in one pass over the text.
    """
    out = []
    pos = 0
    while True:
        i = text.find(ANS_OPEN, pos)
        if i < 0:
            break
        j = text.find(ANS_CLOSE, i + len(ANS_OPEN))
        if j < 0:  # no closing tag after this opening: none after any later one either
            break
        out.append((i, j + len(ANS_CLOSE), text[i + len(ANS_OPEN):j]))
        pos = j + len(ANS_CLOSE)
    return out


def think_content(text: str) -> str | None:
    """Stripped content of the first complete ``<think>...</think>`` block, else None."""
    i = text.find(THINK_OPEN)
    if i < 0:
        return None
    j = text.find(THINK_CLOSE, i + len(THINK_OPEN))
    return None if j < 0 else text[i + len(THINK_OPEN):j].strip()


def drop_think(text: str, unclosed_to_end: bool = False) -> str:
    """``text`` without its complete ``<think>...</think>`` blocks; with
    ``unclosed_to_end`` an unclosed ``<think>`` also drops everything after it."""
    parts = []
    pos = 0
    while True:
        i = text.find(THINK_OPEN, pos)
        if i < 0:
            break
        j = text.find(THINK_CLOSE, i + len(THINK_OPEN))
        if j < 0:
            if unclosed_to_end:
                parts.append(text[pos:i])
                pos = len(text)
            break
        parts.append(text[pos:i])
        pos = j + len(THINK_CLOSE)
    parts.append(text[pos:])
    return "".join(parts)


def load_json_object(s: str) -> tuple[dict | None, str | None]:
    s = strip_fence(s)
    if not s:
        return None, "empty answer"
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError) as exc:
        return None, f"answer is not valid JSON ({type(exc).__name__})"
    if not isinstance(obj, dict):
        return None, f"answer JSON is a {type(obj).__name__}, expected an object"
    return obj, None


def find_json_object(s: str) -> dict | None:
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


def recover_query_fragment(s: str) -> str | None:
    raw = _query_fragment(s)
    if raw is None:
        return None
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw.replace('\\"', '"')


def split_subqueries(q: str, max_sub: int, split: bool = True
               ) -> tuple[list[str], str | None, list[str]]:
    """Split on %% (when ``split``); (strict list, error, lenient list)."""
    parts = [clean_query(p) for p in q.split(SUBQUERY_SEP)] if split else [q]
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


def fail_result(fmt: str, error: str, lenient: bool, queries: list[str] | None = None,
          **kw: Any) -> ParseResult:
    q = [x for x in (queries or []) if x] if lenient else []
    return ParseResult(ok=False, queries=q, error=error, fmt=fmt,
                       recovered=bool(q), **kw)


def outside_chars(text: str, blocks: list[tuple[int, int, str]] | None = None) -> int:
    """Non-space characters outside the last <answer> block and any think block."""
    blocks = answer_blocks(text) if blocks is None else blocks
    rest = text if not blocks else text[:blocks[-1][0]] + text[blocks[-1][1]:]
    rest = drop_think(rest)
    return sum(1 for c in rest if not c.isspace())



# --------------------------------------------------------------------------- registry
Parser = Callable[..., ParseResult]


@dataclass(frozen=True)
class OutputFormat:
    """One completion format.

    ``parse(text, *, fmt, lenient, think, think_prefilled, max_subqueries)`` reads a
    completion (already text, at most :data:`MAX_CHARS` long) and may raise on anything
    unexpected (:func:`parse_completion` turns that into a failed result);
    ``max_subqueries``: the default limit when the caller gives none; ``sft_target(query)``:
    a format-valid completion carrying ``query`` for the SFT warm start (None: the bare
    JSON object ``{"query": ...}``); ``source``: the paper section the rules come from.
    """

    name: str
    parse: Parser
    max_subqueries: int = 1
    sft_target: Callable[[str], str] | None = None
    source: str = ""


FORMATS: dict[str, OutputFormat] = {}


def register_format(spec: OutputFormat) -> OutputFormat:
    """Add a format to the registry (names are unique)."""
    if spec.name in FORMATS:
        raise QrlibError(f"completion format {spec.name!r} is registered twice")
    FORMATS[spec.name] = spec
    return spec


def formats() -> tuple[str, ...]:
    """Names of every registered format, in registration order (every paper imported)."""
    load_methods()
    return tuple(FORMATS)


def get_format(fmt: str) -> OutputFormat:
    """The format registered as ``fmt`` (every paper is imported first on a miss)."""
    if fmt not in FORMATS:
        load_methods()
    if fmt not in FORMATS:
        raise QrlibError(f"unknown completion format {fmt!r}; accepted: {list(FORMATS)}")
    return FORMATS[fmt]


def sft_target(query: str, fmt: str) -> str:
    """A format-valid completion carrying ``query`` (for the SFT warm start): the format's
    own layout, else (formats without one, unknown names) the JSON object."""
    if fmt not in FORMATS:
        load_methods()
    spec = FORMATS.get(fmt)
    if spec is not None and spec.sft_target is not None:
        return spec.sft_target(query)
    return json.dumps({"query": query}, ensure_ascii=False)


# --------------------------------------------------------------------------- public
def parse_completion(text: Any, fmt: str, *, lenient: bool = False, think: bool | None = None,
                     think_prefilled: bool = False, max_subqueries: int | None = None
                     ) -> ParseResult:
    """Parse one model completion in format ``fmt`` (see module docstring).

    ``text`` may be str, bytes (decoded as UTF-8 with replacement) or a list of chat
    messages (assistant contents are concatenated). ``max_subqueries`` defaults to the
    format's own limit (3 for ``acqo``, ACQO App. C: "no more than 3"; 1 elsewhere).
    """
    spec = get_format(fmt)
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
        max_subqueries = spec.max_subqueries
    if max_subqueries < 1:
        raise QrlibError(f"max_subqueries must be >= 1, got {max_subqueries}")
    try:
        res = spec.parse(s, fmt=fmt, lenient=lenient, think=think,
                         think_prefilled=think_prefilled, max_subqueries=max_subqueries)
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
