"""qrlib.data.sql: one sandboxed SQL executor (never raises, no file access, honest time
limit, bounded values) and Spider-style result comparison."""
from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qrlib.data import sql as S
from qrlib.data.datasets import SpiderData
from qrlib.core.errors import QrlibError


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def refused(result):
    rows, err = result
    return rows is None and isinstance(err, str) and err


def test_reads_rows_and_refuses_writes(tiny_db):
    rows, err = S.execute_sql(tiny_db, "SELECT a FROM t WHERE b = 'x' ORDER BY a")
    assert rows == [(1,), (3,)] and err is None
    assert refused(S.execute_sql(tiny_db, "DELETE FROM t"))
    assert refused(S.execute_sql(tiny_db, "CREATE TABLE u (x)"))
    assert refused(S.execute_sql(tiny_db, "BEGIN"))
    assert S.execute_sql(tiny_db, "SELEC nonsense")[1].startswith("sql error")
    assert refused(S.execute_sql(tiny_db, "SELECT 1; SELECT 2"))
    assert refused(S.execute_sql(tiny_db.parent / "missing.sqlite", "SELECT 1"))
    assert S.execute_sql(tiny_db, "   ") == (None, "empty SQL")
    assert refused(S.execute_sql(tiny_db, "SELECT 1 -- " + "x" * 200_000))
    assert refused(S.execute_sql(tiny_db, "SELECT a FROM t", max_rows=2))
    assert S.execute_sql(tiny_db, "PRAGMA table_info(t)")[0][0][1] == "a"   # schema reads run
    assert S.execute_sql(tiny_db, "SELECT count(*) FROM t")[0] == [(3,)]     # table untouched


def test_attach_and_vacuum_into_create_no_file(tiny_db, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    before = files_under(tmp_path)
    for sql in [f"ATTACH '{out}/a.db' AS x",
                f"ATTACH DATABASE 'file:{out}/b.db?mode=rwc' AS y",
                f"VACUUM INTO '{out}/v.db'",
                f"VACUUM main INTO '{out}/w.db'",
                "DETACH DATABASE main",
                "VACUUM"]:
        assert refused(S.execute_sql(tiny_db, sql)), sql
    for isolate in (True, False):
        assert refused(S.execute_sql(tiny_db, f"ATTACH '{out}/c.db' AS z", isolate=isolate))
    assert files_under(tmp_path) == before


def test_pragma_writes_and_extensions_are_refused(tiny_db):
    for sql in ["PRAGMA query_only = OFF", "PRAGMA journal_mode = WAL",
                "PRAGMA writable_schema = ON", "PRAGMA user_version = 7",
                "SELECT load_extension('/tmp/evil')", "SELECT fts3_tokenizer('x')"]:
        assert refused(S.execute_sql(tiny_db, sql)), sql
    assert S.execute_sql(tiny_db, "PRAGMA user_version")[0] is None      # not on the list


def test_giant_values_fail_fast(tiny_db):
    """zeroblob/randomblob/printf that would build gigabytes fail at once."""
    for sql in ["SELECT zeroblob(2000000000)", "SELECT randomblob(2000000000)",
                "SELECT length(zeroblob(2e9))",
                "SELECT printf('%.*c', 900000000, 'x')",
                "SELECT printf('%.*c', '900000000', 'x')",
                "SELECT format('%900000000c', 'x')",
                "SELECT printf('%0*d', 900000000, 1)",
                "SELECT replace(hex(zeroblob(600000)), '0', 'xyz')"]:
        for isolate in (True, False):
            t0 = time.monotonic()
            assert refused(S.execute_sql(tiny_db, sql, isolate=isolate)), sql
            assert time.monotonic() - t0 < 1.5, sql
    assert S.execute_sql(tiny_db, "SELECT printf('%d-%5s|%.2f', 3, 'ab', 1.234)")[0] == [
        ("3-   ab|1.23",)]


def test_time_limit_is_honest(tiny_db):
    slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT max(x) FROM c")
    t0 = time.monotonic()
    assert S.execute_sql(tiny_db, slow, timeout_s=0.3) == (None, "timeout")
    assert time.monotonic() - t0 < 0.3 + S.KILL_GRACE_S + 1.0
    # one long C call inside SQLite never reaches the progress handler: the worker is
    # killed instead (quadratic instr over 1 MB values takes many seconds)
    long_call = "SELECT instr(zeroblob(1000000), zeroblob(500000) || x'01')"
    t0 = time.monotonic()
    assert S.execute_sql(tiny_db, long_call, timeout_s=0.5) == (None, "timeout")
    assert time.monotonic() - t0 < 0.5 + S.KILL_GRACE_S + 1.0
    assert S.execute_sql(tiny_db, "SELECT 1")[0] == [(1,)]          # a fresh worker serves


def test_memory_errors_never_escape(tiny_db, monkeypatch):
    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(S, "_run_query", boom)
    assert S.execute_sql(tiny_db, "SELECT 1", isolate=False) == (None, "sql error: out of memory")
    monkeypatch.undo()
    rows, err = S.execute_sql(tiny_db, "WITH RECURSIVE c(x) AS (SELECT zeroblob(900000) "
                              "UNION SELECT x || 'a' FROM c) SELECT count(*) FROM c",
                              timeout_s=1.0, max_memory_mb=64)
    assert rows is None and err in ("timeout", "sql error: out of memory")


def test_results_match_modes():
    gold_sorted = "SELECT a FROM t ORDER BY a DESC"
    assert S.results_match([(2,), (1,)], [(1,), (2,)], "spider", "SELECT a FROM t")
    assert not S.results_match([(2,), (1,)], [(1,), (2,)], "spider", gold_sorted)
    assert S.results_match([(1,), (1,)], [(1,)], "set")
    assert not S.results_match([(1,), (1,)], [(1,)], "multiset")
    assert S.results_match([[1, [2]]], [(1, [2])], "multiset")             # unhashable cells
    assert not S.results_match(None, [], "set")
    assert S.has_order_by("select a from t  ORDER\n BY a")
    assert not S.has_order_by("select 'order by' from t -- order by a")
    with pytest.raises(QrlibError, match="accepted"):
        S.results_match([], [], "bag")


def test_spider_execute_goes_through_the_sandbox(tiny_db, tmp_path):
    sp = SpiderData(examples=[], schemas={}, db_paths={"t": tiny_db}, skipped={})
    assert sp.execute("t", "SELECT a FROM t ORDER BY a") == [(1,), (2,), (3,)]
    with pytest.raises(QrlibError, match="not authorized"):
        sp.execute("t", f"ATTACH '{tmp_path}/spider.db' AS x")
    assert not (tmp_path / "spider.db").exists()


FRAGMENTS = ["SELECT", "*", "FROM t", "a", "b", "WHERE", "1", "'x'", ";", "(", ")",
             "UNION ALL", "ORDER BY", "LIMIT 3", "zeroblob(1e9)", "printf('%.*c', 2e9, 'x')",
             "ATTACH", "VACUUM", "INTO", "'f.db'", "PRAGMA", "query_only=0", "DETACH",
             "load_extension('x')", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 "
             "FROM c LIMIT 50)", "SELECT x FROM c", "randomblob(-1)", "x'00'", "NULL",
             "CREATE", "TABLE", "INSERT", "DROP", "--", "/*", "\x00", "\u00e9", "%"]
TEMPLATES = ["ATTACH '{d}/{n}.db' AS a{n}", "VACUUM INTO '{d}/{n}.db'",
             "ATTACH 'file:{d}/{n}.db?mode=rwc' AS u", "ATTACH '{n}.db' AS r",
             "VACUUM INTO '{n}.db'", "SELECT printf('%.*c', {n}00000000, 'x')",
             "SELECT zeroblob({n}000000000)", "PRAGMA temp_store_directory = '{d}'"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=8),
       template=st.sampled_from(TEMPLATES + [""]), n=st.integers(1, 9))
def test_fuzz_never_raises_and_never_creates_files(tiny_db, tmp_path, parts, template, n):
    out = tmp_path / "fuzz"
    out.mkdir(exist_ok=True)
    before = files_under(tmp_path)
    cwd = os.getcwd()
    os.chdir(out)                                # relative paths would land here
    try:
        for isolate in (True, False):
            for sql in (" ".join(parts), template.format(d=out, n=n)):
                res = S.execute_sql(tiny_db, sql, timeout_s=0.5, isolate=isolate)
                assert isinstance(res, tuple) and len(res) == 2
                assert (res[0] is None) != (res[1] is None)
    finally:
        os.chdir(cwd)
    assert files_under(tmp_path) == before
