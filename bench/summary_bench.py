"""Time the loss-report generation over many small synthetic repetitions: one Spark job for all
of them, then verdicts, the cross-run summary, the results dataset and the reports.

    .venv/bin/python bench/summary_bench.py [--repetitions 500] [--master local[2]]

The repetitions spread over 5 experiments, 2 Kafka versions and 5 configurations (acks 0, 1
and all; idempotence on and off), each of --messages messages in 3 partitions; a seeded share
of them (by acks) lose a few acknowledged messages. Prints seconds per stage and the summary's
groups and deciding settings.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.crossrun.dataset import write_dataset
from analysis.crossrun.summary import cross_run_summary
from analysis.judge.verdicts import judge_all, read_evidence_by_run
from analysis.report.render import render_report
from analysis.spark.reconcile import find_runs, reconcile, spark_session
from harness.rundir.records import ACKED_SCHEMA, READBACK_SCHEMA

EXPERIMENTS = 5
VERSIONS = ("4.3.1", "3.9.1")
CONFIGS = {  # name: (acks, idempotence, chance a repetition loses data)
    "acks0": ("0", False, 0.9),
    "acks1": ("1", False, 0.5),
    "acks1-idem": ("1", True, 0.5),
    "all": ("all", False, 0.0),
    "all-idem": ("all", True, 0.0),
}
T0_US = 1_700_000_000_000_000


def write_repetition(run_dir: Path, config: str, version: str, messages: int, rng) -> None:
    """One run directory: every message acked at its offset; maybe a few missing from the read."""
    acks, idempotence, chance = CONFIGS[config]
    run_dir.mkdir(parents=True)
    experiment, cell, rep = run_dir.parts[-4], run_dir.parts[-2], int(run_dir.parts[-1])
    spec = {
        "experiment": experiment,
        "cell": cell,
        "repetition": rep,
        "axes": {"config": config, "version": version},
        "config": {
            "acks": acks,
            "enable_idempotence": idempotence,
            "min_insync_replicas": 2,
            "replication_factor": 3,
            "partitions": 3,
            "fault_class": "leader-kill",
            "kafka_version": version,
        },
        "started_at_us": T0_US,
        "ended_at_us": T0_US + 40_000_000,
    }
    (run_dir / "spec.json").write_text(json.dumps(spec))
    (run_dir / "events.jsonl").write_text("")
    ids = list(range(messages))
    lost = set(rng.sample(ids, rng.randint(1, 20))) if rng.random() < chance else set()
    acked = {
        "msg_id": ids,
        "key": [f"k{i % 16}" for i in ids],
        "key_seq": [i // 16 for i in ids],
        "status": ["ok"] * messages,
        "partition": [i % 3 for i in ids],
        "offset": [i // 3 for i in ids],
        "error": [None] * messages,
        "send_ts_us": [T0_US + i * 1000 for i in ids],
        "ack_ts_us": [T0_US + i * 1000 + 700 for i in ids],
    }
    pq.write_table(pa.table(acked, schema=ACKED_SCHEMA), run_dir / "acked.parquet")
    kept = [i for i in ids if i not in lost]
    readback = {
        "msg_id": kept,
        "key": [f"k{i % 16}" for i in kept],
        "key_seq": [i // 16 for i in kept],
        "partition": [i % 3 for i in kept],
        "offset": [i // 3 for i in kept],
        "ts_us": [T0_US + i * 1000 for i in kept],
    }
    pq.write_table(pa.table(readback, schema=READBACK_SCHEMA), run_dir / "readback.parquet")


def write_repetitions(root: Path, repetitions: int, messages: int, seed: int = 7) -> None:
    """repetitions run directories spread over experiments, versions and configurations."""
    rng = random.Random(seed)
    combos = [(e, v, c) for e in range(EXPERIMENTS) for v in VERSIONS for c in CONFIGS]
    for index in range(repetitions):
        experiment, version, config = combos[index % len(combos)]
        rep = index // len(combos)
        run_dir = root / f"exp{experiment}" / "ts" / f"{config}-{version}" / str(rep)
        write_repetition(run_dir, config, version, messages, rng)


def main(argv: list[str] | None = None) -> int:
    """Write the repetitions, run every stage once, print seconds per stage."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=500)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="summary-bench-"))
    try:
        write_repetitions(root, args.repetitions, args.messages)
        run_dirs = find_runs([str(root)])
        stages: dict[str, float] = {}
        started = time.perf_counter()
        spark = spark_session(args.master)
        stages["Spark session start"] = time.perf_counter() - started
        started = time.perf_counter()
        results = reconcile(spark, run_dirs)
        stages[f"reconcile ({len(run_dirs)} runs, one Spark job)"] = time.perf_counter() - started
        started = time.perf_counter()
        events = read_evidence_by_run(results)
        cells = judge_all(results, events)
        stages["verdicts"] = time.perf_counter() - started
        started = time.perf_counter()
        summary = cross_run_summary(results, cells)
        stages["cross-run summary"] = time.perf_counter() - started
        started = time.perf_counter()
        write_dataset(results, cells, root / "report")
        stages["results dataset (Parquet)"] = time.perf_counter() - started
        started = time.perf_counter()
        render_report(cells, results, events, [], root / "report", "summary bench", summary)
        stages["reports (HTML, Markdown, JSON)"] = time.perf_counter() - started
        spark.stop()
        for stage, seconds in stages.items():
            print(f"{seconds:8.1f} s  {stage}")
        print(
            f"{len(summary.groups)} groups; settings that change the outcome: "
            f"{', '.join(summary.decisive_settings) or 'none'}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
