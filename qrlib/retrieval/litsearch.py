"""Literature-search adapters: PubMed (E-utilities ESearch) and ClinicalTrials.gov (API v2).

DeepRetrieval's literature-search task (Table 1, left) sends the model's Boolean query to a
real search engine and rewards Recall@3K with the tiers of Table 8
(``deepretrieval_recall`` with ``k=3000``). These clients take a Boolean query and return
the engine's ranked id list (PMIDs / NCT ids) behind the retriever protocol of
:mod:`qrlib.retrieval.retrievers`, so :class:`qrlib.rl.env.RewardEnv` uses them unchanged::

    search(texts, k) -> list[list[(doc_id, score)]]     # score = 1 / rank

Engines return no scores, so the score is the reciprocal rank.

* :class:`PubMedSearch` — ``GET esearch.fcgi?db=pubmed&term=...&retmode=json&retmax=k``;
  reads ``esearchresult.idlist`` (pages with ``retstart`` when ``k`` exceeds
  ``page_size``; PubMed serves at most 10,000 ids per query).
* :class:`ClinicalTrialsSearch` — ``GET /api/v2/studies?query.term=...&pageSize=1000
  &fields=NCTId&format=json``; reads ``studies[].protocolSection.identificationModule.nctId``
  and follows ``nextPageToken`` until ``k`` ids or the last page.

DeepRetrieval's released clients (pat-jj/DeepRetrieval ``code/verl/utils/apis/pubmed.py``
and ``ctgov.py``) make the same calls with ``requests`` (``topk=3000``; PubMed's default
sort order, ClinicalTrials.gov's relevance order, ``pageSize=1000``).

Network use is explicit and bounded: only the standard library (``urllib``), a connect
check with a short timeout (``connect_timeout_s``) before the first request to a host, a
request timeout (``timeout_s``), and one clear :class:`~qrlib.core.errors.QrlibError` when the
host cannot be reached. Tests and offline notebooks inject a transport instead
(:class:`ReplayTransport`: recorded responses, no network). Successful responses are kept
in a short on-disk cache (``cache_dir()/litsearch``, ``cache_ttl_s``; default one day).
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write, cache_dir
from qrlib.retrieval.base import Ranked, check_query_batch


PUBMED_ESEARCH_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/esearch.fcgi"
CTGOV_STUDIES_URL = "https://clinicaltrials.gov/api/v2/studies"
#: Recall depth of DeepRetrieval's literature-search task (Table 1: Recall@3K).
RECALL_K = 3000
USER_AGENT = "qrlib-litsearch/0.1 (+https://github.com/; research reproduction)"


# --------------------------------------------------------------------------- transports
class Response:
    """One HTTP answer: status code and body bytes."""

    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes | str) -> None:
        self.status = int(status)
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)

    def __repr__(self) -> str:
        return f"Response(status={self.status}, bytes={len(self.body)})"


Transport = Callable[[str, float], Response]


class UrllibTransport:
    """The live transport: ``urllib`` with a connect check and a request timeout.

    Before the first request to a host it opens (and closes) one TCP connection with
    ``connect_timeout_s``; an unreachable host (no network, firewall, DNS failure) becomes
    one :class:`QrlibError` line within that time instead of a hang.
    """

    live = True

    def __init__(self, connect_timeout_s: float = 3.0, user_agent: str = USER_AGENT) -> None:
        self.connect_timeout_s = float(connect_timeout_s)
        self.user_agent = user_agent
        self._checked: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def check(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with self._lock:
            if (host, port) in self._checked:
                return
        try:
            with socket.create_connection((host, port), timeout=self.connect_timeout_s):
                pass
        except (OSError, socket.timeout) as exc:
            raise QrlibError(
                f"cannot reach {host}:{port} within {self.connect_timeout_s:g} s "
                f"({type(exc).__name__}: {exc or 'timed out'}): a live literature search needs "
                "network access; offline, use transport=ReplayTransport(...) with recorded "
                "responses (see tests/fixtures/litsearch)") from None
        with self._lock:
            self._checked.add((host, port))

    def __call__(self, url: str, timeout: float) -> Response:
        self.check(url)
        req = urllib.request.Request(url, headers={"User-Agent": self.user_agent,
                                                   "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - https only
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            body = b""
            try:
                body = exc.read() or b""
            except Exception:  # noqa: BLE001
                pass
            return Response(exc.code, body)
        except (urllib.error.URLError, OSError, socket.timeout) as exc:
            reason = getattr(exc, "reason", exc)
            host = urllib.parse.urlsplit(url).hostname
            raise QrlibError(f"request to {host} failed after at most {timeout:g} s "
                             f"({type(exc).__name__}: {reason}); check the network or use "
                             "transport=ReplayTransport(...) offline") from None


class ReplayTransport:
    """Recorded responses, no network: each request is matched on endpoint and parameters.

    ``records`` is a list of dicts ``{"endpoint": url-without-query, "params": {...},
    "status": 200, "body": <JSON value or text> | "file": <name beside the index>}``. A
    request matches the first record whose endpoint equals the request's and whose
    ``params`` are all present in the request with the same values (so ``tool``/``email``
    need not be recorded). An unmatched request is a :class:`QrlibError` naming it, never a
    network call. ``self.requests`` lists every URL asked for (for paging checks).
    """

    live = False

    def __init__(self, records: Sequence[Mapping[str, Any]], base_dir: str | os.PathLike | None = None) -> None:
        self.records = [dict(r) for r in records]
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.requests: list[str] = []

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> ReplayTransport:
        """Records from a JSON index file (bodies may live in files beside it)."""
        path = Path(path)
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise QrlibError(f"cannot read replay index {path}: {exc}") from None
        if not isinstance(records, list):
            raise QrlibError(f"replay index {path} must hold a JSON list of records")
        return cls(records, base_dir=path.parent)

    def _body(self, rec: Mapping[str, Any]) -> bytes:
        if "file" in rec:
            base = self.base_dir or Path(".")
            return (base / rec["file"]).read_bytes()
        body = rec.get("body", "")
        return body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode("utf-8")

    def __call__(self, url: str, timeout: float) -> Response:
        self.requests.append(url)
        parts = urllib.parse.urlsplit(url)
        endpoint = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        for rec in self.records:
            if rec.get("endpoint") != endpoint:
                continue
            want = {str(k): str(v) for k, v in (rec.get("params") or {}).items()}
            if all(params.get(k) == v for k, v in want.items()):
                if rec.get("raise"):
                    raise QrlibError(str(rec["raise"]))
                return Response(int(rec.get("status", 200)), self._body(rec))
        shown = {k: v for k, v in params.items() if k not in ("tool", "email", "api_key")}
        raise QrlibError(f"no recorded response for {endpoint} with {shown}; record one in "
                         "the replay index or use a live transport")


# --------------------------------------------------------------------------- cache
class ResponseCache:
    """Successful response bodies on disk, keyed by URL, kept for ``ttl_s`` seconds."""

    def __init__(self, root: str | os.PathLike, ttl_s: float = 86_400.0) -> None:
        self.root = Path(root)
        self.ttl_s = float(ttl_s)

    def _path(self, url: str) -> Path:
        return self.root / f"{hashlib.sha256(url.encode('utf-8')).hexdigest()[:32]}.json"

    def get(self, url: str) -> bytes | None:
        path = self._path(url)
        try:
            if time.time() - path.stat().st_mtime > self.ttl_s:
                return None
            rec = json.loads(path.read_text(encoding="utf-8"))
            return rec["body"].encode("utf-8") if rec.get("url") == url else None
        except (OSError, ValueError, KeyError, AttributeError):
            return None

    def put(self, url: str, body: bytes) -> None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return
        atomic_write(self._path(url), json.dumps({"url": url, "time": time.time(), "body": text}))


# --------------------------------------------------------------------------- base client
class _EngineSearch:
    """Shared machinery: request, cache, retries, errors, rate limit, protocol."""

    name = "engine"
    endpoint = ""
    host_label = ""

    def __init__(self, corpus: Any = None, *, transport: Transport | None = None,
                 timeout_s: float = 30.0, connect_timeout_s: float = 3.0,
                 cache: bool | str | os.PathLike = True, cache_ttl_s: float = 86_400.0,
                 retries: int = 1, min_interval_s: float = 0.0, base_url: str | None = None,
                 max_results: int = RECALL_K) -> None:
        # ``corpus`` is accepted (and ignored) so build_retriever(kind, corpus, ...) works:
        # the engine's own index is the corpus.
        self.transport = transport if transport is not None else UrllibTransport(connect_timeout_s)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.min_interval_s = float(min_interval_s)
        self.max_results = int(max_results)
        if base_url:
            self.endpoint = base_url
        live = getattr(self.transport, "live", True)
        if cache and live:
            root = Path(cache) if not isinstance(cache, bool) else cache_dir() / "litsearch"
            self.cache: ResponseCache | None = ResponseCache(root / self.name, cache_ttl_s)
        else:
            self.cache = None
        self._last = 0.0
        self._lock = threading.Lock()
        self.n_requests = 0
        self.n_cache_hits = 0
        self.last_counts: list[int | None] = []

    def __repr__(self) -> str:
        kind = type(self.transport).__name__
        return f"{type(self).__name__}(endpoint={self.endpoint!r}, transport={kind})"

    # -- one request
    def _url(self, params: Mapping[str, Any]) -> str:
        return f"{self.endpoint}?{urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})}"

    def _get_json(self, params: Mapping[str, Any]) -> Any:
        url = self._url(params)
        if self.cache is not None:
            body = self.cache.get(url)
            if body is not None:
                self.n_cache_hits += 1
                return self._decode(body, url)
        attempt = 0
        while True:
            if self.min_interval_s and getattr(self.transport, "live", True):
                with self._lock:
                    wait = self._last + self.min_interval_s - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    self._last = time.monotonic()
            resp = self.transport(url, self.timeout_s)
            self.n_requests += 1
            if resp.status == 200:
                break
            retryable = resp.status == 429 or resp.status >= 500
            if retryable and attempt < self.retries:
                attempt += 1
                if getattr(self.transport, "live", True):
                    time.sleep(min(2.0 ** attempt, 8.0))
                continue
            snippet = " ".join(resp.body[:200].decode("utf-8", errors="replace").split())
            raise QrlibError(f"{self.host_label} returned HTTP {resp.status}"
                             f"{' after retries' if attempt else ''}: {snippet or '(empty body)'}")
        data = self._decode(resp.body, url)
        if self.cache is not None:
            self.cache.put(url, resp.body)
        return data

    def _decode(self, body: bytes, url: str) -> Any:
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            snippet = " ".join(body[:80].decode("utf-8", errors="replace").split())
            raise QrlibError(f"{self.host_label} returned malformed JSON ({type(exc).__name__}: "
                             f"{exc}); body starts {snippet!r}") from None

    # -- protocol
    def ids(self, query: str, k: int = RECALL_K) -> list[str]:
        """The engine's ranked ids for one Boolean query (at most ``k``)."""
        raise NotImplementedError

    def search(self, texts: Sequence[str], k: int = RECALL_K) -> list[Ranked]:
        """One ranked ``(id, 1/rank)`` list per query text; empty text -> empty list."""
        texts = check_query_batch(texts, k)
        k = min(int(k), self.max_results)
        out: list[Ranked] = []
        self.last_counts = []
        for t in texts:
            if not t.strip():
                out.append([])
                self.last_counts.append(0)
                continue
            ids = list(dict.fromkeys(self.ids(t.strip(), k)))[:k]
            out.append([(d, 1.0 / r) for r, d in enumerate(ids, start=1)])
        return out


# --------------------------------------------------------------------------- PubMed
class PubMedSearch(_EngineSearch):
    """PubMed through E-utilities ESearch (JSON mode) -> ranked PMIDs.

    ``sort=None`` keeps ESearch's default order (what DeepRetrieval's client used);
    ``"relevance"`` asks for Best Match. ``api_key``/``tool``/``email`` are passed through
    (NCBI asks for tool and email; a key raises the rate limit from 3 to 10 requests/s,
    and ``min_interval_s`` defaults accordingly).
    """

    name = "pubmed"
    endpoint = PUBMED_ESEARCH_URL
    host_label = "PubMed ESearch"
    #: ESearch returns at most 10,000 UIDs for PubMed (retstart + retmax).
    MAX_IDS = 10_000

    def __init__(self, corpus: Any = None, *, api_key: str | None = None, tool: str = "qrlib",
                 email: str | None = None, sort: str | None = None, page_size: int = 10_000,
                 min_interval_s: float | None = None, **kwargs: Any) -> None:
        api_key = api_key or os.environ.get("NCBI_API_KEY") or None
        if min_interval_s is None:
            min_interval_s = 0.11 if api_key else 0.34
        super().__init__(corpus, min_interval_s=min_interval_s, **kwargs)
        self.api_key, self.tool, self.email, self.sort = api_key, tool, email, sort
        if not 1 <= int(page_size) <= self.MAX_IDS:
            raise QrlibError(f"page_size must be in 1..{self.MAX_IDS}, got {page_size}")
        self.page_size = int(page_size)

    def ids(self, query: str, k: int = RECALL_K) -> list[str]:
        if k > self.MAX_IDS:
            raise QrlibError(f"PubMed ESearch returns at most {self.MAX_IDS} ids per query; "
                             f"got k={k}")
        out: list[str] = []
        count: int | None = None
        while len(out) < k:
            retmax = min(self.page_size, k - len(out))
            data = self._get_json({"db": "pubmed", "term": query, "retmode": "json",
                                   "retmax": retmax, "retstart": len(out) or None,
                                   "sort": self.sort, "tool": self.tool, "email": self.email,
                                   "api_key": self.api_key})
            res = data.get("esearchresult") if isinstance(data, dict) else None
            if not isinstance(res, dict):
                err = data.get("error") if isinstance(data, dict) else None
                raise QrlibError(f"PubMed ESearch answer has no 'esearchresult'"
                                 f"{': ' + str(err) if err else ''}")
            if "ERROR" in res:
                raise QrlibError(f"PubMed ESearch error: {res['ERROR']}")
            idlist = res.get("idlist", [])
            if not isinstance(idlist, list):
                raise QrlibError("PubMed ESearch 'idlist' is not a list")
            try:
                count = int(res.get("count", len(idlist)))
            except (TypeError, ValueError):
                raise QrlibError(f"PubMed ESearch 'count' is not a number: {res.get('count')!r}") from None
            out.extend(str(i) for i in idlist)
            if not idlist or len(out) >= min(count, k):
                break
        self.last_counts.append(count)
        return out[:k]


# --------------------------------------------------------------------------- ClinicalTrials.gov
class ClinicalTrialsSearch(_EngineSearch):
    """ClinicalTrials.gov API v2 ``/studies`` with ``query.term`` -> ranked NCT ids.

    Pages of ``page_size`` (the API's maximum is 1000) are followed through
    ``nextPageToken`` until ``k`` ids are collected or no token is returned.
    ``fields="NCTId"`` keeps the answers small; the order is the API's (relevance for a
    ``query.term`` search unless ``sort`` is given).
    """

    name = "ctgov"
    endpoint = CTGOV_STUDIES_URL
    host_label = "ClinicalTrials.gov API"
    MAX_PAGE = 1000

    def __init__(self, corpus: Any = None, *, page_size: int = 1000, sort: str | None = None,
                 fields: str | None = "NCTId", max_pages: int = 100,
                 min_interval_s: float = 0.1, **kwargs: Any) -> None:
        super().__init__(corpus, min_interval_s=min_interval_s, **kwargs)
        if not 1 <= int(page_size) <= self.MAX_PAGE:
            raise QrlibError(f"page_size must be in 1..{self.MAX_PAGE}, got {page_size}")
        self.page_size, self.sort, self.fields = int(page_size), sort, fields
        self.max_pages = int(max_pages)

    def ids(self, query: str, k: int = RECALL_K) -> list[str]:
        out: list[str] = []
        token: str | None = None
        total: int | None = None
        for page in range(self.max_pages):
            data = self._get_json({"query.term": query, "pageSize": min(self.page_size, k),
                                   "pageToken": token, "fields": self.fields, "sort": self.sort,
                                   "countTotal": "true" if page == 0 else None,
                                   "format": "json"})
            if not isinstance(data, dict) or not isinstance(data.get("studies", []), list):
                raise QrlibError("ClinicalTrials.gov answer is not an object with a "
                                 "'studies' list")
            if page == 0 and "totalCount" in data:
                total = int(data["totalCount"])
            studies = data.get("studies", [])
            new = []
            for s in studies:
                try:
                    new.append(str(s["protocolSection"]["identificationModule"]["nctId"]))
                except (KeyError, TypeError):
                    raise QrlibError("ClinicalTrials.gov study without protocolSection."
                                     "identificationModule.nctId") from None
            out.extend(new)
            token = data.get("nextPageToken") or None
            if len(out) >= k or not token or not new:
                break
        else:
            raise QrlibError(f"ClinicalTrials.gov paging did not end within {self.max_pages} "
                             "pages; raise max_pages or lower k")
        self.last_counts.append(total)
        return out[:k]


#: Names for params files and :func:`qrlib.retrieval.retrievers.build_retriever`.
ENGINES = {"pubmed": PubMedSearch, "ctgov": ClinicalTrialsSearch,
           "clinicaltrials": ClinicalTrialsSearch}


def build_engine(kind: str, corpus: Any = None, **params: Any) -> _EngineSearch:
    """An adapter by name (``pubmed``, ``ctgov``/``clinicaltrials``).

    A ``replay`` param (path of a replay index JSON) selects :class:`ReplayTransport`;
    keys meant for other retrievers (``k1``, ``model`` ...) are ignored, as in
    :func:`qrlib.retrieval.retrievers.build_retriever`.
    """
    import inspect

    cls = ENGINES.get(kind)
    if cls is None:
        raise QrlibError(f"unknown literature-search engine {kind!r}; accepted: {', '.join(ENGINES)}")
    replay = params.pop("replay", None)
    if replay:
        params["transport"] = ReplayTransport.from_file(replay)
    accepted: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            accepted |= {n for n, p in inspect.signature(klass.__init__).parameters.items()
                         if p.kind is p.KEYWORD_ONLY}
    return cls(corpus, **{k: v for k, v in params.items() if k in accepted})
