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
