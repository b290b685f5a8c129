"""The client safety table (docs/clients.md): each client family under the faults of one table's
experiment, k of n repetitions per cell, generated from the runs.

    python bench/client_safety.py --table producer            # run what is missing, print
    python bench/client_safety.py --table producer --no-run   # print from the runs there are
    python bench/client_safety.py --table transactions --set kafka.version=3.8.1 \
        --set repetitions=2 --cells '*retry' --runs-dir runs/bench-3.8.1   # another release

Tables: producer (experiments/client-safety-producer.yaml), transactions
(client-safety-transactions.yaml), group (client-safety-group.yaml). Each cell runs on its own
(`kafka-chaos run FILE --cells NAME`) into --runs-dir, so an interrupted bench goes on where it
stopped: a cell whose report.json is there is not run again. Prints one Markdown table: the
verdicts k of n and, per repetition, the counts that decide the cell (lost, duplicated,
reordered for the producer; aborted records read and committed ones lost for transactions;
records skipped and processed again for the group), with the command and the date.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KAFKA_CHAOS = [sys.executable, "-m", "kafka_chaos"]
TABLES = {
    "producer": ("client-safety-producer", ("loss", "duplicated", "reordered")),
    "transactions": (
        "client-safety-transactions",
        (
            "endtxn_held",
            "txn_unknown",
            "aborted_read",
            "committed_lost",
            "torn_transaction",
            "loss",
        ),
    ),
    "group": ("client-safety-group", ("consumer_unprocessed", "consumer_reprocessed", "loss")),
}
# `loss` is results.json's own (every class of acknowledged message missing: lost, unseen ...);
# endtxn_held is read from events.jsonl: the connections on which the fault held an EndTxn
# (what the table provokes); the others are its counts. txn_unknown (transactions whose end
# the client could not settle) says how often a held EndTxn outlasted the client's wait.
END_TXN = 26  # the EndTxn request's API key


def cells_of(experiment: Path, overrides: list[str]) -> list[str]:
    """The experiment's cell names with `overrides` (`--set` arguments), from `kafka-chaos
    validate --json`."""
    done = subprocess.run(
        [*KAFKA_CHAOS, "validate", str(experiment), *overrides, "--json"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return list(json.loads(done.stdout)["cells"])


def reports(runs: Path, name: str) -> dict[str, dict]:
    """Each cell's report.json entry of the finished runs under runs/<name>, the newest run of
    a cell winning."""
    found: dict[str, dict] = {}
    for report in sorted((runs / name).glob("*/report/report.json")):
        for cell in json.loads(report.read_text())["cells"]:
            found[cell["cell"]] = cell
    return found


def run_cell(experiment: Path, cell: str, runs: Path, overrides: list[str]) -> int:
    """Run one cell (its repetitions, with `overrides`) and its report; the exit code."""
    argv = [*KAFKA_CHAOS, "run", str(experiment), "--cells", cell, "--runs-dir", str(runs)]
    argv += overrides
    print(f"$ {' '.join(argv[2:])}", file=sys.stderr, flush=True)
    return subprocess.run([*argv, "--quiet"], cwd=ROOT, check=False).returncode


def row(cell: dict, counts: tuple[str, ...]) -> str:
    """One Markdown row: the cell, its verdicts k of n, and each count per repetition."""
    reps = cell["repetitions"]
    verdicts = Counter(rep["verdict"] for rep in reps)
    said = ", ".join(f"{verdict} {k} of {len(reps)}" for verdict, k in verdicts.most_common())
    per_rep = []
    for name in counts:
        values = []
        for rep in reps:
            run_dir = Path(rep["run_dir"])
            if name == "endtxn_held":
                got = _held(run_dir / "events.jsonl", END_TXN)
            elif (run_dir / "results.json").is_file():
                got = _count(json.loads((run_dir / "results.json").read_text()), name)
            else:
                got = None
            values.append("-" if got is None else str(got))
        per_rep.append(" / ".join(values))
    return f"| {cell['cell']} | {said} | " + " | ".join(per_rep) + " |"


def _held(events: Path, api_key: int) -> int | None:
    """How many connections the repetition's faults held a request of `api_key` on (the
    shapers' `held_connections` in each fault_end event); None without events."""
    if not events.is_file():
        return None
    held = 0
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") != "fault_end":
            continue
        for shaper in ((event.get("detail") or {}).get("shaper") or {}).values():
            connections = (shaper or {}).get("held_connections") or {}
            held += sum(1 for c in connections.values() if c.get("api_key") == api_key)
    return held


def _count(results: dict, name: str) -> int | None:
    """One figure of a repetition's results.json: its loss, or one of its counts."""
    return results.get("loss") if name == "loss" else results["counts"].get(name)


def main() -> int:
    """Run the table's missing cells (unless --no-run), then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=sorted(TABLES), default="producer")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "bench")
    parser.add_argument("--no-run", action="store_true", help="print from the runs there are")
    parser.add_argument(
        "--max-cells", type=int, default=None,
        help="run at most this many missing cells (to share the machine between runs)",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE",
        help="override a field of the table's experiment (as `kafka-chaos run --set`), e.g. "
        "kafka.version=3.8.1; give such a table a --runs-dir of its own",
    )  # fmt: skip
    parser.add_argument(
        "--cells", action="append", default=[], metavar="GLOB",
        help="only the cells whose name matches (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    name, counts = TABLES[args.table]
    experiment = ROOT / "experiments" / f"{name}.yaml"
    overrides = [arg for field in args.set for arg in ("--set", field)]
    cells = [
        cell
        for cell in cells_of(experiment, overrides)
        if not args.cells or any(fnmatch.fnmatch(cell, glob) for glob in args.cells)
    ]
    if not args.no_run:
        missing = [cell for cell in cells if cell not in reports(args.runs_dir, name)]
        for cell in missing[: args.max_cells]:
            run_cell(experiment, cell, args.runs_dir, overrides)
    found = reports(args.runs_dir, name)
    today = datetime.date.today().isoformat()
    command = " ".join(
        ["python bench/client_safety.py --table", args.table]
        + [f"--set {field}" for field in args.set]
        + [f"--cells '{glob}'" for glob in args.cells]
    )
    print(f"`{command}` ({today}, {experiment.name}):\n")
    print("| cell | verdicts | " + " | ".join(f"{c} (per repetition)" for c in counts) + " |")
    print("|---|---|" + "---|" * len(counts))
    for cell in cells:
        if cell in found:
            print(row(found[cell], counts))
        else:
            print(f"| {cell} | not run | " + " | ".join("-" for _ in counts) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
