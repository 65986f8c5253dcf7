"""Query decomposition for the bandit study (Petcu et al. 2025, "Query Decomposition for
RAG: Balancing Exploration-Exploitation", Sec. 3.2-3.4 and Appendix A.1).

Three ways to split a multi-hop request into sub-queries, each sub-query becoming one arm
of :mod:`qrlib.methods.bandits.bandits`:

* :func:`oracle_split` -- one sub-query per gold supporting title (an upper bound: the
  decomposition knows which entities the answer needs).
* :func:`heuristic_split` -- deterministic rules, no model: named-entity spans, clause
  boundaries and "X of Y" relation chains.
* :func:`model_split` -- an instruction model with the paper's two decomposition prompts
  (problem-definition queries, specialised queries; Figures 6-7, rewritten in
  :mod:`qrlib.methods.bandits.prompts`), cached as JSON so notebooks do not regenerate.

Two-level hierarchies for the correlated-bandit study (Sec. 3.4) come from
:func:`heuristic_hierarchy` (parents = heuristic split, children = entity- and
aspect-focused variants of each parent) or :func:`model_hierarchy`.
"""
from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qrlib.methods.bandits.prompts  # noqa: F401  (the templates model_split renders)
from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json
from qrlib.generation import policy, prompts as P  # policy.generate: late-bound, patchable in tests

__all__ = [
    "oracle_split", "heuristic_split", "heuristic_hierarchy", "entity_spans",
    "content_words", "parse_query_list", "model_split", "model_hierarchy",
]

# A small English stop list: function words plus question words. Kept here (not a
# dependency) because the split must be deterministic and dependency-free.
_STOP = frozenset("""
a an the of in on at to for from by with about as into onto over under than then and or
but nor so yet both either neither is are was were be been being am do does did done has
have had having which who whom whose what when where why how that this these those there
it its it's he she they them their his her him we you your i me my our us one ones
more most less least many much same other another such any all some no not also only
very can could would should will shall may might must first last name named called
""".split())
_WH = frozenset("which who whom whose what when where why how is are was were do does did "
                "in on the a an name".split())
_CONNECT = frozenset("of the de la le du del des von van der y and & for on in at".split())
_TOKEN = re.compile(r"[\w][\w'’.\-&]*|\"[^\"]+\"", re.UNICODE)


def _clean(text: str) -> str:
    text = html.unescape(str(text))
    return " ".join(text.split()).strip()


def _strip_q(text: str) -> str:
    return _clean(text).rstrip("?!. ").strip()


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words or question words, in order."""
    words = re.findall(r"[\w][\w'’\-]*", _clean(text).lower())
    words = [re.sub(r"['’]s$", "", w) for w in words]
    return [w for w in words if w not in _STOP and len(w) > 1 or w.isdigit()]


def _is_cap(tok: str) -> bool:
    return bool(tok) and (tok[0].isupper() or tok[0].isdigit() or tok.startswith('"'))


def entity_spans(text: str) -> list[str]:
    """Capitalised multi-word spans ("Battle of Manila", "West Of Shanghai") and quoted
    strings, in order of appearance. The first word of the sentence counts only when it is
    not a question word. Connectors such as "of", "the", "de" join two capitalised words."""
    toks = _TOKEN.findall(_strip_q(text))
    spans: list[str] = []
    cur: list[str] = []
    pending: list[str] = []
    for i, tok in enumerate(toks):
        t = tok.rstrip(",;:")
        if _is_cap(t) and not (i == 0 and t.lower() in _WH):
            if cur and pending:
                cur.extend(pending)
            pending = []
            cur.append(t.strip('"'))
        elif cur and t.lower() in _CONNECT and t.lower() not in ("and", "&") and not pending:
            pending = [t]
        else:
            if cur:
                spans.append(" ".join(cur))
            cur, pending = [], []
        if cur and tok.endswith((",", ";", ":")):
            spans.append(" ".join(cur))
            cur, pending = [], []
    if cur:
        spans.append(" ".join(cur))
    out: list[str] = []
    for s in spans:
        s = re.sub(r"'s$|’s$", "", s).strip()
        if s and s.lower() not in _WH and s not in out:
            out.append(s)
    return out


def _dedupe(parts: Sequence[str], limit: int | None = None) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for p in parts:
        p = _clean(p)
        key = " ".join(content_words(p)) or p.lower()
        if not p or key in seen:
            continue
        seen.add(key)
        out.append(p)
        if limit is not None and len(out) >= limit:
            break
    return out


def oracle_split(question: str, gold_titles: Sequence[str]) -> list[str]:
    """One sub-query per gold supporting title: ``"<title> <aspect words>"``.

    The aspect words are the question's content words that belong to no gold title, so
    each sub-query names one needed entity plus what is asked about it. Titles are
    HTML-unescaped and de-duplicated in order. Deterministic; an oracle because it reads
    the qrels' titles.
    """
    if not isinstance(question, str) or not question.strip():
        raise QrlibError("oracle_split: question must be a non-empty string")
    titles = _dedupe([_clean(t) for t in (gold_titles or []) if str(t).strip()])
    if not titles:
        raise QrlibError("oracle_split: gold_titles is empty; pass the request's supporting "
                         "titles (e.g. query_meta[qid]['supporting_titles'])")
    title_words = {w for t in titles for w in content_words(t)}
    aspect = [w for w in content_words(question) if w not in title_words][:6]
    suffix = (" " + " ".join(aspect)) if aspect else ""
    return [f"{t}{suffix}" for t in titles]


_COMPARE = re.compile(r"^(?P<head>[^,]+?),\s*(?P<alts>.+?\s+or\s+.+?)(?:,\s*(?P<tail>.+))?$")
_CLAUSE = re.compile(r",\s+|;\s+|:\s+|\s+(?=(?:who|whose|which|that|where|when)\s)|"
                     r"\s+and\s+(?=(?:who|whose|which|what|where|when|is|was|did)\s)")


def _alternatives(q: str) -> tuple[list[str], str] | None:
    """"<head>, A or B[, tail]" or "... A or B ..." with capitalised A and B."""
    m = _COMPARE.match(q)
    if m:
        alts = re.split(r"\s+or\s+", m.group("alts"))
        alts = [re.sub(r"^(?:the|a|an)\s+", "", a.strip(), flags=re.I) for a in alts]
        if len(alts) >= 2 and all(alts):
            aspect = " ".join(content_words(m.group("head") + " " + (m.group("tail") or "")))
            return alts, aspect
    ents = entity_spans(q)
    if " or " in q and len(ents) >= 2:
        ent_words = {w for e in ents for w in content_words(e)}
        aspect = " ".join(w for w in content_words(q) if w not in ent_words)
        return ents, aspect
    return None


def heuristic_split(question: str, max_parts: int = 4) -> list[str]:
    """Deterministic, model-free decomposition of a (multi-hop) question.

    Rules, in order, de-duplicated by content words and capped at ``max_parts``:

    1. comparisons ("Which X, A or B?") -> one sub-query per alternative plus the asked
       aspect ("A X");
    2. two or more named-entity spans -> one sub-query per entity plus the aspect;
    3. clause boundaries (commas, relative pronouns "who/whose/which/that/where") -> one
       sub-query per clause with at least two content words;
    4. relation chains "the A of the B of C" -> the inner suffixes ("B of C", ...).

    Returns ``[question]`` (cleaned) when no rule applies. Never calls a model.
    """
    if not isinstance(question, str) or not question.strip():
        raise QrlibError("heuristic_split: question must be a non-empty string")
    if max_parts < 1:
        raise QrlibError(f"heuristic_split: max_parts must be >= 1, got {max_parts}")
    q = _strip_q(question)
    parts: list[str] = []
    alt = _alternatives(q)
    if alt is not None:
        alts, aspect = alt
        parts += [f"{a} {aspect}".strip() for a in alts]
    else:
        ents = entity_spans(q)
        ent_words = {w for e in ents for w in content_words(e)}
        aspect = " ".join(w for w in content_words(q) if w not in ent_words)
        if len(ents) >= 2:
            parts += [f"{e} {aspect}".strip() for e in ents]
        elif len(ents) == 1 and aspect:
            parts += [ents[0], f"{ents[0]} {aspect}"]
        clauses = [c.strip() for c in _CLAUSE.split(q) if c and c.strip()]
        if len(clauses) >= 2:
            parts += [c for c in clauses if len(content_words(c)) >= 2]
        # relation chain: suffixes after each lower-case " of " (case-sensitive, so the
        # "Of" inside a title-cased entity does not split it)
        idx = [m.end() for m in re.finditer(r"(?<=\s)of (?:the |a |an )?", q)]
        for i in idx[1:] + idx[:1]:  # innermost relations first, the widest last
            suffix = q[i:].strip()
            if len(content_words(suffix)) >= 2 or entity_spans(suffix):
                parts.append(suffix)
        for ent in ents:  # possessive "X's father" -> "X father"
            m = re.search(re.escape(ent) + r"(?:'s|’s)\s+(\w+)", q)
            if m:
                parts.append(f"{ent} {m.group(1)}")
    parts = _dedupe(parts, max_parts)
    if not parts:
        parts = [q]
    return parts


def heuristic_hierarchy(question: str, max_parents: int = 3,
                        max_children: int = 3) -> list[dict[str, Any]]:
    """A deterministic two-level decomposition for the hierarchical study (Sec. 3.4).

    Parents are :func:`heuristic_split` sub-queries. Each parent gets children that narrow
    it: each entity span of the parent alone, the parent's non-entity aspect joined to its
    first entity, and the parent joined to the question's remaining content words.
    Returns ``[{"parent": str, "children": [str, ...]}, ...]``; every parent has at least
    one child distinct from it.
    """
    parents = heuristic_split(question, max_parts=max_parents)
    q_words = content_words(question)
    out: list[dict[str, Any]] = []
    for p in parents:
        ents = entity_spans(p)
        ent_words = {w for e in ents for w in content_words(e)}
        aspect = [w for w in content_words(p) if w not in ent_words]
        cands: list[str] = list(ents)
        if ents and aspect:
            cands.append(f"{ents[0]} {' '.join(aspect[:3])}")
        extra = [w for w in q_words if w not in content_words(p)]
        if extra:
            cands.append(f"{p} {' '.join(extra[:4])}")
        words = content_words(p)
        if len(words) >= 4:
            half = len(words) // 2
            cands += [" ".join(words[:half]), " ".join(words[half:])]
        p_key = " ".join(content_words(p))
        children = [c for c in _dedupe(cands) if " ".join(content_words(c)) != p_key]
        if not children:
            children = [f"{p} {question}".strip()]
        out.append({"parent": p, "children": children[:max_children]})
    return out


# --------------------------------------------------------------------------- model split
def parse_query_list(text: str, max_queries: int | None = None) -> list[str]:
    """Sub-queries from a completion that should be a JSON list of strings.

    Takes the first ``[...]`` that parses as JSON; falls back to one query per non-empty
    line (bullets and numbering stripped) when there are several lines or list markers.
    Never raises; returns ``[]`` for junk such as a one-line refusal.
    """
    text = str(text or "")
    out: list[str] = []
    for m in re.finditer(r"\[[^\[\]]*\]", text, flags=re.S):
        try:
            val = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(val, list):
            out = [str(v) for v in val if isinstance(v, (str, int, float)) and str(v).strip()]
            if out:
                break
    if not out:
        lines, marked = [], False
        for raw in text.splitlines():
            line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", raw).strip().strip('",')
            if len(content_words(line)) >= 1 and not line.startswith(("[", "]", "```")):
                lines.append(line)
                marked |= line != raw.strip()
        # one unmarked line of prose ("I cannot help ...") is not a list of queries
        if marked or len(lines) >= 2:
            out = lines
    out = _dedupe(out)
    return out[:max_queries] if max_queries else out


def _cache_key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_split(questions: Sequence[str], model: Any, tokenizer: Any, *,
                prompt: str = "bandit/problem-definition", n_queries: int = 4,
                n_samples: int = 1, max_new_tokens: int = 160, temperature: float = 0.7,
                top_p: float = 0.95, cache_path: str | Path | None = None,
                model_name: str = "", fallback: bool = True, seed: int | None = 0,
                batch_size: int = 8) -> list[list[list[str]]]:
    """Decompose each question with an instruction model (paper Appendix A.1).

    Returns, per question, ``n_samples`` decompositions (lists of sub-queries); with
    ``n_samples > 1`` sampling is on (the paper decomposes each request 10 times and
    averages). Generation goes through :func:`qrlib.generation.policy.generate`. Results are cached
    in the JSON file ``cache_path`` keyed by (model_name, prompt, n_queries, question,
    sample index); a cached entry is never regenerated. An unparsable completion falls
    back to :func:`heuristic_split` when ``fallback`` (recorded as such in the cache).
    """
    cache: dict[str, Any] = {}
    if cache_path is not None and Path(cache_path).exists():
        cache = json.loads(Path(cache_path).read_text())
    todo: list[int] = []
    keys = [[_cache_key(model_name, prompt, n_queries, q, s) for s in range(n_samples)]
            for q in questions]
    for i, ks in enumerate(keys):
        if any(k not in cache for k in ks):
            todo.append(i)
    if todo:
        texts = [P.render(prompt, tokenizer, request=_clean(questions[i]),
                          n_queries=n_queries) for i in todo]
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               do_sample=n_samples > 1, temperature=temperature, top_p=top_p,
                               num_return_sequences=n_samples, seed=seed, batch_size=batch_size,
                               progress=True)
        for j, i in enumerate(todo):
            for s in range(n_samples):
                raw = outs[j * n_samples + s]
                qs = parse_query_list(raw, n_queries)
                entry = {"queries": qs, "raw": raw, "fallback": False}
                if not qs and fallback:
                    entry = {"queries": heuristic_split(questions[i], n_queries),
                             "raw": raw, "fallback": True}
                cache[keys[i][s]] = entry
        if cache_path is not None:
            save_json(cache, cache_path)
    return [[cache[k]["queries"] for k in ks] for ks in keys]


def model_hierarchy(questions: Sequence[str], model: Any, tokenizer: Any, *,
                    n_parents: int = 3, n_children: int = 3,
                    cache_path: str | Path | None = None, model_name: str = "",
                    seed: int | None = 0) -> list[list[dict[str, Any]]]:
    """Two-level model decomposition: problem-definition queries as parents, specialised
    queries generated for each parent as its children (Sec. 3.4, Figure 3)."""
    parents = model_split(questions, model, tokenizer, prompt="bandit/problem-definition",
                          n_queries=n_parents, cache_path=cache_path, model_name=model_name,
                          seed=seed)
    flat = [p for ps in parents for p in ps[0]]
    kids = model_split(flat, model, tokenizer, prompt="bandit/specialised",
                       n_queries=n_children, cache_path=cache_path, model_name=model_name,
                       seed=seed)
    out: list[list[dict[str, Any]]] = []
    it = iter(kids)
    for ps in parents:
        out.append([{"parent": p, "children": next(it)[0]} for p in ps[0]])
    return out
