"""The step log's memory columns (qrlib.rl.release.memory_gib)."""
from qrlib.rl.release import memory_gib


def test_memory_gib_sees_an_allocation_in_rss_and_in_the_peak():
    before = memory_gib()
    block = bytearray(512 * 2**20)  # 0.5 GiB, touched so it is resident
    block[:: 4096] = b"\x01" * len(block[:: 4096])
    during = memory_gib()
    assert during["rss_gib"] - before["rss_gib"] > 0.4
    assert during["peak_rss_gib"] >= during["rss_gib"] - 0.01
    assert during["peak_rss_gib"] - before["peak_rss_gib"] > 0.3 or before["peak_rss_gib"] > during["rss_gib"]
    del block


def test_each_logged_step_hands_freed_pages_back_before_measuring(tmp_path, monkeypatch):
    """StepLogger releases the allocator's free pages once per step, then measures RSS."""
    import types

    from qrlib.rl import steplog

    calls = []
    monkeypatch.setattr(steplog, "release_free_heap", lambda: calls.append("release") or True)
    monkeypatch.setattr(steplog, "memory_gib",
                        lambda: calls.append("measure") or {"rss_gib": 1.0, "peak_rss_gib": 2.0})
    reward = types.SimpleNamespace(batches=[], samples=[])
    log = steplog.StepLogger(tmp_path / "log.csv", reward)
    state = types.SimpleNamespace(global_step=1, is_world_process_zero=True)
    for step in (1, 2):
        state.global_step = step
        log.on_log(None, state, None, logs={"reward": 0.5})
    assert calls == ["release", "measure"] * 2
    assert (tmp_path / "log.csv").read_text().count("\n") == 3  # header and two steps


def test_release_free_heap_uses_tcmalloc_where_it_is_preloaded():
    """Under LD_PRELOAD=tcmalloc the release goes through tcmalloc's extension; otherwise
    through glibc's malloc_trim (both return True on this Linux)."""
    import glob
    import subprocess
    import sys

    import pytest

    from qrlib.rl import release
    from qrlib.workbook.preload import TCMALLOC

    assert release.release_free_heap() is True
    if "tcmalloc" not in __import__("os").environ.get("LD_PRELOAD", ""):
        assert release._tcmalloc_release() is False  # this process runs on glibc malloc
    libs = sorted(glob.glob(TCMALLOC))
    if not libs:
        pytest.skip("Debian's libtcmalloc-minimal4 is not installed (make install adds it)")
    code = "from qrlib.rl import release; print(release._tcmalloc_release())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "LD_PRELOAD": libs[0]}, check=True)
    assert out.stdout.strip() == "True"
