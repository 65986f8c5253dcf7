"""The noise counter of executed notebooks (qrlib.workbook.noise): each kind is caught, and
what a reader does not see (a text/plain fallback beside an image or HTML) is not counted."""
from qrlib.workbook.noise import NOISE, noise_counts, noise_lines


def _nb(*outputs):
    return {"cells": [{"cell_type": "code", "outputs": list(outputs)}]}


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_each_kind_of_noise_is_counted():
    nb = _nb(_stream(
        "\x1b[0;36m(MainProcess pid=8307)\x1b[0;0m \x1b[33mWARNING\x1b[0m 11-26 02:46:58 x\n"
        "[W1127 15:04:09.865 utils.cpp:68] Warning: NUMA binding\n"
        "Loading weights:  10%|#         | 1/10 [00:01<00:09,  1.00it/s]\n"
        "/x/tqdm/auto.py:21: TqdmWarning: IProgress not found\n"
        "[record] bm25.scifact.ndcg10 = 0.68\n"
        "{'source': '/work/shared/data/spider-dev'}\n"
        "generation backend: vllm\n"),
        {"output_type": "execute_result", "data": {"text/plain": "PosixPath('../runs/x.json')"}},
        {"output_type": "execute_result", "data": {"text/plain": "[4 rows x 26 columns]"}},
        {"output_type": "display_data", "data": {"text/html": "<tr><th>...</th></tr>",
                                                 "text/plain": "..."}})
    counts = noise_counts(nb)
    assert set(counts) == set(NOISE)
    assert counts["library log"] == 2 and counts["progress bar"] == 1 and counts["record"] == 1
    assert counts["warning"] == 2 and counts["machine path"] == 1 and counts["repr"] == 1
    assert counts["truncated table"] == 2
    assert not any("generation backend" in ln for v in noise_lines(nb).values() for ln in v)


def test_a_fallback_beside_an_image_is_not_shown_so_not_counted():
    nb = _nb({"output_type": "display_data",
              "data": {"image/png": "iVBOR", "text/plain": "<Figure size 800x600 with 1 Axes>"}},
             {"output_type": "execute_result",
              "data": {"text/html": "<table><tr><td>0.68</td></tr></table>",
                       "text/plain": "[3 rows x 30 columns]"}})
    assert sum(noise_counts(nb).values()) == 0


def test_a_notebook_session_silences_a_bar_a_library_asked_for(tmp_path, capsys):
    """sentence-transformers passes ``disable=False`` when the root logger is at INFO; that
    beats TQDM_DISABLE, so route_logs turns every tqdm bar off itself."""
    import logging

    from tqdm.auto import tqdm

    from qrlib.session import route_logs

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        route_logs(tmp_path / "run.log")
        assert sum(tqdm(range(5), disable=False, desc="Batches")) == 10
    finally:
        root.handlers, _ = handlers, root.setLevel(level)
        logging.captureWarnings(False)
    assert "Batches" not in capsys.readouterr().err
