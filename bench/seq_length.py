"""Issue 33, item 5: what the encoder's max sequence length costs and gives on long texts.

    python bench/seq_length.py [--datasets 20ng,yahoo] [--train 3000] [--test 2000] [--lengths 64,128,256]

For each data set a stratified sample of ``--train`` training texts, ``--test`` test texts and the dev split (at most
1,000) is encoded by all-MiniLM-L6-v2 (frozen; its own default is 256 tokens) cut at each length, one length after
the other in this process (texts/s of the whole sample), and judged by the baseline of the figures page: a logistic
regression with C chosen on dev, refitted on train + dev, its test accuracy. ``fit`` should choose the length on dev
where 128 keeps test accuracy within 0.3 point of 256 at half the time. Run it alone.

Its figures are records (``docs/records/seq_length.jsonl``): the baseline's test accuracy at each length.
"""

from __future__ import annotations

import argparse
import time

from common import accuracy, encoded, logreg_on_dev, record, save, table


def sample(frame, n: int, seed: int = 0):
    """At most ``n`` rows, the same share of every label."""
    if len(frame) <= n:
        return frame
    share = n / len(frame)
    return frame.groupby("label", group_keys=False).sample(frac=share, random_state=seed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", default="20ng,yahoo")
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--lengths", default="64,128,256")
    args = parser.parse_args()
    from cea.data import load_dataset
    from cea.defaults import DEFAULT_MODEL
    from cea.encoders import load_encoder

    rows = []
    for name in args.datasets.split(","):
        ds = load_dataset(name)
        frames = {
            "train": sample(ds["train"], args.train),
            "dev": sample(ds["dev"], 1000),
            "test": sample(ds["test"], args.test),
        }
        n = sum(len(f) for f in frames.values())
        model = load_encoder(DEFAULT_MODEL)
        tokens = [len(t) for t in model.tokenizer(list(frames["test"]["text"]))["input_ids"]]
        for length in [int(x) for x in args.lengths.split(",")]:
            model.max_seq_length = length
            t0 = time.perf_counter()
            x, y = encoded(model, frames)
            seconds = time.perf_counter() - t0
            clf, c, dev = logreg_on_dev(x, y)
            cut = sum(t > length for t in tokens) / len(tokens)
            rows.append(
                [
                    name,
                    length,
                    round(100 * cut, 1),
                    round(n / seconds, 1),
                    round(100 * dev, 2),
                    c,
                    accuracy(clf.predict(x["test"]), y["test"]),
                ]
            )
            print(rows[-1], flush=True)
    save("seq_length", {"rows": rows, "train": args.train, "test": args.test})
    table(["data set", "max tokens", "test texts cut %", "texts/s", "dev accuracy", "C", "test accuracy"], rows)
    for name in args.datasets.split(","):
        mine = [r for r in rows if r[0] == name]
        record(
            "baseline accuracy at " + " / ".join(str(r[1]) for r in mine) + f" tokens, {name}",
            " / ".join(f"{r[6]:.2f}" for r in mine),
            unit="% test accuracy",
            section="training-time",
            note=" / ".join(str(r[3]) for r in mine) + " texts/s",
        )


if __name__ == "__main__":
    main()
