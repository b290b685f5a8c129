"""`kafka-chaos shrink RUN`: the smallest schedule that still reproduces a failing repetition.

RUN is one repetition judged KNOWN-BUG or VIOLATION, or showing a known bug beside an UNKNOWN
finding. Its cell is rebuilt from spec.json and replayed on fresh clusters with subsets of its
faults, then shorter durations (harness/experiment/shrink.py); a schedule reproduces when
--need of --repetitions replays end with RUN's verdict and a class in common (the known bug's
reference, or an anomaly class). The smallest is written as an experiment file with its k of n.
When the whole reproduces too rarely (a race), each fault is asked alone, repeated --repeat
times (--alone: right after the empty schedule; --only: a glob of the faults asked). --draws
asks each draw of the generic nemesis alone, aimed at the partition the failure struck
(--struck, harness/experiment/struck.py), repeated with its distances kept; the first that
reproduces, or its first round when that does too, is the file.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_ERROR, EXIT_OK

if TYPE_CHECKING:
    from analysis.judge.outcomes import RepetitionVerdict
    from analysis.model.results import RunResult
    from harness.experiment.model import FaultStep
    from harness.experiment.shrink import Shrunk

NAME = "shrink"
HELP = "replay a failing repetition with fewer, shorter faults; write the smallest that fails"
SHRINKABLE = ("KNOWN-BUG", "VIOLATION")


@dataclass(frozen=True)
class Outcome:
    """What a judged repetition showed: its verdict and its classes (the known bugs' references
    for KNOWN-BUG; the anomaly classes counted, and loss, otherwise)."""

    verdict: str
    classes: frozenset[str]


def outcome_of(verdict: RepetitionVerdict, result: RunResult) -> Outcome:
    """The Outcome of a repetition judged `verdict`, whose reconciled result is `result`: a
    known bug's when a finding names one, unless another made it a VIOLATION."""
    from analysis.model.anomalies import ANOMALY_NAMES

    shown = bugs_shown(verdict)
    # A known bug shown beside an UNKNOWN finding (a consumer's poll skips over a log an
    # unclean election rewrote, say) is that bug, as the discovery benchmark counts it.
    if verdict.verdict == "KNOWN-BUG" or (shown and verdict.verdict != "VIOLATION"):
        return Outcome("KNOWN-BUG", shown)
    counts = result.counts or {}
    classes = {str(name) for name in ANOMALY_NAMES if counts.get(name, 0)}
    classes |= {"loss"} if verdict.loss else set()
    return Outcome(str(verdict.verdict), frozenset(classes))


def bugs_shown(verdict: RepetitionVerdict) -> frozenset[str]:
    """The references of the known bugs the findings judged KNOWN-BUG name, whatever the
    verdict another finding decided."""
    from analysis.judge.known_bugs import references_in

    return references_in(verdict.known_bugs)


def same_failure(original: Outcome, replay: Outcome) -> bool:
    """Whether `replay` reproduces `original`: the same verdict and, when the original has
    classes, one of them."""
    if replay.verdict != original.verdict:
        return False
    return not original.classes or bool(original.classes & replay.classes)


def judge_run(run_dir: Path) -> tuple[RepetitionVerdict, RunResult]:
    """One run directory reconciled in this process (results.json written) and judged."""
    from analysis.judge.verdicts import judge_repetition, read_evidence_by_run
    from analysis.spark.reconcile import reconcile_in_process, write_results

    (result,) = reconcile_in_process([run_dir])
    write_results([result])
    return judge_repetition(result, read_evidence_by_run([result])[result.run_dir]), result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The repetition and the search's budget."""
    parser.add_argument("run", type=Path, metavar="RUN", help="one repetition's run directory")
    parser.add_argument(
        "--budget", type=int, default=30, help="replays the whole search may run (default 30)"
    )
    parser.add_argument(
        "--repetitions", type=int, default=3, help="replays of a schedule at most (n, default 3)"
    )
    parser.add_argument(
        "--need", type=int, default=2, help="replays that must reproduce (k of n, default 2)"
    )
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each fault step on a partition's role waits for the ISR, leader and committed "
        "messages it met in RUN (default; --no-pin replays the schedule's clock alone)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="when RUN's schedule reproduces too rarely, ask each fault (with --draws, each "
        "draw) alone repeated this many times over the workload (default 3; 1: do not)",
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="ask each fault alone, repeated, straight after the empty schedule (no replay of "
        "the whole, no subsets): for a race, or a bug each fault can set off",
    )
    parser.add_argument(
        "--draws",
        action="store_true",
        help="ask each of the nemesis' draws alone (a cascade's faults together), repeated "
        "--repeat times over the workload (--repeat 1: at its own times, once), straight "
        "after the empty schedule: for a loss a cascade made",
    )
    parser.add_argument(
        "--struck",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --draws, aim each fault at the role its nodes held in the partition RUN "
        "lost most on, away from the controller where it was (default; --no-struck: as drawn)",
    )
    parser.add_argument(
        "--only",
        metavar="GLOB",
        help="ask alone only the faults whose FAULT@TARGET matches GLOB (e.g. 'kill@*'), or "
        "with --draws the draws with such a fault; implies --alone without --draws",
    )
    parser.add_argument("--out", type=Path, help="the experiment file (default RUN/shrunk.yaml)")
    parser.add_argument("--runs-dir", type=Path, help="where replays go (default runs/)")
    parser.add_argument("--image", help="prebuilt broker image (default: the run's version)")


def _refusal(args: argparse.Namespace) -> str | None:
    """What is wrong with the numbers given, as one line with the fix; None when nothing."""
    if not 1 <= args.need <= args.repetitions:
        return f"--need {args.need} must be 1..--repetitions ({args.repetitions})"
    if args.budget < args.repetitions:
        return f"--budget {args.budget} is below --repetitions ({args.repetitions}); raise it"
    if args.repeat < 1:
        return f"--repeat {args.repeat} must be at least 1 (1: no fault is asked repeated)"
    if args.draws and args.alone:
        return "--draws asks each draw alone, --alone each fault: give one"
    if (args.alone or args.only) and not args.draws and args.repeat < 2:
        return "--alone and --only ask faults repeated: give --repeat 2 or more"
    return None


@dataclass
class _Replays:
    """The predicate over the real harness: replays of the cell, judged, counted."""

    args: argparse.Namespace
    cell: object
    seed: int
    image: object
    root: Path
    original: Outcome
    horizon_s: float
    runs: int = 0
    # Per schedule (its steps as JSON: steps are not hashable), replays that hit and ran.
    tally: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)

    def trial(self, schedule: tuple[FaultStep, ...]) -> bool:
        """One replay of `schedule`: True when it fails as the original did."""
        from harness.experiment.soak import expand_repeats
        from harness.run.progress import PlainProgress
        from harness.run.replay import replay

        self.runs += 1
        run_dir = self.root / f"{self.runs:03d}-{len(schedule)}-steps"
        # A repeated step (every_s) is replayed as its repetitions, as a run of its file is.
        repeats = any(step.repeats for step in schedule)
        plain = expand_repeats(schedule, self.horizon_s) if repeats else schedule
        replay(self.cell, plain, self.seed, self.image, run_dir, PlainProgress())  # type: ignore[arg-type]
        verdict, result = judge_run(run_dir)
        print(f"replay {self.runs}: {_size(schedule)}, {verdict.verdict}", file=sys.stderr)
        return same_failure(self.original, outcome_of(verdict, result))

    def counted(self, schedule: tuple[FaultStep, ...]) -> bool:
        """`trial`, its answer added to the schedule's tally."""
        hit = self.trial(schedule)
        hits, tried = self.tally.get(_key(schedule), (0, 0))
        self.tally[_key(schedule)] = (hits + hit, tried + 1)
        return hit


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Shrink RUN's schedule within --budget replays and write the smallest that reproduced."""
    from analysis.judge.outcomes import Verdict
    from harness.experiment.from_run import cell_of_run, steps_of_run
    from harness.experiment.model import workload_duration_s
    from harness.experiment.pin import first_acks, pin
    from harness.experiment.problems import SpecError
    from harness.experiment.shrink import Budget, k_of_n, repeated, shrink_schedule, unbound
    from harness.rundir.events import FaultStart, read_events
    from harness.rundir.spec import RunSpec, RunSpecError

    if problem := _refusal(args):
        print(problem, file=sys.stderr)
        return EXIT_ERROR
    try:
        spec = RunSpec.read(args.run)
        cell = cell_of_run(spec)
    except (OSError, RunSpecError, SpecError, ValueError) as exc:
        print(
            f"{args.run}: not a repetition's run directory ({exc}); name one, e.g. "
            "runs/<experiment>/<time>/<cell>/0",
            file=sys.stderr,
        )
        return EXIT_ERROR
    timed = tuple(steps_of_run(spec))
    asked = [step for step in timed if _matches(step, args.only)]
    if args.only and not asked:
        print(_unmatched(args, timed), file=sys.stderr)
        return EXIT_ERROR
    verdict, result = judge_run(args.run)
    if outcome_of(verdict, result).verdict not in (Verdict.KNOWN_BUG, Verdict.VIOLATION):
        print(
            f"{args.run} was judged {verdict.verdict}; shrink takes a repetition judged "
            "KNOWN-BUG or VIOLATION, or one showing a known bug",
            file=sys.stderr,
        )
        return EXIT_ERROR
    starts = read_events(args.run).of(FaultStart)
    steps = pin(timed, starts, first_acks(args.run)) if args.pin else timed
    if args.pin:
        held = sum(a.after != b.after for a, b in zip(steps, timed, strict=True))
        print(f"{held} of {_size(steps)} pinned to the state they met", file=sys.stderr)
    image = _image(args, settings, cell)
    if image is None:
        return EXIT_ERROR
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    root = (args.runs_dir or settings.runs_dir) / f"{spec.experiment}-shrink" / stamp
    original = outcome_of(verdict, result)
    horizon_s = workload_duration_s(cell.spec.workload) or 0.0
    replays = _Replays(args, cell, spec.seed or 0, image, root, original, horizon_s)
    budget = Budget(args.budget)

    answers: dict[tuple[str, ...], bool | None] = {}

    def reproduces(schedule: tuple[FaultStep, ...]) -> bool | None:
        # Asked once per schedule: the search asks the empty one again after the check below.
        key = _key(schedule)
        if key not in answers:
            answers[key] = k_of_n(
                lambda: replays.counted(schedule), args.need, args.repetitions, budget
            )
        return answers[key]

    # No fault first: a failure the workload alone makes needs no confirmation of the whole.
    empty_fails = bool(steps) and reproduces(())
    if empty_fails or (not (args.alone or args.only or args.draws) and reproduces(steps)):
        shrunk, pinned = shrink_schedule(steps, reproduces), args.pin
        state = "1-minimal" if shrunk.finished else "budget spent before 1-minimal"
    else:
        if args.draws:
            aimed = _aimed(args, timed, result, cell.spec.kafka.version or settings.kafka_version)
            draws = _draws(timed, aimed, args.only, horizon_s, args.repeat)
            one = _first_once(_first_alone(draws, reproduces, replays.tally), reproduces)
        else:
            # A fault drawn to overlap is bound to a name its heal ends: repeated, it is timed.
            made = repeated(unbound(timed), horizon_s, args.repeat) if args.repeat > 1 else []
            alone = [step for step in made if _matches(step, args.only)]
            one = _first_alone([(step,) for step in alone], reproduces, replays.tally)
        if one is None or not one.finished:
            lead = "" if one is None else _lead(one.items, replays.tally, args, spec, original)
            print(_nothing(args, original) + lead, file=sys.stderr)
            return EXIT_ERROR
        shrunk, pinned = one, False
        # A draw's faults were asked together only: none was dropped to see whether it is needed.
        state = "the first draw that reproduced alone" if args.draws else "1-minimal"
    out = args.out or args.run / "shrunk.yaml"
    hits, tried = replays.tally.get(_key(shrunk.items), (0, 0))
    tally = (hits, tried, args.need, args.repetitions)
    _write(out, spec, shrunk.items, original, tally, args.run, pinned)
    print(
        f"{_size(steps)} -> {_size(shrunk.items)} ({state}), {budget.spent} replays in "
        f"{root}; reproduced {hits} of {tried}: {out}"
    )
    return EXIT_OK


def _matches(step: FaultStep, only: str | None) -> bool:
    """Whether --only lets `step` be asked alone: FAULT@TARGET matches the glob (no glob: all)."""
    return only is None or fnmatch.fnmatchcase(f"{step.fault}@{step.target}", only)


def _unmatched(args: argparse.Namespace, timed: tuple[FaultStep, ...]) -> str:
    """The refusal of an --only glob that matches none of RUN's faults, naming them."""
    named = ", ".join(f"{step.fault}@{step.target}" for step in timed if not step.heals)
    return f"no fault of {args.run} matches --only {args.only}; its faults: {named}"


def _nothing(args: argparse.Namespace, original: Outcome) -> str:
    """Why no file was written: what was asked and reproduced too rarely, and the fix."""
    which = f" matching {args.only}" * bool(args.only)
    alone = f"any fault of it{which} alone, repeated {args.repeat} times"
    if args.draws:
        asked = f"any draw of it{' with a fault' * bool(args.only)}{which} alone"
    elif args.alone or args.only:
        asked = alone
    else:
        asked = "the run's own schedule" + f", nor {alone}" * (args.repeat > 1)
    return (
        f"{asked} reproduced {original.verdict} in fewer than {args.need} of "
        f"{args.repetitions} replays (or the budget ran out): nothing to shrink; raise "
        f"--repetitions{'' if args.draws else ', --repeat'} or --budget"
    )


def _aimed(
    args: argparse.Namespace, timed: tuple[FaultStep, ...], result: RunResult, version: str
) -> tuple[FaultStep, ...]:
    """`timed` aimed at the partition RUN's failure struck with --struck (struck.py), saying
    so; `timed` itself otherwise, or when no partition lost or diverged anything."""
    from harness.experiment.struck import AWAY_FROM_CONTROLLER, aimed_at, struck_partition
    from harness.rundir.events import FaultStart, Sample, read_events

    by_partition = (result.loss_by_partition or {}, result.divergence_by_partition or {})
    if not args.struck or (partition := struck_partition(*by_partition)) is None:
        return timed
    events = read_events(args.run)
    read = [(s.ts_us or 0, s.controller) for s in events.of(Sample) if s.controller is not None]
    aimed = aimed_at(timed, events.of(FaultStart), partition, version, read)
    moved = sum(a != b for a, b in zip(aimed, timed, strict=True))
    away = sum(s.partition == AWAY_FROM_CONTROLLER for s in aimed)
    said = f"{moved} faults aimed at partition {partition}, which the failure struck"
    print(said + (f" ({away} {AWAY_FROM_CONTROLLER}, as it was)" if away else ""), file=sys.stderr)
    return aimed


def _draws(
    timed: tuple[FaultStep, ...],
    aimed: tuple[FaultStep, ...],
    only: str | None,
    horizon_s: float,
    repeat: int,
) -> list[tuple[FaultStep, ...]]:
    """The nemesis' draws of `timed` (the run's clock), each as a schedule of its own made of
    the steps of `aimed` at the same positions (timed itself, or aimed at a partition): a
    cascade's faults with their heals, any other fault alone; with `only`, the draws with a
    fault of `timed` matching it. With `repeat` > 1, each repeated that many times over the
    workload (timed first: a cascade's faults are bound to names their heals end), those that
    cannot repeat left out; else once, at its own times. In the order they came."""
    from harness.experiment.shrink import drawn_units, repeated_draw, unbound

    units = [
        u
        for u in drawn_units(timed)
        if any(_matches(timed[i], only) for i in u if not timed[i].heals)
    ]
    chosen = [tuple(aimed[i] for i in unit) for unit in units]
    if repeat <= 1:
        return chosen
    made = (tuple(repeated_draw(unbound(d), horizon_s, repeat)) for d in chosen)
    return [d for d in made if d]


def _first_alone(
    candidates: Sequence[tuple[FaultStep, ...]],
    reproduces: Callable[[tuple[FaultStep, ...]], bool | None],
    tally: dict[tuple[str, ...], tuple[int, int]],
) -> Shrunk[FaultStep] | None:
    """The first of `candidates` (schedules of one fault repeated, or of one draw) that
    reproduces on its own (finished); the one being asked when the budget ran out, if a replay
    of it reproduced (not finished: a lead); None when none does."""
    from harness.experiment.shrink import Shrunk

    for schedule in candidates:
        names = " then ".join(f"{s.fault}@{s.target}" for s in schedule if not s.heals)
        every = _periods(schedule)
        print(f"asking {names} alone{every}", file=sys.stderr)
        answer = reproduces(schedule)
        if answer is None:
            hit = tally.get(_key(schedule), (0, 0))[0] > 0
            return Shrunk(schedule, False) if hit else None
        if answer:
            return Shrunk(schedule, True)
    return None


def _first_once(
    one: Shrunk[FaultStep] | None, reproduces: Callable[[tuple[FaultStep, ...]], bool | None]
) -> Shrunk[FaultStep] | None:
    """`one` (a repeated draw that reproduced) or, when it reproduces too, its first round."""
    from harness.experiment.shrink import Shrunk, first_round

    once = None if one is None or not one.finished else first_round(one.items)
    if once is None:
        return one
    print(f"asking its first round alone: {_size(once)}", file=sys.stderr)
    return Shrunk(once, True) if reproduces(once) else one


def _lead(
    steps: tuple[FaultStep, ...],
    tally: dict[tuple[str, ...], tuple[int, int]],
    args: argparse.Namespace,
    spec: object,
    original: Outcome,
) -> str:
    """Write the fault the budget ran out on, which reproduced in some of its replays, to
    --out (or RUN/lead.yaml) and say so: a lead to confirm with `kafka-chaos run`."""
    out = args.out or args.run / "lead.yaml"
    hits, tried = tally.get(_key(steps), (0, 0))
    _write(out, spec, steps, original, (hits, tried, args.need, args.repetitions), args.run)
    return (
        f"; the budget ran out on {_size(steps)}, which reproduced in {hits} of {tried}: "
        f"written to {out}, to run with --repetitions to confirm"
    )


def _size(schedule: tuple[FaultStep, ...]) -> str:
    """'<faults> faults (<steps> steps)': the faults a schedule injects, its heal steps apart
    (a repeated step is one fault, its repetitions named)."""
    faults = sum(not step.heals for step in schedule)
    return f"{faults} faults ({len(schedule)} steps{_periods(schedule)})"


def _periods(schedule: tuple[FaultStep, ...]) -> str:
    """', repeated every <s> s' for each period the schedule's repeated steps have, in their
    order (a period several steps share named once); '' when none repeats."""
    periods = dict.fromkeys(step.every_s for step in schedule if step.repeats)
    return "".join(f", repeated every {every:g} s" for every in periods)


def _key(schedule: tuple[FaultStep, ...]) -> tuple[str, ...]:
    """A schedule as a dictionary key."""
    return tuple(step.model_dump_json() for step in schedule)


def _image(args: argparse.Namespace, settings: Settings, cell: object) -> object | None:
    """The broker image, the faults' helpers and the clients of `cell`, built or found; None
    (said on stderr) when the engine or a build is unavailable."""
    from harness.platform.client_builds import ClientBuildError
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.image import ImageError, ensure_image
    from harness.workload.java_client import JavaBuildError
    from kafka_chaos.commands import run as run_command

    spec = cell.spec  # type: ignore[attr-defined]
    try:
        ensure_engine()
        image = ensure_image(
            spec.kafka.version,
            image=args.image or spec.kafka.image,
            settings=settings,
            log=lambda line: print(line, file=sys.stderr),
        )
        helper_args = argparse.Namespace(image=args.image, kafka_version=None)
        run_command._prepare_faults(helper_args, settings, [cell])
        run_command._build_clients(settings, [cell])
    except (EngineUnavailable, ImageError, JavaBuildError, ClientBuildError) as exc:
        print(exc, file=sys.stderr)
        return None
    return image


def _write(
    out: Path,
    spec: object,
    steps: tuple[FaultStep, ...],
    original: Outcome,
    tally: tuple[int, int, int, int],
    run_dir: Path,
    pinned: bool = False,
) -> None:
    """The experiment file of `steps`, headed by what it reproduces and in how many replays."""
    import yaml

    from harness.experiment.from_run import experiment_document

    hits, tried, need, n = tally
    classes = ", ".join(sorted(original.classes)) or "no class"
    header = (
        f"# Shrunk by `kafka-chaos shrink` from {run_dir}: {original.verdict} ({classes})\n"
        f"# reproduced in {hits} of {tried} replays (needed {need} of {n}) with these "
        f"{_size(steps)}.\n"
    )
    pin = "# Its fault steps on a partition's role wait (after:) for the ISR size and leader"
    header += f"{pin} they met in that run\n# (the first for a committed message too).\n" * pinned
    name = None if out.stem == "shrunk" else out.stem  # --out's own name, as a file names it
    document = experiment_document(spec, steps, name)  # type: ignore[arg-type]
    out.write_text(header + yaml.safe_dump(document, sort_keys=False))
