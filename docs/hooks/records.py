"""mkdocs hook: the figures' tables, generated from the records in ``docs/records/*.jsonl``.

A record is one JSON line that ``bench/common.record`` appends: ``figure`` (a name that stays the same from one run
to the next), ``value``, ``baseline``, ``unit``, ``command``, ``machine``, ``versions``, ``commit``, ``date``, and a
few short extras (``section``: where the pages show it; ``baseline_is``: what the baseline is; ``note``).

A page holds markers, each alone on a line, that this hook replaces with a Markdown table:

* ``<!-- records: current SECTION... -->``: one row per figure of those sections, the newest record of each
  (today's figure; ties go to the record written last);
* ``<!-- records: history SECTION... -->``: every record of those sections, grouped by figure, newest first;
* ``<!-- records: headline -->``: the newest record of each figure a record marked ``headline`` (the home page's
  table), in fewer columns;
* ``<!-- records: plot SECTION -->``: the records of that section that hold a ``p99_ms`` (``cea fit --latency``'s
  frontier), the newest run's of each data set, drawn as test accuracy against p99 (log scale), an inline SVG;
* ``<!-- records: study NNN -->``: study NNN's tables (``studies/published.jsonl``: the study's own numbers) with
  cea's figures of the same table beside them (the newest record of each figure holding ``study``, ``table``,
  ``row``, ``column``: ``studies/shared.figure``), a Markdown table per table, a line per row and source.

No section named: every record. Every cell is shown whole and is at most ``WIDTH`` characters: a command too long
for its cell is listed whole under the table, its row naming it (``command 2``); any other cell longer is an error
(a record's note is written that short). ``render`` is what the test imports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

WIDTH = 120
MARKER = re.compile(r"^<!-- records: (current|history|headline|plot|study)((?: [\w.-]+)*) -->$", re.M)
COLUMNS = ("figure", "value", "difference", "unit", "baseline", "baseline_is", "note", "command", "machine", "date")
SHORT = ("figure", "value", "unit", "baseline", "baseline_is")  # the headline table's columns
ORDER = ("accuracy", "fit", "training-time", "open-intent", "multi-label", "discovery", "speed", "studies")
HEADERS = {"baseline_is": "baseline is", "difference": "a - b [95% interval], seeds"}  # where not its key


def load(folder: str | Path) -> list[dict]:
    """Every record of ``folder/*.jsonl``, files in name order, lines in file order (the order ties go by)."""
    records = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not a JSON record ({e})") from None
    return records


def cell(x) -> str:
    """A table cell: numbers as written, a machine by its name, a dict as ``key: value`` pairs, ``|`` escaped; a
    ValueError where it is longer than ``WIDTH`` characters (it is never cut)."""
    if x is None:
        return ""
    if isinstance(x, dict):
        x = (x["name"] or "") if "name" in x else "; ".join(f"{k}: {v}" for k, v in x.items())
    elif isinstance(x, (list, tuple)):
        x = " / ".join(map(str, x))
    escaped = " ".join(str(x).split()).replace("|", "\\|")
    if len(escaped) > WIDTH:
        raise ValueError(f"a cell of {len(escaped)} characters (at most {WIDTH}): {escaped[:80]}...; write it shorter")
    return escaped


def table(header, rows) -> str:
    """A Markdown table of ``rows`` under ``header``, every cell through ``cell``."""
    lines = ["| " + " | ".join(cell(h) or "-" for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def _code(command: str) -> str:
    """A command as inline code (a command holding a backtick as it is)."""
    return command if "`" in command else f"`{command}`"


def _shown(record: dict, column: str, long: list[str]):
    """A record's cell: a command as code (one too long for a cell added to ``long`` and named by its number), a
    percentage with two decimals (JSON drops 92.80's zero)."""
    x = record.get(column)
    if column == "command" and x:
        command = " ".join(str(x).split())
        if len(_code(command).replace("|", "\\|")) <= WIDTH:
            return _code(command)
        if command not in long:
            long.append(command)
        return f"command {long.index(command) + 1} (below)"
    if column in ("value", "baseline") and isinstance(x, float) and "%" in str(record.get("unit", "")):
        return f"{x:.2f}"
    if column == "difference" and x == []:  # a claim with no runs to compare (its note says why)
        return "no runs"
    if column == "difference" and x is not None:  # a claim's (studies/shared.claim): each difference, its interval
        said = [
            f"{_signed(d, '?')} [{_signed(lo, '-inf')}, {_signed(hi, '+inf')}]"
            for d, (lo, hi) in zip(x, record["interval"])
        ]
        return "; ".join(said) + f", {record['seeds']}"
    return x


def _signed(x, unbounded: str) -> str:
    """A difference or its bound: signed, three figures; ``unbounded`` where there is none (fewer than two seeds)."""
    return unbounded if x is None else f"{x:+.3g}"


def _rows(records: list[dict], columns=COLUMNS) -> str:
    """The records as rows of ``columns`` (a column left out where no record fills it); the commands too long for
    a cell listed whole under the table."""
    used = [c for c in columns if c == "figure" or any(r.get(c) not in (None, "") for r in records)]
    long: list[str] = []
    rows = [[_shown(r, c, long) for c in used] for r in records]
    listed = "".join(f"\n{i}. {_code(c)}" for i, c in enumerate(long, 1))
    return table([HEADERS.get(c, c) for c in used], rows) + ("\n\nCommands:\n" + listed if long else "")


def _newest_first(records: list[dict]) -> list[dict]:
    """``records`` newest first by date, the one written last first among those of a day."""
    return [
        r for _, r in sorted(enumerate(records), key=lambda ir: (str(ir[1].get("date") or ""), ir[0]), reverse=True)
    ]


def _by_figure(records: list[dict]) -> list[list[dict]]:
    """The records of each figure, newest first, the figures in the order they first appear."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["figure"], []).append(r)
    return [_newest_first(g) for g in groups.values()]


def render(records: list[dict], kind: str = "current", sections=None) -> str:
    """The Markdown table(s) of ``records`` in ``sections`` (all where None; in their order): ``current``, one row per
    figure with its newest record; ``history``, every record grouped by figure, newest first."""
    if sections:  # in the order the marker names them
        order = {name: i for i, name in enumerate(sections)}
        records = sorted((r for r in records if r.get("section") in order), key=lambda r: order[r["section"]])
    if not records:
        return "*No records yet.*"
    if kind == "current":
        return _rows([group[0] for group in _by_figure(records)])
    if kind == "headline":  # a figure once marked a headline stays one: its newest record is shown
        marked = {r["figure"] for r in records if r.get("headline")}
        rows = [g[0] for g in _by_figure([r for r in records if r["figure"] in marked])]
        return _rows(
            sorted(rows, key=lambda r: ORDER.index(r["section"]) if r.get("section") in ORDER else len(ORDER)), SHORT
        )
    if kind != "history":
        raise ValueError(f"unknown kind {kind!r}: current, headline or history")
    return _rows([r for group in _by_figure(records) for r in group])


def series(records: list[dict], sections=None) -> dict[str, list[tuple[float, float]]]:
    """The records of ``sections`` that hold a ``p99_ms`` as points ``(p99, value)``, fastest first, a series per
    figure less its last ``: NAME`` (``cea fit --latency 20 frontier, trec50: trained-int8`` is a point of ``...
    frontier, trec50``), each series from its newest run only (the commit and date of its newest record)."""
    points = [r for r in records if (not sections or r.get("section") in sections) and "p99_ms" in r]
    out = {}
    for name in dict.fromkeys(r["figure"].rsplit(": ", 1)[0] for r in points):
        mine = [r for r in points if r["figure"].rsplit(": ", 1)[0] == name]
        run = (_newest_first(mine)[0].get("commit"), _newest_first(mine)[0].get("date"))
        out[name] = sorted((r["p99_ms"], r["value"]) for r in mine if (r.get("commit"), r.get("date")) == run)
    return out


def plot(records: list[dict], sections=None) -> str:
    """:func:`series` drawn as the value (test accuracy) against p99 on a log scale: an inline SVG."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = series(records, sections)
    if not drawn:
        return "*No records yet.*"
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in drawn.items():
        ax.plot(*zip(*points), marker="o", label=name)
    ax.set(xscale="log", xlabel="served p99, ms (one-text requests from 16 clients)", ylabel="test accuracy, %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    svg = io.StringIO()
    fig.savefig(svg, format="svg", bbox_inches="tight")
    plt.close(fig)
    return '<div class="plot">' + " ".join(("<svg" + svg.getvalue().split("<svg", 1)[1]).split()) + "</div>"


def _number(x) -> str:
    return "" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def _spread(record: dict | None) -> str:
    """A study table's cell: the figure, and where the record keeps its seeds' runs (``studies/shared.seeded``), their
    spread: ``82.38 ± 0.13 (3)``, the mean, the sample standard deviation and the seeds."""
    if record is None:
        return ""
    values = [run["value"] for run in record.get("runs", {}).values()]
    if len(values) < 2:
        return _number(record["value"])
    centre = sum(values) / len(values)
    sd = (sum((v - centre) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return f"{_number(record['value'])} ± {sd:.2f} ({len(values)})"


def study(records: list[dict], published: list[dict], name: str) -> str:
    """Study ``name``'s tables: each table of ``published`` (the study's numbers) or of cea's records of the study,
    its rows as ``row`` and who measured it (the study and its model, cea and its encoder), its columns as the two
    name them; cea's cells the newest record of each figure (with its seeds' spread: :func:`_spread`), its unit in the
    last column."""
    theirs = [p for p in published if p["study"] == name]
    ours = [group[0] for group in _by_figure([r for r in records if r.get("study") == name and "table" in r])]
    if not theirs and not ours:
        return "*No records yet.*"
    out = []
    for table_name in dict.fromkeys([p["table"] for p in theirs] + [r["table"] for r in ours]):
        cells: dict[tuple[str, str], dict] = {}
        units: dict[tuple[str, str], str] = {}
        for source, rows in (("the study", theirs), ("cea", ours)):
            for r in rows:
                if r["table"] != table_name:
                    continue
                who = f"{source}, {r['model']}" if r.get("model") else source
                cells.setdefault((r["row"], who), {})[r["column"]] = r
                units[r["row"], who] = r.get("unit", "")
        columns = list(dict.fromkeys(c for row in cells.values() for c in row))
        first = list(dict.fromkeys(row for row, _ in cells))  # the rows in the order they first appear
        keys = sorted(cells, key=lambda k: (first.index(k[0]), not k[1].startswith("the study"), k[1]))
        rows = [[row, who, *(_spread(cells[row, who].get(c)) for c in columns), units[row, who]] for row, who in keys]
        out.append(f"**{table_name}**\n\n" + table(["row", "who", *columns, "unit"], rows))
    return "\n\n".join(out)


def replace(markdown: str, records: list[dict], published: list[dict] | None = None) -> str:
    """``markdown`` with each marker replaced by its table (``published``: the studies' own numbers)."""

    def one(m):
        kind, names = m.group(1), m.group(2).split() or None
        if kind == "plot":
            return plot(records, names)
        if kind == "study":
            return study(records, published or [], names[0])
        return render(records, kind, names)

    return MARKER.sub(one, markdown)


def load_published(path: str | Path) -> list[dict]:
    """The studies' own numbers: ``studies/published.jsonl``, one JSON line a number."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def on_page_markdown(markdown, page, config, files):
    if "<!-- records:" not in markdown:
        return markdown
    docs = Path(config["docs_dir"])
    published = docs.parent / "studies" / "published.jsonl"
    return replace(markdown, load(docs / "records"), load_published(published) if published.exists() else [])
