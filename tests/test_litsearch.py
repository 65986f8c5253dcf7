"""Literature-search adapters (PubMed ESearch, ClinicalTrials.gov v2) on replayed responses.

No test touches the network: every client gets a ReplayTransport, a transport that raises,
or an unroutable address with a sub-second connect timeout.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.retrieval.litsearch import (CTGOV_STUDIES_URL, PUBMED_ESEARCH_URL, ClinicalTrialsSearch,
                             PubMedSearch, ReplayTransport, Response, ResponseCache,
                             UrllibTransport, build_engine)

FIX = Path(__file__).resolve().parent / "fixtures" / "litsearch"
Q1 = "(metformin) AND (type 2 diabetes) AND (cardiovascular outcomes)"
Q_EMPTY = "(xqzvnonexistentterm) AND (zzqplaceholder)"
Q_PAGE = "(semaglutide) AND (obesity)"


@pytest.fixture()
def replay() -> ReplayTransport:
    return ReplayTransport.from_file(FIX / "replay.json")


def _params(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


# --------------------------------------------------------------------------- fixtures
def test_fixtures_are_in_the_documented_formats():
    ok = json.loads((FIX / "pubmed_esearch_ok.json").read_text())
    res = ok["esearchresult"]
    assert ok["header"]["type"] == "esearch"
    assert int(res["count"]) == len(res["idlist"]) and all(i.isdigit() for i in res["idlist"])
    page = json.loads((FIX / "ctgov_studies_page1.json").read_text())
    ids = [s["protocolSection"]["identificationModule"]["nctId"] for s in page["studies"]]
    assert all(i.startswith("NCT") and len(i) == 11 for i in ids) and page["nextPageToken"]
    for rec in json.loads((FIX / "replay.json").read_text()):
        assert rec["endpoint"] in (PUBMED_ESEARCH_URL, CTGOV_STUDIES_URL)
        assert "file" not in rec or (FIX / rec["file"]).exists()


# --------------------------------------------------------------------------- PubMed
def test_pubmed_ranked_pmids_and_request(replay):
    pm = PubMedSearch(transport=replay)
    [ranked] = pm.search([Q1], k=3000)
    ids = [d for d, _ in ranked]
    assert ids[:2] == ["38912345", "38765432"] and len(ids) == 8
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    p = _params(replay.requests[0])
    assert p["db"] == "pubmed" and p["retmode"] == "json" and p["retmax"] == "3000"
    assert p["term"] == Q1 and "retstart" not in p
    assert pm.last_counts == [8]


def test_pubmed_k_truncates_and_caps_at_max_results(replay):
    pm = PubMedSearch(transport=replay)
    assert len(pm.search([Q1], k=3)[0]) == 3
    assert _params(replay.requests[-1])["retmax"] == "3"
    pm.search([Q1], k=50_000)  # capped at max_results=3000 (DeepRetrieval's Recall@3K)
    assert _params(replay.requests[-1])["retmax"] == "3000"
    with pytest.raises(QrlibError, match="at most 10000"):
        PubMedSearch(transport=replay, max_results=20_000).search([Q1], k=20_000)


def test_pubmed_paging_with_retstart(replay):
    pm = PubMedSearch(transport=replay, page_size=4)
    [ranked] = pm.search([Q_PAGE], k=3000)
    assert [d for d, _ in ranked] == ["39100001", "39000002", "38900003", "38800004",
                                      "38700005", "38600006", "38500007"]
    first, second = (_params(u) for u in replay.requests)
    assert first["retmax"] == "4" and "retstart" not in first
    assert second["retstart"] == "4" and second["retmax"] == "4"


def test_pubmed_server_returning_fewer_than_asked_is_paged(replay):
    # default page size: the server answers 4 of 7; the client asks again from retstart=4
    [ranked] = PubMedSearch(transport=replay).search([Q_PAGE], k=3000)
    assert len(ranked) == 7 and _params(replay.requests[1])["retstart"] == "4"


def test_pubmed_empty_result_is_not_an_error(replay):
    pm = PubMedSearch(transport=replay)
    assert pm.search([Q_EMPTY, "   "], k=3000) == [[], []]
    assert pm.last_counts == [0, 0]
    assert len(replay.requests) == 1  # whitespace query never hits the engine


@pytest.mark.parametrize("term, match", [
    ("ERROR", "PubMed ESearch error: Empty term"),
    ("MALFORMED", "malformed JSON"),
    ("SERVERERROR", "HTTP 502 after retries"),
    ("RATELIMIT", "HTTP 429 after retries: .*rate limit"),
])
def test_pubmed_errors_are_one_line(replay, term, match):
    pm = PubMedSearch(transport=replay, retries=1)
    with pytest.raises(QrlibError, match=match) as exc:
        pm.search([term], k=10)
    assert "\n" not in str(exc.value)


def test_pubmed_retry_then_success():
    calls = []

    def flaky(url, timeout):
        calls.append(url)
        if len(calls) == 1:
            return Response(429, '{"error":"API rate limit exceeded"}')
        return Response(200, (FIX / "pubmed_esearch_ok.json").read_bytes())

    flaky.live = False
    [ranked] = PubMedSearch(transport=flaky, retries=2).search([Q1], k=5)
    assert len(calls) == 2 and len(ranked) == 5


@pytest.mark.parametrize("body, match", [
    ('{"header": {}}', "no 'esearchresult'"),
    ('{"error": "Invalid db name specified: pubmd"}', "Invalid db name"),
    ('{"esearchresult": {"count": "x", "idlist": []}}', "'count' is not a number"),
    ('{"esearchresult": {"count": "1", "idlist": "123"}}', "not a list"),
    ("[1, 2", "malformed JSON"),
    ("", "malformed JSON"),
])
def test_pubmed_malformed_answers(body, match):
    t = ReplayTransport([{"endpoint": PUBMED_ESEARCH_URL, "params": {}, "body": body}])
    with pytest.raises(QrlibError, match=match):
        PubMedSearch(transport=t).search(["q"], k=10)


def test_unrecorded_request_fails_without_network():
    t = ReplayTransport([])
    with pytest.raises(QrlibError, match="no recorded response"):
        PubMedSearch(transport=t).search(["anything"], k=10)


# --------------------------------------------------------------------------- ClinicalTrials.gov
def test_ctgov_single_page(replay):
    ct = ClinicalTrialsSearch(transport=replay)
    [ranked] = ct.search([Q1], k=3000)
    assert [d for d, _ in ranked] == ["NCT04184622", "NCT03496298", "NCT02465515"]
    p = _params(replay.requests[0])
    assert p["query.term"] == Q1 and p["pageSize"] == "1000" and p["format"] == "json"
    assert p["fields"] == "NCTId" and p["countTotal"] == "true" and "pageToken" not in p
    assert ct.last_counts == [3]


def test_ctgov_paging_through_next_page_token(replay):
    ct = ClinicalTrialsSearch(transport=replay)
    [ranked] = ct.search([Q_PAGE], k=3000)
    assert len(ranked) == 5 and ranked[-1][0] == "NCT00968708"
    first, second = (_params(u) for u in replay.requests)
    assert "pageToken" not in first and second["pageToken"] == "NF0g5JGAl_Mq"
    assert "countTotal" not in second
    assert ct.last_counts == [5]


def test_ctgov_stops_when_k_is_reached(replay):
    ct = ClinicalTrialsSearch(transport=replay)
    [ranked] = ct.search([Q_PAGE], k=2)
    assert len(ranked) == 2 and len(replay.requests) == 1
    assert _params(replay.requests[0])["pageSize"] == "2"


def test_ctgov_empty_and_errors(replay):
    ct = ClinicalTrialsSearch(transport=replay)
    assert ct.search([Q_EMPTY], k=100) == [[]]
    with pytest.raises(QrlibError, match=r"HTTP 400: Parameter `pageSize` has incorrect format"):
        ct.search(["BADREQUEST"], k=100)
    with pytest.raises(QrlibError, match="malformed JSON"):
        ct.search(["MALFORMED"], k=100)


@pytest.mark.parametrize("body, match", [
    ('{"studies": {"a": 1}}', "'studies' list"),
    ('[]', "'studies' list"),
    ('{"studies": [{"protocolSection": {}}]}', "without protocolSection"),
])
def test_ctgov_malformed_answers(body, match):
    t = ReplayTransport([{"endpoint": CTGOV_STUDIES_URL, "params": {}, "body": body}])
    with pytest.raises(QrlibError, match=match):
        ClinicalTrialsSearch(transport=t).search(["q"], k=10)


def test_ctgov_endless_paging_is_bounded():
    page = {"studies": [{"protocolSection": {"identificationModule": {"nctId": "NCT00000001"}}}],
            "nextPageToken": "again"}
    t = ReplayTransport([{"endpoint": CTGOV_STUDIES_URL, "params": {}, "body": page}])
    with pytest.raises(QrlibError, match="did not end within 3 pages"):
        ClinicalTrialsSearch(transport=t, max_pages=3).search(["q"], k=3000)


# --------------------------------------------------------------------------- protocol checks
def test_protocol_input_checks(replay):
    pm = PubMedSearch(transport=replay)
    with pytest.raises(QrlibError, match="single string"):
        pm.search(Q1, k=10)
    with pytest.raises(QrlibError, match="empty query list"):
        pm.search([], k=10)
    with pytest.raises(QrlibError, match="positive integer"):
        pm.search([Q1], k=0)
    with pytest.raises(QrlibError, match="must be str"):
        pm.search([3], k=10)
    with pytest.raises(QrlibError, match="page_size"):
        ClinicalTrialsSearch(transport=replay, page_size=5000)


# --------------------------------------------------------------------------- offline behaviour
def test_unreachable_host_fails_fast_with_one_line(monkeypatch):
    # An unroutable address (10.255.255.1) would time out in the connect check; this sandbox
    # intercepts outbound connections, so the timeout is simulated at the socket layer.
    seen = {}

    def no_route(addr, timeout=None):
        seen["addr"], seen["timeout"] = addr, timeout
        raise TimeoutError("timed out")

    monkeypatch.setattr("socket.create_connection", no_route)
    pm = PubMedSearch(base_url="https://10.255.255.1/entrez/eutils/esearch.fcgi",
                      connect_timeout_s=0.3, cache=False)
    with pytest.raises(QrlibError, match=r"cannot reach 10\.255\.255\.1:443 within 0\.3 s") as exc:
        pm.search([Q1], k=10)
    assert seen == {"addr": ("10.255.255.1", 443), "timeout": 0.3}
    assert "\n" not in str(exc.value) and "ReplayTransport" in str(exc.value)


def test_refused_connection_fails_fast():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens on this port now
    ct = ClinicalTrialsSearch(base_url=f"http://127.0.0.1:{port}/api/v2/studies",
                              connect_timeout_s=0.5, cache=False)
    t0 = time.perf_counter()
    with pytest.raises(QrlibError, match=f"cannot reach 127.0.0.1:{port}"):
        ct.search([Q1], k=10)
    assert time.perf_counter() - t0 < 5


def test_url_error_from_urlopen_becomes_qrlib_error(monkeypatch):
    t = UrllibTransport(connect_timeout_s=0.1)
    monkeypatch.setattr(t, "check", lambda url: None)

    def boom(*a, **k):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("urllib.request.urlopen", boom)
    with pytest.raises(QrlibError, match="request to clinicaltrials.gov failed.*name resolution"):
        ClinicalTrialsSearch(transport=t, cache=False).search([Q1], k=10)


def test_transport_raising_url_error_is_not_swallowed():
    def offline(url, timeout):
        raise QrlibError("cannot reach eutils.ncbi.nlm.nih.gov:443 within 3 s (offline)")

    with pytest.raises(QrlibError, match="cannot reach"):
        PubMedSearch(transport=offline).search([Q1], k=10)


# --------------------------------------------------------------------------- cache
def test_response_cache_short_lived(tmp_path):
    calls = []
    body = (FIX / "ctgov_studies_ok.json").read_bytes()

    def live(url, timeout):
        calls.append(url)
        return Response(200, body)

    live.live = True
    ct = ClinicalTrialsSearch(transport=live, cache=tmp_path, cache_ttl_s=60, min_interval_s=0)
    a = ct.search([Q1], k=100)
    b = ct.search([Q1], k=100)
    assert a == b and len(calls) == 1 and ct.n_cache_hits == 1
    assert len(list((tmp_path / "ctgov").glob("*.json"))) == 1
    expired = ClinicalTrialsSearch(transport=live, cache=tmp_path, cache_ttl_s=0, min_interval_s=0)
    time.sleep(0.01)
    expired.search([Q1], k=100)
    assert len(calls) == 2


def test_cache_ignores_errors_and_corrupt_files(tmp_path):
    cache = ResponseCache(tmp_path, ttl_s=60)
    assert cache.get("https://x/y?a=1") is None
    cache.put("https://x/y?a=1", b'{"ok": 1}')
    assert cache.get("https://x/y?a=1") == b'{"ok": 1}'
    for p in tmp_path.glob("*.json"):
        p.write_text("{not json")
    assert cache.get("https://x/y?a=1") is None

    calls = []

    def failing(url, timeout):
        calls.append(url)
        return Response(500, "oops")

    failing.live = True
    ct = ClinicalTrialsSearch(transport=failing, cache=tmp_path / "c", retries=0, min_interval_s=0)
    for _ in range(2):
        with pytest.raises(QrlibError, match="HTTP 500"):
            ct.search([Q1], k=10)
    assert len(calls) == 2  # errors are never cached


# --------------------------------------------------------------------------- registry + env
def test_build_engine_and_build_retriever(replay):
    from qrlib.retrieval.retrievers import build_retriever

    pm = build_engine("pubmed", replay=str(FIX / "replay.json"), k1=1.2, page_size=4)
    assert isinstance(pm, PubMedSearch) and isinstance(pm.transport, ReplayTransport)
    assert pm.page_size == 4
    for kind, cls in (("pubmed", PubMedSearch), ("ctgov", ClinicalTrialsSearch),
                      ("clinicaltrials", ClinicalTrialsSearch)):
        r = build_retriever(kind, None, replay=str(FIX / "replay.json"), model="minilm")
        assert isinstance(r, cls)
    with pytest.raises(QrlibError, match="unknown literature-search engine"):
        build_engine("scopus")


def test_reward_env_with_recall_tiers_at_3000(replay):
    from qrlib.rl.env import RewardEnv

    qrels = {"pico-1": {"38912345": 1, "37654321": 1, "99999999": 1},   # 2 of 3 found
             "pico-2": {"NCT04184622": 1, "NCT00968708": 1}}
    pm = PubMedSearch(transport=replay)
    env = RewardEnv(pm, qrels, reward="deepretrieval_recall", fmt="deepretrieval", k=3000)
    assert env.depth == 3000
    good = f'<think>PICO terms</think><answer>{{"query": "{Q1}"}}</answer>'
    empty = f'<think>too narrow</think><answer>{{"query": "{Q_EMPTY}"}}</answer>'
    rewards = env(completions=[good, empty, "no tags at all"], qid=["pico-1"] * 3)
    assert rewards[0] > rewards[1] > rewards[2] or rewards[0] > rewards[1] >= rewards[2]
    rec = env.records_frame()
    assert rec.part_recall.tolist()[:2] == pytest.approx([2 / 3, 0.0])
    assert rec.part_retrieval.tolist()[:2] == [4.0, -3.5]  # Table 8: recall >= 0.5 -> 4
    assert _params(replay.requests[0])["retmax"] == "3000"

    ct = ClinicalTrialsSearch(transport=replay)
    env2 = RewardEnv(ct, qrels, reward="deepretrieval_recall", fmt="deepretrieval", k=3000)
    trial = f'<think>trials</think><answer>{{"query": "{Q_PAGE}"}}</answer>'
    [r] = env2(completions=[trial], qid=["pico-2"])
    assert env2.records[0]["part_recall"] == 1.0 and env2.records[0]["part_retrieval"] == 5.0
