"""Study 000 (CEA, class-driven embedding alignment) rerun: its frozen tables, its results table and its table of
all negatives, cea's figures beside the study's.

    python studies/s000_cea.py                       # every table, the encoders at hand, seeds 0,1,2
    python studies/s000_cea.py --tables frozen       # the frozen tables alone (minutes)
    python studies/s000_cea.py --tables results --datasets trec50 --rows fine-tuning,datapoint --seeds 0
    python studies/s000_cea.py --tables negatives --rows batch-all --seeds 0
    python studies/s000_cea.py --quick               # a tiny random BERT on made-up data (the tests)
    python studies/s000_cea.py --from-records --tables results   # train nothing: the claims and picture again

The study's protocol, as cea runs it:

- frozen tables 1-2: each encoder frozen, its last layer pooled by the CLS token (table 1) or the mean of its tokens
  (table 2), kNN-5 over train + dev + test (every text classified by all the others: ``cea probe --mode loo``), on
  TREC-6 and TREC-50; ``concat all models`` joins the encoders' vectors (``cea probe --models a+b``).
- the results table: learning rate 5e-5, batch 32, 10 epochs, the epoch best on dev kept; fine-tuning (softmax, its
  head started at random) judged by its head, the CEA rows (one sampled pair an anchor: batch-level, + memory (the
  class memory), + mixed memory, + datapoint memory) by kNN-5; both figures kept for every row. The rows run in
  cea's P x K batches, but mixed memory and a batch-level row beside it in shuffled batches (the study's): mixed
  memory's partner from memory is taken only where a batch holds none of an anchor's class, which P x K never lets
  happen (on TREC-6 the row equalled batch-level on every seed).
- the table of all negatives: TREC-50, CEA batch-level and the datapoint memory (the study's "CEA memory", 85.0)
  with one sampled pair or every pair (``--pairs all``), the class memory's pair beside them; every row 15 epochs
  (the study gives 15 to the batch + all negatives row, its others 10); its claim (more pairs train better) where
  both rows of a pair ran.
- the encoder choice (the study's question of which encoder suits a data set): on each data set, the encoder that
  table 2 ranks first is ahead after training (CEA batch-level), for every two encoders with runs of that row.

What differs: the encoders (all-MiniLM-L6-v2 and all-mpnet-base-v2 offline; the study's ELECTRA-small and BERT-base
load by hub id where the hub is reachable: ``--models google/electra-small-discriminator``), P x K batches (4 an
anchor's class), label names off (the study had none). Communicative functions, SST and GoEmotions are not at hand
offline: the frozen tables' other columns are the study's alone.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys

from shared import (
    AHEAD,
    LEVEL,
    arguments,
    claim,
    difference,
    earlier_runs,
    figure,
    figure_name,
    finish,
    mean,
    model_name,
    picture,
    quick_labelled,
    recorded,
    run,
    seed_dots,
    seeded,
    side_by_side,
    trained,
)

DATASETS = ("trec6", "trec50")
SHUFFLED_MIXED, SHUFFLED_BATCH = "CEA + mixed memory, shuffled batches", "CEA (batch-level), shuffled batches"
# the results table's rows: the study's words -> cea train's settings
ROWS = {
    "fine-tuning": ("softmax", {"head_init": "random"}),
    "CEA (batch-level)": ("cea", {"pairs": "sampled"}),
    "CEA + memory": ("cea", {"pairs": "sampled", "memory": "class"}),
    "CEA + datapoint memory": ("cea", {"pairs": "sampled", "memory": "datapoint"}),
    # mixed memory takes a memory partner only where the batch holds none of an anchor's class: under cea's P x K
    # batches (4 of each class) it never does, so the row runs in shuffled batches (as the study's), beside
    # batch-level in the same batches
    SHUFFLED_MIXED: ("cea", {"pairs": "sampled", "memory": "mixed", "sampler": "shuffle"}),
    SHUFFLED_BATCH: ("cea", {"pairs": "sampled", "sampler": "shuffle"}),
}
# the follow-up's table: its "CEA memory" is the datapoint memory (85.0 on TREC-50, the results table's datapoint
# row; "datapoint memory + all comparisons needs a lot of gpu memory"); the class memory's rows measured beside it
NEGATIVES = {
    "fine-tuning": ROWS["fine-tuning"],
    "CEA (batch-level)": ROWS["CEA (batch-level)"],
    "CEA (batch-level) + all negatives": ("cea", {"pairs": "all"}),
    "CEA + datapoint memory": ROWS["CEA + datapoint memory"],
    "CEA + datapoint memory + all negatives": ("cea", {"pairs": "all", "memory": "datapoint"}),
    "CEA + memory": ROWS["CEA + memory"],
    "CEA + memory + all negatives": ("cea", {"pairs": "all", "memory": "class"}),
}
# the follow-up's pairs of rows: one sampled pair an anchor, and every pair of the batch (or memory)
MORE_PAIRS = (
    ("CEA (batch-level)", "CEA (batch-level) + all negatives"),
    ("CEA + datapoint memory", "CEA + datapoint memory + all negatives"),
    ("CEA + memory", "CEA + memory + all negatives"),
)
# why the all-negatives claim waits: its table's means were recorded before records kept runs, and its pairs of rows
# again (6 rows x 3 seeds x 15 epochs on TREC-50) take about 9 h on one CPU core
NEGATIVES_UNTESTED = "its 18 runs of 15 epochs wait for a GPU (about 9 h on a CPU core)"
PAIRED = {"CEA (batch-level)": "batch", "CEA + datapoint memory": "datapoint", "CEA + memory": "class memory"}
SHORT = {
    "fine-tuning": "fine-tuning",
    "batch": "CEA (batch-level)",
    "memory": "CEA + memory",
    "mixed": SHUFFLED_MIXED,
    "batch-shuffle": SHUFFLED_BATCH,
    "datapoint": "CEA + datapoint memory",
    "batch-all": "CEA (batch-level) + all negatives",
    "memory-all": "CEA + memory + all negatives",
    "datapoint-all": "CEA + datapoint memory + all negatives",
}


def options(parser) -> None:
    parser.add_argument("--tables", default="frozen,results,negatives", help="frozen, results, negatives")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="the results table's data sets")
    parser.add_argument(
        "--rows",
        default=",".join(SHORT),
        help="the trained tables' rows (each table runs those it has): " + ", ".join(SHORT),
    )


def frozen(args, data: dict[str, str]) -> None:
    """Tables 1-2: kNN-5 over train + dev + test of each encoder's last layer, CLS and mean pooling, and of all
    encoders' vectors joined."""
    from cea import load_dataset, probe

    models = args.models + (["+".join(args.models)] if len(args.models) > 1 else [])
    ours: dict[str, dict] = {"frozen cls": {}, "frozen mean": {}}
    for name, source in data.items():
        result = probe(
            load_dataset(source),
            models=models,
            layers="last",
            poolings=("cls", "mean"),
            k=5,
            mode="loo",
            progress="lines",
        )
        for row in result.rows:
            table = "frozen cls" if row["pooling"] == "cls" else "frozen mean"
            who = "concat all models" if "+" in row["model"] else model_name(row["model"])
            figure(
                args,
                table,
                who,
                name,
                round(row["accuracy"], 2),
                model=who,
                unit="% kNN-5 accuracy, train+dev+test",
                note=f"layer {row['layer']}; macro-F1 {row['macro_f1']:.2f}",
            )
            ours[table][who, name] = row["accuracy"]
    for table, values in ours.items():
        side_by_side(args.study, table, values, "kNN-5 over train+dev+test")


def train_run(args, data: str, model: str, objective: str, opts: dict, seed: int, epochs: int, folder) -> dict:
    """One training run of the study's settings (reused where it finished), its checkpoints removed after: its
    results."""
    from cea import TrainConfig

    opts = dict(opts)
    config = TrainConfig(
        dataset=data,
        model=model,
        objective=objective,
        sampler=opts.pop("sampler", "pk"),
        options=opts,
        output=str(folder),
        lr=5e-5,
        batch_size=32,
        epochs=epochs,
        select="best",
        patience=None,
        label_names="off",
        seed=seed,
    )
    if args.quick:
        config = dataclasses.replace(config, epochs=1, max_steps=4, batch_size=8, k_per_class=2)
    result = trained(config)
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)  # ten epochs of optimizer state: GBs a run
    return result


def trained_table(args, table: str, rows: dict, data: dict[str, str], epochs: int) -> dict:
    """A table of trained rows, each figure the mean of its seeds with their runs kept (:func:`shared.seeded`,
    ``--join``): the judged figure (the head for fine-tuning, kNN-5 for CEA) as the record's value, the other in its
    note. Returns ``{(row, data set, model): its runs, seed -> run}``."""
    judged = {}
    for model in args.models:
        for name, source in data.items():
            for row, (objective, opts) in rows.items():
                setting = "-".join([name, objective, *opts.values(), f"e{epochs}", model_name(model)])
                runs, other = {}, []
                for seed in [] if args.from_records else args.seeds:
                    results = train_run(
                        args, source, model, objective, opts, seed, epochs, args.output / f"{setting}-s{seed}"
                    )
                    test = results["metrics"]["test"]
                    if objective == "softmax":  # judged by its head, as the study judged fine-tuning
                        runs[seed], also = run(results, test["head_accuracy"]), "kNN-5"
                        other.append(test["knn_accuracy"])
                    else:
                        runs[seed], also = run(results, test["knn_accuracy"]), "linear head"
                        other.append(test["linear_accuracy"])
                said = f"{also} {mean(other):.2f} (seeds run here)" if other else ""
                kept = seeded(args, table, row, name, runs, model=model, unit="% test accuracy", also=said)
                if kept is not None:  # None: --from-records, and no record kept a run of it
                    judged[row, name, model_name(model)] = kept["runs"]
        side_by_side(
            args.study,
            table,
            {(r, d): mean(x["value"] for x in v.values()) for (r, d, m), v in judged.items() if m == model_name(model)},
            model_name(model),
        )
    return judged


def average(runs: dict) -> float:
    """The mean of a row's runs (seed -> run)."""
    return mean(r["value"] for r in runs.values())


def claims(args, judged: dict) -> None:
    """The study's claims on the results table, per encoder and data set that ran the rows they need: CEA level with
    fine-tuning (its best row within 1 point, either side), datapoint memory ahead of every other CEA row."""
    for model in {m for _, _, m in judged}:
        for name in {d for _, d, m in judged if m == model}:
            mine = {r: v for (r, d, m), v in judged.items() if d == name and m == model}
            cea_rows = {r: v for r, v in mine.items() if r.startswith("CEA")}
            where = f"{name}, {model}"
            if "fine-tuning" in mine and cea_rows:
                best = max(cea_rows, key=lambda r: average(cea_rows[r]))
                claim(
                    args,
                    f"CEA level with fine-tuning ({where})",
                    [difference(cea_rows[best], mine["fine-tuning"])],
                    f"best CEA row {best} {average(cea_rows[best]):.2f}, fine-tuning "
                    f"{average(mine['fine-tuning']):.2f}",
                    kind=LEVEL,
                    margin=1.0,
                )
            mixed_memory(args, mine, where)
            cea_rows = {r: v for r, v in cea_rows.items() if r not in (SHUFFLED_MIXED, SHUFFLED_BATCH)}
            datapoint = cea_rows.get("CEA + datapoint memory")
            if datapoint is not None and len(cea_rows) > 1:  # the rows in P x K batches, like with like
                others = {r: v for r, v in cea_rows.items() if r != "CEA + datapoint memory"}
                claim(
                    args,
                    f"datapoint memory best of the CEA rows ({where})",
                    [difference(datapoint, v) for v in others.values()],
                    ", ".join(
                        f"{r} {average(v):.2f}" for r, v in sorted(cea_rows.items(), key=lambda rv: -average(rv[1]))
                    ),
                    kind=AHEAD,
                )


def mixed_memory(args, mine: dict, where: str) -> None:
    """Mixed memory ahead of batch-level where batches may lack an anchor's class (both in shuffled batches), for a
    data set and encoder whose ``mine`` (row -> runs) ran both."""
    if SHUFFLED_MIXED in mine and SHUFFLED_BATCH in mine:
        claim(
            args,
            f"mixed memory ahead of batch-level, shuffled batches ({where})",
            [difference(mine[SHUFFLED_MIXED], mine[SHUFFLED_BATCH])],
            f"mixed {average(mine[SHUFFLED_MIXED]):.2f}, batch-level {average(mine[SHUFFLED_BATCH]):.2f}",
            kind=AHEAD,
        )


def negatives_claim(args, judged: dict) -> None:
    """The follow-up's claim (more pairs train better: every pair of a batch ahead of one sampled pair an anchor),
    per encoder, from the pairs of rows that ran. Under ``--from-records``, an encoder whose table was recorded but
    whose records kept no pair's runs (means alone) is said to be untested here, with the reason
    (:data:`NEGATIVES_UNTESTED`)."""
    tabled = {r["model"] for r in recorded(args) if r.get("table") == "all negatives"}
    for model in sorted({model_name(m) for m in args.models} | {m for _, _, m in judged}):
        ran = [
            (one, every)
            for one, every in MORE_PAIRS
            if (one, "trec50", model) in judged and (every, "trec50", model) in judged
        ]
        if not ran and args.from_records and model in tabled:
            claim(
                args,
                f"all negatives ahead of one sampled pair (trec50, {model})",
                [],
                "rows of 3 seeds, runs unkept",
                untested=NEGATIVES_UNTESTED,
            )
        elif ran:  # each pair as "batch 82.80 -> 86.00": one sampled pair, then every pair
            claim(
                args,
                f"all negatives ahead of one sampled pair (trec50, {model})",
                [difference(judged[every, "trec50", model], judged[one, "trec50", model]) for one, every in ran],
                "; ".join(
                    f"{PAIRED[one]} {average(judged[one, 'trec50', model]):.2f} -> "
                    f"{average(judged[every, 'trec50', model]):.2f}"
                    for one, every in ran
                ),
                kind=AHEAD,
            )


def encoder_choice(args) -> None:
    """The study's claim that a frozen encoder's kNN accuracy tells which encoder suits a data set: on each data set,
    of every two encoders with a frozen figure (kNN-5 of the last layer's mean, table 2) and runs of the results
    table's CEA (batch-level) row, the one the frozen figure ranks first is ahead after training. Read from the
    records (:func:`shared.earlier_runs`), so encoders trained in other parts of the study count."""
    differences, said = [], {}
    for name in DATASETS:
        frozen = {
            r["row"]: r["value"]
            for r in recorded(args)
            if r.get("table") == "frozen mean" and r["column"] == name and r["row"] != "concat all models"
        }
        trained_runs = {
            m: earlier_runs(args, figure_name(args, "results", "CEA (batch-level)", name, m)) for m in frozen
        }
        ranked = sorted((m for m in frozen if trained_runs[m]), key=lambda m: -frozen[m])
        for i, first in enumerate(ranked):
            for second in ranked[i + 1 :]:
                differences.append(difference(trained_runs[first], trained_runs[second]))
                said.setdefault((first, second), []).append(
                    f"{name} {frozen[first]:.1f}/{frozen[second]:.1f} -> "
                    f"{average(trained_runs[first]):.2f}/{average(trained_runs[second]):.2f}"
                )
    if differences:
        evidence = "; ".join(
            f"{short_name(a)} vs {short_name(b)}, frozen -> trained: {', '.join(figures)}"
            for (a, b), figures in said.items()
        )
        claim(args, "frozen kNN ranks the encoders as training does", differences, evidence)


def short_name(model: str) -> str:
    """An encoder's name without its family's prefix (all-MiniLM-L6-v2 -> MiniLM-L6-v2), for a claim's short cell."""
    return model.removeprefix("paraphrase-").removeprefix("all-")


def results_picture(args) -> None:
    """The results table's every seed as a dot and each row's mean as a bar, a panel for each data set and encoder
    that ran (drawn from the records: ``docs/figures/study000-results.png``)."""
    panels: dict[str, dict[str, list[float]]] = {}
    for r in recorded(args):
        if r.get("table") == "results" and r.get("runs"):
            panels.setdefault(f"{r['column']}, {r['model']}", {})[r["row"]] = [x["value"] for x in r["runs"].values()]
    if panels:
        seed_dots(picture(args, "results"), panels, "% test accuracy (fine-tuning: its head; CEA: kNN-5)")


def main() -> None:
    args = arguments("000", __doc__, extra=options, joins=True)
    tables = set(args.tables.split(","))
    data = {name: name for name in args.datasets.split(",")}
    if args.quick:  # made-up stand-ins of TREC-6 (6 labels) and TREC-50 (12 labels)
        data = {
            name: quick_labelled(args.output / f"data-{name}", classes=c)
            for name, c in zip(DATASETS, (6, 12))
            if name in data
        }
    if "frozen" in tables:
        frozen(args, data)
    if unknown := [r for r in args.rows.split(",") if r not in SHORT]:
        print(f"--rows: no row {unknown[0]!r}; the rows are {', '.join(SHORT)}", file=sys.stderr)
        raise SystemExit(2)
    chosen = [SHORT[r] for r in args.rows.split(",")]
    if "results" in tables and (rows := {r: ROWS[r] for r in chosen if r in ROWS}):
        claims(args, trained_table(args, "results", rows, data, epochs=10))
        encoder_choice(args)
        results_picture(args)
    if "negatives" in tables and "trec50" in data and (rows := {r: NEGATIVES[r] for r in chosen if r in NEGATIVES}):
        negatives_claim(args, trained_table(args, "all negatives", rows, {"trec50": data["trec50"]}, epochs=15))
    finish(args)


if __name__ == "__main__":
    main()
