"""How soon the generic nemesis, aimed nowhere, finds each known bug the checker recognises.

    python bench/discovery_bench.py [--seeds 3] [--cap-minutes 20] [--chunk-minutes 5]
                                    [--results bench/discovery.jsonl] [--rows KAFKA-17754 ...]
                                    [--overlap 2] [--swarm] [--cascade 3]

For each row of the known-bug table (analysis/judge/known_bugs.py: its reference and the
experiment cells that provoke it), each cell of that experiment whose Kafka release and client
the row affects is run with its own workload and configuration but its faults replaced by the
generic nemesis (`faults.generate`, mode generic, every default family): repetitions of
--chunk-minutes of workload, seed after seed, until a finding of the analysis is KNOWN-BUG
with that row's reference (whatever verdict another finding gives the chunk), or --cap-minutes
of workload have run. One line per (row, cell, seed) is appended to --results (JSON: minutes
of workload to the first reproduction, or null, and the date, and the nemesis: --overlap lets
that many faults act at once, --swarm draws each chunk from its own half of the menu,
--cascade weighs the cascade family against the others' 1), and every other known bug its
chunks showed with the minutes to its first (`also_found`); a line already there is not run
again, so the benchmark resumes row by row.
Needs Docker and the broker images; each chunk starts a fresh cluster.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_EXPERIMENT = re.compile(r"(experiments/\S+?\.yaml)(?: \(([^)]*)\))?")
MEAN_INTERVAL_S = 10  # the generic nemesis' mean gap: the file's shipped default


@dataclass(frozen=True)
class Row:
    """One row to find: a known bug's reference, an experiment file and its cells (a glob)."""

    reference: str
    experiment: str
    cells: str  # fnmatch pattern over cell names; "*" for all


def rows_of(bugs: Iterable[Any]) -> list[Row]:
    """The rows of the known-bug table, one per (reference, experiment file, cells), in table
    order (a bug that explains several anomalies, as KAFKA-17754 does, is one row)."""
    found: dict[Row, None] = {}
    for bug in bugs:
        for path, pattern in _EXPERIMENT.findall(bug.experiment):
            cells = pattern or "*"
            found[Row(bug.reference, path, cells if cells.endswith("*") else cells + "*")] = None
    return list(found)


def affected_cells(row: Row, cells: Sequence[Any], bug: Any) -> list[Any]:
    """The cells of the row's experiment its glob names whose release and client the bug
    affects (a cell of a fixed release could never show it)."""
    from harness.experiment.plan import cell_config

    chosen = []
    for cell in cells:
        if not fnmatch.fnmatchcase(cell.name, row.cells):
            continue
        config = cell_config(cell, [])
        if bug.affects(cell.spec.kafka.version, config.client):
            chosen.append(cell)
    return chosen


@dataclass(frozen=True)
class Nemesis:
    """The generic nemesis' knobs a search may turn: each chunk drawing its own half of the
    menu (`swarm`), how many faults may be in force at once (`overlap`), and the cascade
    family's weight against the others' 1 (`cascade`), and the families allowed (`families`;
    empty: every default family); and the generator's revision that draws it (`revision`,
    harness.experiment.generic.REVISION; 0: before revisions were recorded)."""

    swarm: bool = False
    overlap: int = 1
    cascade: float = 1.0
    families: tuple[str, ...] = ()
    revision: int = 0

    @property
    def label(self) -> str:
        """How the results file and the docs name it: "generic, cascades", "generic,
        cascades x3, overlap 2, revision 1" ... (lines without "cascades" come from before the
        family, lines without "revision" from before revisions were recorded)."""
        if self.families:  # only the families named; the cascade weight, if allowed
            allowed = "+".join(self.families)
            weighed = "cascade" in self.families and self.cascade != 1
            weight = f" x{self.cascade:g}" if weighed else ""
            parts = ["generic", f"{allowed}{weight}"]
        else:
            weight = "" if self.cascade == 1 else f" x{self.cascade:g}"
            parts = ["generic", f"cascades{weight}"]
        parts += [f"overlap {self.overlap}"] * (self.overlap > 1)
        parts += ["swarm"] * self.swarm
        return ", ".join(parts + [f"revision {self.revision}"] * (self.revision > 0))


def unaimed(
    document: dict[str, Any], chunk_s: float, nemesis: Nemesis = Nemesis()
) -> dict[str, Any]:
    """An experiment document of one cell with its faults replaced by the generic nemesis and
    its workload lasting `chunk_s`."""
    workload = {**document["workload"], "duration_s": chunk_s, "count": None}
    generate = {
        "mode": "generic",
        "mean_interval_s": MEAN_INTERVAL_S,
        "swarm": nemesis.swarm,
        "overlap": nemesis.overlap,
        "weights": {"cascade": nemesis.cascade},
    }
    if nemesis.families:
        generate["families"] = list(nemesis.families)
    given = document.get("faults", {})
    faults = {
        "generate": generate,
        "final_heal_timeout_s": given.get("final_heal_timeout_s", 90),
        # The row's time after the producers stop, when its faults act then (an unclean
        # election nobody writes after): the nemesis draws over it too.
        "after_workload_s": given.get("after_workload_s", 0),
    }
    return {**document, "workload": workload, "faults": faults, "repetitions": 1, "matrix": {}}


def fresh(run_dir: Path) -> Path:
    """`run_dir` emptied: a chunk's directory left by a search that was stopped holds its
    events, which the replay would add to (and the judge read as an interrupted chunk)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    return run_dir


def replayed(run_dir: Path, steps: Sequence[Any]) -> bool:
    """Whether `run_dir` holds this chunk's finished run: reconciled (results.json) with the
    schedule `steps` (spec.json's, as drawn; another nemesis code draws another), so that it
    is judged again rather than run again."""
    from harness.experiment.model import FaultStep

    try:
        spec = json.loads((run_dir / "spec.json").read_text())
    except (OSError, ValueError):
        return False
    if not (run_dir / "results.json").exists():
        return False
    return [FaultStep.model_validate(step) for step in spec.get("schedule", [])] == list(steps)


def key_of(row: Row, cell: str, seed: int, nemesis: Nemesis = Nemesis()) -> str:
    """The results file's key of one search (another nemesis makes another search; a key
    without a label is a search from before the cascade family, which no nemesis repeats)."""
    return f"{row.reference}|{row.experiment}|{cell}|{seed}|{nemesis.label}"


# Seeds of 3 that must find a row (the done-when).
NEED_SEEDS = 2


@dataclass(frozen=True)
class Search:
    """One recorded search: a row's cell, a nemesis and a seed, and the minutes of workload to
    its first reproduction (None: not found)."""

    key: str
    reference: str
    experiment: str
    cell: str
    nemesis: str
    seed: int
    minutes: float | None


def searches_of(lines: Iterable[str]) -> list[Search]:
    """The searches of the results file's lines, the last line of a key winning (torn or
    foreign lines ignored)."""
    kept: dict[str, Search] = {}
    for line in lines:
        try:
            item = json.loads(line)
            kept[item["key"]] = Search(
                item["key"],
                item["reference"],
                item["experiment"],
                item["cell"],
                item.get("nemesis") or "generic",
                int(item["seed"]),
                item.get("minutes_to_first"),
            )
        except (ValueError, KeyError, TypeError):
            continue
    return list(kept.values())


def done_keys(results: Path) -> set[str]:
    """The searches the results file already holds (a torn last line is ignored)."""
    if not results.is_file():
        return set()
    return {search.key for search in searches_of(results.read_text().splitlines())}


def record(
    results: Path,
    row: Row,
    cell: str,
    seed: int,
    minutes: float | None,
    nemesis: Nemesis = Nemesis(),
    also: dict[str, float] | None = None,
) -> None:
    """Append one search's outcome to the results file; `also`: the other known bugs its
    chunks showed, each with the minutes of workload to its first."""
    line = {
        "key": key_of(row, cell, seed, nemesis),
        "reference": row.reference,
        "experiment": row.experiment,
        "cell": cell,
        "seed": seed,
        "nemesis": nemesis.label,
        "minutes_to_first": minutes,
        "also_found": also or {},
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    with results.open("a") as out:
        out.write(json.dumps(line) + "\n")


def decided(found: Iterable[Search], like: Search, seeds: int, need: int = NEED_SEEDS) -> bool:
    """Whether the recorded searches of `like`'s row, experiment, cell and nemesis (any seed)
    already decide the done-when: `need` of seeds 0..`seeds` - 1 found, or too many not found
    for `need` to be reached."""
    same = (like.reference, like.experiment, like.cell, like.nemesis)
    minutes = {
        s.seed: s.minutes
        for s in found
        if (s.reference, s.experiment, s.cell, s.nemesis) == same and s.seed < seeds
    }
    hits = sum(m is not None for m in minutes.values())
    return hits >= need or len(minutes) - hits > seeds - need


def searches(rows: Sequence[Row], seeds: int) -> Iterator[tuple[Row, int]]:
    """(row, seed) pairs in row order, seed after seed (cells are chosen when a row runs)."""
    for row in rows:
        for seed in range(seeds):
            yield row, seed


def _search(
    row: Row, cell: Any, seed: int, args: argparse.Namespace
) -> tuple[float | None, dict[str, float]]:
    """Minutes of workload until a chunk is judged KNOWN-BUG with the row's reference (None
    when --cap-minutes pass first), and the other known bugs the chunks showed on the way,
    each with the minutes to its first."""
    from harness.experiment.load import parse_experiment
    from harness.experiment.matrix import expand
    from harness.experiment.plan import schedule_for
    from harness.platform.image import ensure_image
    from harness.run.progress import PlainProgress
    from harness.run.replay import replay
    from kafka_chaos.commands.shrink import bugs_shown, judge_run, outcome_of

    chunk_s = args.chunk_minutes * 60
    document = unaimed(cell.spec.model_dump(by_alias=True), chunk_s, args.nemesis)
    document["name"] = "discovery"
    (unaimed_cell,) = expand(parse_experiment(document))
    image = ensure_image(cell.spec.kafka.version, image=cell.spec.kafka.image)
    # --chunk N: that chunk alone, its workload counted after the N before it.
    chunk = args.chunk or 0
    minutes = chunk * args.chunk_minutes
    also: dict[str, float] = {}
    while minutes + args.chunk_minutes <= args.cap_minutes:
        chunk_seed = seed * 1000 + chunk
        search = f"seed-{seed}" + "".join(f"-{w}" for w in args.nemesis.label.split(", ")[1:])
        search = search.replace(" ", "")  # seed-0-overlap2-swarm
        run_dir = args.runs_dir / row.reference / cell.name / search / str(chunk)
        steps = schedule_for(unaimed_cell, chunk_seed)
        if not replayed(run_dir, steps):  # a stopped search resumes at its next chunk
            replay(unaimed_cell, steps, chunk_seed, image, fresh(run_dir), PlainProgress())
        minutes += args.chunk_minutes
        verdict, result = judge_run(run_dir)
        outcome = outcome_of(verdict, result)
        shown = ", ".join(sorted(outcome.classes)) or "no class"
        bugs = bugs_shown(verdict)
        named = f"; known bugs {', '.join(sorted(bugs))}" if bugs else ""
        print(f"  {run_dir}: {outcome.verdict} ({shown}){named}", flush=True)
        for other in bugs - {row.reference}:
            also.setdefault(other, minutes)
        if row.reference in bugs:  # an UNKNOWN stall beside it hides nothing
            return minutes, also
        if args.chunk is not None:
            break
        chunk += 1
    return None, also


def main(argv: Sequence[str] | None = None) -> int:
    from analysis.judge.known_bugs import KNOWN_BUGS
    from harness.experiment.load import load_experiment
    from harness.experiment.matrix import expand

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cap-minutes", type=float, default=20)
    parser.add_argument("--chunk-minutes", type=float, default=5)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "discovery.jsonl")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "discovery")
    parser.add_argument("--rows", nargs="*", help="only these references")
    parser.add_argument("--cells", default="*", help="only the rows' cells matching this glob")
    parser.add_argument(
        "--swarm", action="store_true", help="each chunk draws its own half of the menu"
    )
    parser.add_argument("--overlap", type=int, default=1, help="faults in force at once")
    parser.add_argument("--cascade", type=float, default=1.0, help="the cascade family's weight")
    parser.add_argument(
        "--chunk",
        type=int,
        help="run (or judge again) only this chunk of each search, and record nothing: a "
        "chunk examined again on a machine that no longer holds its run",
    )
    parser.add_argument("--seed", type=int, help="only this seed (of 0..--seeds - 1)")
    parser.add_argument(
        "--until-decided",
        action="store_true",
        help=f"skip a cell's remaining seeds once {NEED_SEEDS} are found, or too many are not",
    )
    parser.add_argument(
        "--families", nargs="+", default=[], help="only these fault families (the nemesis' knob)"
    )
    args = parser.parse_args(argv)
    from harness.experiment.generic import REVISION

    families = tuple(args.families)
    args.nemesis = Nemesis(args.swarm, args.overlap, args.cascade, families, REVISION)
    bugs = {bug.reference: bug for bug in KNOWN_BUGS}
    rows = [r for r in rows_of(KNOWN_BUGS) if not args.rows or r.reference in args.rows]
    done = done_keys(args.results)
    for row, seed in searches(rows, args.seeds):
        if args.seed is not None and seed != args.seed:
            continue
        shipped = expand(load_experiment(ROOT / row.experiment))
        cells = affected_cells(row, shipped, bugs[row.reference])
        for cell in cells:
            if not fnmatch.fnmatchcase(cell.name, args.cells):
                continue
            key = key_of(row, cell.name, seed, args.nemesis)
            if args.chunk is None and key in done:
                continue
            like = Search(
                key, row.reference, row.experiment, cell.name, args.nemesis.label, seed, None
            )
            if args.until_decided and decided(_recorded(args.results), like, args.seeds):
                print(f"{row.reference} {cell.name} seed {seed}: decided, skipped", flush=True)
                continue
            minutes, also = _search(row, cell, seed, args)
            if args.chunk is not None:
                continue
            record(args.results, row, cell.name, seed, minutes, args.nemesis, also)
            shown = "not found" if minutes is None else f"{minutes:g} min"
            shown += "".join(f"; {ref} at {m:g} min" for ref, m in sorted(also.items()))
            print(f"{row.reference} {cell.name} seed {seed}: {shown}", flush=True)
    return 0


def _recorded(results: Path) -> list[Search]:
    """The searches the results file holds now (none when there is no file)."""
    return searches_of(results.read_text().splitlines()) if results.is_file() else []


def interruptible_main() -> int:
    """main() with Ctrl-C and SIGTERM handled as `kafka-chaos run` handles them: the chunk
    running heals its faults and removes its containers, then the exit code says the signal."""
    from harness.run.interrupts import INTERRUPTS

    previous = INTERRUPTS.install()
    try:
        return main()
    except KeyboardInterrupt:
        return INTERRUPTS.exit_code
    finally:
        INTERRUPTS.restore(previous)


if __name__ == "__main__":
    sys.exit(interruptible_main())
