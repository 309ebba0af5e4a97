"""Write result tables as CSV and JSON, atomically, with what produced them."""

from __future__ import annotations

from pathlib import Path

from ..paths import atomic_path, write_json


def write_probe(result, folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "results.csv") as tmp:
        result.to_frame().to_csv(tmp, index=False)
    write_json(folder / "results.json", {"format": "cea.probe/1", "rows": result.rows, "meta": result.meta})
