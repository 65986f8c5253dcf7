"""One SQL executor for text-to-SQL rewards, run in a sandbox, and result comparison.

:func:`execute_sql` runs one generated statement on a SQLite file and returns
``(rows, None)`` or ``(None, reason)``; it never raises. Generated SQL is hostile input,
so every query meets several independent walls:

* **read only**: the file is opened with ``mode=ro`` and ``PRAGMA query_only``;
* **an allow-list authorizer** (``Connection.set_authorizer``): only ``SELECT``, column
  reads, recursive CTEs, ordinary functions and a few schema-introspection pragmas run.
  ``ATTACH``/``DETACH`` (and with them ``VACUUM INTO``, which attaches its target),
  every pragma that sets a value, transactions, DDL/DML and ``load_extension`` are
  refused, so a query cannot open, create or write any file;
* **SQLite limits** (``Connection.setlimit``): no attached databases, values of at most
  ``max_value_bytes`` (so ``zeroblob(2e9)`` or a giant ``printf`` fail at once with
  "string or blob too big"), SQL text of at most 100,000 characters; temporary tables
  and sorts stay in memory (no temp files) under a heap cap of ``max_memory_mb``;
* **bounded results**: more than ``max_rows`` rows or ``max_result_bytes`` of values is
  an error, checked while fetching;
* **an honest time limit**: a progress handler and a watchdog interrupt stop the query at
  ``timeout_s``; by default the query runs in a separate worker process that is killed
  when it overruns by more than :data:`KILL_GRACE_S`, so even one long C call inside
  SQLite (SQLite 3.40's ``printf('%.*c', 900000000, 'x')`` loops for many seconds
  without reaching the progress handler) cannot hold the caller. ``printf``/``format``
  are additionally wrapped so that a width or precision above the value limit is
  refused before it runs.

``results_match`` compares result rows the way Spider's execution accuracy does (rows as
a multiset; order matters only when the gold SQL sorts with ``ORDER BY``), or as sets
(DeepRetrieval's released reward code, ``code/verl/utils/reward_score/spider.py``:
``set(pred_results) == set(gold_results)``), multisets or lists.
"""
from __future__ import annotations

import os
import pickle
import re
import select
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError

Rows = list[tuple]
#: seconds a worker may overrun ``timeout_s`` before it is killed
KILL_GRACE_S = 0.5
MAX_SQL_CHARS = 100_000
COMPARE_MODES = ("spider", "multiset", "set", "list")

# only these pragmas may run, and they only read the schema
_READ_PRAGMAS = frozenset({"table_info", "table_xinfo", "index_list", "index_info",
                           "index_xinfo", "foreign_key_list"})
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile",
                               "edit", "sqlite_dbpage"})


# =========================================================================== sandbox
def _authorizer(action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
    """Allow-list: reading SELECTs only (see module docstring)."""
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        name = str(arg2 or "").lower()
        return sqlite3.SQLITE_DENY if name in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and str(arg1 or "").lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


_PRINTF_SPEC = re.compile(r"%([-+ 0#,!]*)(\*|\d+)?(?:\.(\*|\d+))?(?:ll|l)?(.)", re.S)


def _guarded_printf(limit: int):
    """``printf``/``format`` that refuses a width or precision above ``limit`` and
    otherwise formats with SQLite's own printf (on a private in-memory connection)."""
    helper: list[sqlite3.Connection] = []

    def as_int(v: Any) -> int:
        if not helper:
            con = sqlite3.connect(":memory:")
            con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
            helper.append(con)
        return int(helper[0].execute("SELECT CAST(? AS INTEGER)", (v,)).fetchone()[0] or 0)

    def fn(fmt: Any = None, *args: Any) -> Any:
        if fmt is None:
            return None
        text = fmt if isinstance(fmt, str) else str(fmt)
        i = 0
        for m in _PRINTF_SPEC.finditer(text):
            if m.group(4) == "%":
                continue
            for part in (m.group(2), m.group(3)):
                if part is None:
                    continue
                if part == "*":
                    n = as_int(args[i]) if i < len(args) else 0
                    i += 1
                else:
                    n = int(part) if len(part) < 12 else limit + 1
                if abs(n) > limit:
                    raise ValueError(f"printf width or precision {n} is over the limit {limit}")
            i += 1
        as_int(0)  # make sure the helper exists
        marks = ", ".join("?" * (1 + len(args)))
        return helper[0].execute(f"SELECT printf({marks})", (fmt, *args)).fetchone()[0]

    return fn


def _value_size(v: Any) -> int:
    return len(v) if isinstance(v, (str, bytes)) else 8


def _run_query(path: str, sql: str, timeout_s: float, max_rows: int, max_value_bytes: int,
               max_result_bytes: int, heap_bytes: int | None) -> tuple[Rows | None, str | None]:
    """The sandboxed query itself, in the calling process (see module docstring)."""
    try:
        uri = Path(path).resolve().as_uri() + "?mode=ro"
        con = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
    except Exception as exc:  # noqa: BLE001 - any failure to open is an error result
        return None, f"cannot open database: {exc}"
    timer = None
    try:
        con.text_factory = lambda b: b.decode("utf-8", errors="replace")
        con.execute("PRAGMA query_only = ON")
        con.execute("PRAGMA temp_store = MEMORY")
        con.execute("PRAGMA trusted_schema = OFF")
        if heap_bytes:
            con.execute(f"PRAGMA hard_heap_limit = {int(heap_bytes)}")
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
        con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS)
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.create_function("printf", -1, _guarded_printf(max_value_bytes))
        con.create_function("format", -1, _guarded_printf(max_value_bytes))
        con.set_authorizer(_authorizer)
        deadline = time.monotonic() + timeout_s
        con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
        timer = threading.Timer(timeout_s, con.interrupt)
        timer.daemon = True
        timer.start()
        cur = con.execute(sql)
        rows: Rows = []
        size = 0
        while True:
            chunk = cur.fetchmany(512)
            if not chunk:
                break
            for r in chunk:
                size += sum(_value_size(v) for v in r)
            rows.extend(tuple(r) for r in chunk)
            if len(rows) > max_rows:
                return None, f"more than {max_rows} rows"
            if size > max_result_bytes:
                return None, f"result larger than {max_result_bytes} bytes"
        return rows, None
    except MemoryError:
        return None, "sql error: out of memory"
    except sqlite3.Error as exc:
        msg = str(exc)
        if "interrupted" in msg:
            return None, "timeout"
        if "not authorized" in msg or "authorization denied" in msg:
            return None, "sql error: not authorized (only reading SELECT statements run)"
        if "user-defined function raised exception" in msg:  # our guarded printf/format
            return None, "sql error: printf width or precision over the value limit"
        if "too big" in msg:
            return None, f"sql error: a value is larger than {max_value_bytes} bytes"
        return None, f"sql error: {msg}"
    except Exception as exc:  # noqa: BLE001 - execute_sql promises never to raise
        return None, f"sql error: {type(exc).__name__}: {exc}"
    finally:
        if timer is not None:
            timer.cancel()
        try:
            con.close()
        except Exception:  # noqa: BLE001
            pass


# =========================================================================== worker
def _serve() -> None:
    """Worker main loop (``python -c 'from qrlib.data.sql import _serve; _serve()'``): read
    length-prefixed pickled query arguments on stdin, answer ``(rows, error)`` on stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)       # stray prints cannot corrupt replies
    inp = sys.stdin.buffer

    def send(obj: Any) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()

    send("ready")
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        args = pickle.loads(inp.read(struct.unpack("<Q", head)[0]))
        try:
            reply = _run_query(*args)
        except BaseException as exc:  # noqa: BLE001 - report, keep serving
            reply = (None, f"sql error: {type(exc).__name__}: {exc}")
        try:
            send(reply)
        except Exception:  # noqa: BLE001
            send((None, "sql error: result could not be returned"))


class _Worker:
    """One persistent child Python process that runs queries (a plain subprocess, so the
    caller's ``__main__`` is never re-imported as multiprocessing would do)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the folder holding qrlib/
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from qrlib.data.sql import _serve; _serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.fd = self.proc.stdout.fileno()
        self.owner = os.getpid()          # a forked child of the caller starts its own
        if self.recv(time.monotonic() + 60) != "ready":
            self.kill()
            raise OSError("the SQL worker process did not start")

    def send(self, obj: Any) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
        self.proc.stdin.flush()

    def _read(self, n: int, deadline: float) -> bytes | None:
        buf = b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, n - len(buf))
            if not chunk:
                raise EOFError("SQL worker closed its output")
            buf += chunk
        return buf

    def recv(self, deadline: float) -> Any:
        """The next reply, or None when ``deadline`` passes first."""
        head = self._read(8, deadline)
        if head is None:
            return None
        body = self._read(struct.unpack("<Q", head)[0], deadline + 5.0)
        return None if body is None else pickle.loads(body)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(5)
            self.proc.stdin.close()
            self.proc.stdout.close()
        except Exception:  # noqa: BLE001
            pass


_WORKER: _Worker | None = None
_LOCK = threading.Lock()


def _in_worker(args: tuple, timeout_s: float) -> tuple[Rows | None, str | None]:
    global _WORKER
    with _LOCK:
        if _WORKER is None or not _WORKER.alive():
            if _WORKER is not None and _WORKER.owner == os.getpid():
                _WORKER.kill()
            _WORKER = _Worker()
        w = _WORKER
        try:
            w.send(args)
            reply = w.recv(time.monotonic() + timeout_s + KILL_GRACE_S)
        except (EOFError, OSError, pickle.UnpicklingError):
            reply = (None, "sql error: the SQL worker process died")
        if reply is not None and not (isinstance(reply, tuple) and reply[1:2] == (
                "sql error: the SQL worker process died",)):
            return reply
        w.kill()                       # overran or died: stop it, start a fresh one next time
        _WORKER = None
        return reply if reply is not None else (None, "timeout")


def execute_sql(db_path: str | Path, sql: str, *, timeout_s: float = 2.0,
                max_rows: int = 10_000, max_value_bytes: int = 1_000_000,
                max_result_bytes: int = 16_000_000, max_memory_mb: int = 512,
                isolate: bool = True) -> tuple[Rows | None, str | None]:
    """Run one read-only SQL statement on a SQLite file in the sandbox; ``(rows, error)``.

    Never raises: a missing file, empty or over-long SQL, syntax errors, several
    statements, writes, refused operations (attach, vacuum, pragma writes, extensions),
    over-large values or results, running out of memory and overrunning ``timeout_s``
    all come back as ``(None, "<reason>")``. With ``isolate`` (default) the query runs
    in a worker process that is killed when it overruns; ``isolate=False`` runs it in
    this process (limits and authorizer still apply, but one long C call cannot be cut).
    """
    try:
        path = Path(db_path)
        if not path.is_file():
            return None, f"database not found: {path}"
        if not isinstance(sql, str) or not sql.strip():
            return None, "empty SQL"
        if len(sql) > MAX_SQL_CHARS:
            return None, f"SQL longer than {MAX_SQL_CHARS} characters"
        args = (str(path), sql, float(timeout_s), int(max_rows), int(max_value_bytes),
                int(max_result_bytes), int(max_memory_mb) * 2 ** 20 if isolate else None)
        if isolate:
            try:
                return _in_worker(args, float(timeout_s))
            except (OSError, RuntimeError):  # no worker process here: run in this process
                pass
        return _run_query(*args)
    except MemoryError:
        return None, "sql error: out of memory"
    except Exception as exc:  # noqa: BLE001 - never raise
        return None, f"sql error: {type(exc).__name__}: {exc}"


def query_rows(db_path: str | Path, sql: str, *, timeout_s: float = 5.0) -> Rows:
    """:func:`execute_sql` for trusted callers: the rows, or a one-line QrlibError."""
    rows, err = execute_sql(db_path, sql, timeout_s=timeout_s)
    if rows is None:
        raise QrlibError(f"SQL failed on {db_path}: {err}")
    return rows


# =========================================================================== comparison
_STRINGS_AND_COMMENTS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]"
                                   r"|--[^\n]*|/\*.*?(?:\*/|$)", re.S)


def has_order_by(sql: str | None) -> bool:
    """True when ``sql`` sorts its result (``ORDER BY`` outside strings and comments)."""
    if not sql:
        return False
    return re.search(r"\border\s+by\b", _STRINGS_AND_COMMENTS.sub(" ", sql), re.I) is not None


def _row(r: Sequence[Any]) -> tuple:
    out = []
    for v in r:
        try:
            hash(v)
            out.append(v)
        except TypeError:
            out.append(repr(v))
    return tuple(out)


def results_match(pred: Sequence[Sequence[Any]] | None, gold: Sequence[Sequence[Any]] | None,
                  mode: str = "spider", gold_sql: str | None = None) -> bool:
    """Execution match of two results (rows of values); a failed execution (None) never
    matches.

    ``mode``: ``"spider"`` rows as a multiset, or as a list when ``gold_sql`` has
    ``ORDER BY`` (Spider's execution accuracy); ``"multiset"``; ``"list"`` (order and
    multiplicity); ``"set"`` (DeepRetrieval's released code, spider.py/bird.py).
    """
    if mode not in COMPARE_MODES:
        raise QrlibError(f"unknown SQL result comparison {mode!r}; accepted: {list(COMPARE_MODES)}")
    if pred is None or gold is None:
        return False
    p = [_row(r) for r in pred]
    g = [_row(r) for r in gold]
    if mode == "spider":
        mode = "list" if has_order_by(gold_sql) else "multiset"
    if mode == "list":
        return p == g
    if mode == "set":
        return set(p) == set(g)
    return Counter(p) == Counter(g)
