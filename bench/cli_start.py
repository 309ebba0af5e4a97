"""Issue 78: how long ``cea --help`` and ``cea COMMAND --help`` take, each in a fresh process, against the goal of
1 s on 2 cores; and what the start imports most (``python -X importtime``).

    python bench/cli_start.py [--repeats 5]

Records the median wall time of ``cea --help``, ``cea predict --help``, ``cea fit --help`` and ``cea train --help``
(whose flags come from the objectives' torch-free catalog), each run ``--repeats`` times in turn.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import record  # noqa: E402

COMMANDS = ([], ["predict"], ["fit"], ["train"])


WATCHED = ("torch", "pandas", "typer", "rich")  # what a start may pay for


def imports(args: list[str]) -> dict[str, float]:
    """The cumulative seconds of each of :data:`WATCHED` that ``cea ARGS --help`` imports (absent: not imported)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cea", *args, "--help"], capture_output=True, text=True
    )
    found = {}
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            _, cumulative, name = line.split("|")
            if name.strip() in WATCHED and cumulative.strip().isdigit():
                found[name.strip()] = int(cumulative) / 1e6
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times = {tuple(c): [] for c in COMMANDS}
    for _ in range(args.repeats):
        for command in COMMANDS:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cea", *command, "--help"], check=True, capture_output=True)
            times[tuple(command)].append(time.perf_counter() - started)
    for command in COMMANDS:
        name = " ".join(["cea", *command, "--help"])
        median = statistics.median(times[tuple(command)])
        found = imports(command)
        slowest = ", ".join(f"{m} {found[m]:.2f} s" for m in WATCHED if m in found) or "none of " + "/".join(WATCHED)
        print(f"{name}: {median:.2f} s; imports: {slowest}", flush=True)
        record(
            f"{name}: wall time in a fresh process",
            round(median, 2),
            baseline=1.0,
            baseline_is="the goal",
            unit="s",
            section="speed",
            note=f"median of {args.repeats}; imports {slowest}",
        )


if __name__ == "__main__":
    main()
