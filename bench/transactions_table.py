"""The transaction search's table (docs/findings/jepsen-2024-transactions.md): one Markdown row
per repetition of a transactional experiment, from its analysed run directories.

    python bench/transactions_table.py EXPERIMENT_ROOT [EXPERIMENT_ROOT ...]

An experiment root is what `kafka-chaos run` prints after `runs:`; it must have been reported
(results.json in every run, report/report.json beside them for the verdicts). Each row: the
cell, the seed, the faults the schedule injected (by kind, and how many hit a coordinator),
the transactions' outcomes, the aborted messages in the log, the three transaction anomalies,
what the group processed twice, the longest stall of a partition's acknowledgements, and the
verdict. A last line sums the search.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

COORDINATORS = ("txn-coordinator", "group-coordinator")
END_TXN = 26  # the API key of EndTxn, as the shaper names the request that started a hold


def _faults(run_dir: Path) -> tuple[int, str]:
    """(how many faults started, `k pause, k kill, ...; c on a coordinator`)."""
    starts = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if '"fault_start"' in line
    ]
    kinds = Counter(e["fault"] for e in starts)
    on_coordinator = sum(1 for e in starts if e.get("target") in COORDINATORS)
    text = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    return len(starts), f"{text or 'none'}; {on_coordinator} on a coordinator"


def _end_txns_held(run_dir: Path) -> int:
    """How many connections a shaped fault held from an EndTxn on (the shaper's figures)."""
    held = 0
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        if '"fault_end"' not in line:
            continue
        shaper = (json.loads(line).get("detail") or {}).get("shaper") or {}
        for figures in shaper.values():
            connections = (figures or {}).get("held_connections") or {}
            held += sum(
                1
                for h in connections.values()
                if isinstance(h, dict) and h.get("api_key") == END_TXN
            )
    return held


def _verdicts(root: Path) -> dict[str, str]:
    """run_dir -> the repetition's verdict, from the root's report.json ({} if unreported)."""
    report = root / "report" / "report.json"
    if not report.is_file():
        return {}
    cells = json.loads(report.read_text())["cells"]
    return {
        str(Path(r["run_dir"]).resolve()): r["verdict"] for c in cells for r in c["repetitions"]
    }


def _row(run_dir: Path, verdicts: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """The Markdown cells of one repetition, and its figures for the total."""
    result = json.loads((run_dir / "results.json").read_text())
    spec = json.loads((run_dir / "spec.json").read_text())
    counts = result["counts"]
    faults, described = _faults(run_dir)
    stall = (result.get("availability") or {}).get("longest_partition_gap_s")
    figures = {
        "faults": faults,
        "end_txns_held": _end_txns_held(run_dir),
        "seconds": spec["workload"]["duration_s"],
        **{k: counts.get(k) or 0 for k in (
            "txn_committed", "txn_aborted", "txn_unknown", "txn_aborted_in_log",
            "aborted_read", "committed_lost", "torn_transaction", "consumer_reprocessed",
        )},
    }  # fmt: skip
    cells = [
        result["cell"],
        str(spec["seed"]),
        f"{faults}: {described}",
        f"{figures['end_txns_held']}",
        f"{figures['txn_committed']:,} / {figures['txn_aborted']:,} / {figures['txn_unknown']:,}",
        f"{figures['txn_aborted_in_log']:,}",
        f"{figures['aborted_read']}, {figures['committed_lost']}, {figures['torn_transaction']}",
        f"{figures['consumer_reprocessed']:,}",
        "-" if stall is None else f"{stall:.1f} s",
        verdicts.get(str(run_dir.resolve()), "not reported"),
    ]
    return cells, figures


def main(roots: list[Path]) -> None:
    print(
        "| cell | seed | faults | EndTxn held | transactions committed / aborted / unknown "
        "| aborted msgs in the log | aborted read, txn lost, torn | reprocessed by the group "
        "| longest stall | verdict |"
    )
    print("|---|---:|---|---:|---|---:|---|---:|---:|---|")
    total: Counter[str] = Counter()
    by_cell: dict[str, Counter[str]] = {}
    runs = 0
    for root in roots:
        verdicts = _verdicts(root)
        for results in sorted(root.glob("*/*/results.json")):
            cells, figures = _row(results.parent, verdicts)
            print("| " + " | ".join(cells) + " |")
            total.update(figures)
            by_cell.setdefault(cells[0], Counter()).update(figures)
            runs += 1
    print(
        f"\n{runs} repetitions, {total['seconds'] / 60:.0f} minutes of workload under "
        f"{total['faults']} faults: {total['txn_committed']:,} committed and "
        f"{total['txn_aborted']:,} aborted transactions; aborted reads {total['aborted_read']}, "
        f"committed lost {total['committed_lost']}, torn {total['torn_transaction']}"
    )
    print(
        "\n| cell | hours of workload | EndTxn held "
        "| aborted read, txn lost, torn (messages) per hour |"
    )
    print("|---|---:|---:|---|")
    for cell, figures in by_cell.items():
        hours = figures["seconds"] / 3600
        rates = ", ".join(
            f"{figures[k] / hours:.0f}"
            for k in ("aborted_read", "committed_lost", "torn_transaction")
        )
        print(f"| {cell} | {hours:.2f} | {figures['end_txns_held']} | {rates} |")


if __name__ == "__main__":
    given = [Path(arg) for arg in sys.argv[1:]]
    if not given or not all(any(p.glob("*/*/results.json")) for p in given):
        sys.exit(
            "usage: python bench/transactions_table.py EXPERIMENT_ROOT ... (each the `runs:` "
            "folder of an analysed run, with CELL/REP/results.json)"
        )
    main(given)
