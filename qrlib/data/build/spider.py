"""Spider dev: the official dev.json, tables.json and dev_gold.sql, and 19 of the 20 dev
SQLite databases (wta_1's is not in any usable public snapshot), all copied byte for
byte. Not a BEIR layout: :func:`qrlib.data.datasets.load_spider` reads it."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qrlib.data.build.common import write_bytes

TRANSFORMATIONS = [
    "None: dev.json, tables.json, dev_gold.sql and database/<db_id>/<db_id>.sqlite copied "
    "byte for byte (19 of the 20 dev databases; wta_1 missing, so its 62 questions cannot "
    "be executed).",
]


def build(files: Mapping[str, Path], out: Path) -> None:
    for path, local in files.items():
        name = path.rsplit("/", 1)[-1]
        if path.startswith("spider_data/"):
            write_bytes(out / name, local.read_bytes())
        else:  # datasets/spider/database/<db>/<db>.sqlite
            db = path.split("/")[-2]
            write_bytes(out / "database" / db / name, local.read_bytes())
