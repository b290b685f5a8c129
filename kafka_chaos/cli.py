"""kafka-chaos: the command line. Exit codes: 0 all consistent, 1 violation, 2 harness error."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.rundir import layout
from harness.settings import Settings, load_settings

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
log = logging.getLogger("kafka_chaos")


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: expected i/n, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: need 1 <= i <= n")
    return index, count


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(prog="kafka-chaos", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an experiment file end to end, then report")
    run.add_argument("experiment", type=Path)
    run.add_argument("--shard", type=_shard, help="run only shard i of n of the cells (i/n)")
    run.add_argument("--image", help="prebuilt broker image, e.g. apache/kafka:4.3.1")
    run.add_argument("--kafka-version", help="Kafka version of the locally built image")
    run.add_argument("--runs-dir", type=Path, help="where run directories go (default runs/)")
    run.add_argument("--repetitions", type=int, help="override the file's repetitions")
    run.add_argument("--quiet", action="store_true", help="plain progress lines (CI)")
    run.add_argument("--no-report", action="store_true", help="skip the Spark analysis")
    run.add_argument("--master", help="Spark master for the analysis")

    validate = sub.add_parser("validate", help="check an experiment file and list its cells")
    validate.add_argument("experiment", type=Path)

    report = sub.add_parser("report", help="reconcile and judge run directories (any number)")
    report.add_argument("runs", nargs="+", help="run directories or globs (any parent works)")
    report.add_argument("--out", type=Path, help="report folder (default reports/latest)")
    report.add_argument("--master", help="Spark master (default $KCHAOS_SPARK_MASTER, local[*])")
    report.add_argument("--junit", type=Path, help="JUnit XML path (default <out>/junit.xml)")

    image = sub.add_parser("image", help="build (or find) the broker image and print its tag")
    image.add_argument("--kafka-version")
    image.add_argument("--image", help="use this prebuilt image instead (pulled if missing)")
    image.add_argument("--rebuild", action="store_true")

    sub.add_parser("engine", help="make sure a Docker engine answers (install/start if root)")
    clean = sub.add_parser("clean", help="remove containers/networks a crashed run left")
    clean.add_argument("--all", action="store_true", help="also those of running harnesses")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kafka-chaos` console script."""
    args = build_parser().parse_args(argv)
    # SIGTERM (CI cancelling a job) takes the same path as Ctrl-C: every `finally` heals.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    try:
        return COMMANDS[args.command](args, settings)
    except KeyboardInterrupt:
        print("interrupted: faults healed, containers and networks removed", file=sys.stderr)
        return EXIT_INTERRUPTED


def _load_experiment(path: Path, args: argparse.Namespace):
    """The validated experiment at `path` with the command line's overrides, or None after
    printing why it is invalid (overrides are validated like the file's own values)."""
    from harness.experiment.load import load_experiment, override
    from harness.experiment.problems import SpecError

    try:
        experiment = load_experiment(path)
        if getattr(args, "repetitions", None) is not None:
            experiment = override(experiment, "repetitions", args.repetitions, "--repetitions")
        # These replace each cell's image when it runs; checked here like the file's own.
        for flag, path_in_file in (("kafka_version", "kafka.version"), ("image", "kafka.image")):
            if getattr(args, flag, None) is not None:
                override(
                    experiment, path_in_file, getattr(args, flag), f"--{flag.replace('_', '-')}"
                )
        return experiment
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return None


def _duration(seconds: float) -> str:
    """`seconds` as people read a wall time: 45 s, 5 min 30 s, 2 h 05 min."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _wall_time_lines(cells, repetitions: int) -> list[str]:
    """What `validate` says about how long the experiment will take, and on what assumption."""
    from harness.experiment.plan import CLUSTER_START_S, TOPIC_ISR_READBACK_S, wall_time

    estimate = wall_time(cells, repetitions)
    runs = f"{estimate.repetitions} repetition{'s' if estimate.repetitions != 1 else ''}"
    lines = [
        f"estimated wall time: {_duration(estimate.seconds)} for {runs} (each: its workload "
        f"plus ~{CLUSTER_START_S:.0f} s to start a fresh cluster and ~{TOPIC_ISR_READBACK_S:.0f}"
        " s for topic, full ISR and read-back; the analysis comes on top)"
    ]
    if estimate.unbounded_cells:
        lines.append(
            f"  not counted: the workload of {len(estimate.unbounded_cells)} cells (count "
            "without rate has no time bound), e.g. " + estimate.unbounded_cells[0]
        )
    return lines


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    from harness.experiment.matrix import expand

    experiment = _load_experiment(args.experiment, args)
    if experiment is None:
        return EXIT_ERROR
    cells = expand(experiment)
    print(f"{args.experiment}: valid, {len(cells)} cells x {experiment.repetitions} repetitions")
    for cell in cells:
        print(f"  {cell.name}")
    for line in _wall_time_lines(cells, experiment.repetitions):
        print(line)
    return EXIT_OK


def cmd_engine(args: argparse.Namespace, settings: Settings) -> int:
    from harness.platform.engine import main as engine_main

    return EXIT_OK if engine_main() == 0 else EXIT_ERROR


def cmd_clean(args: argparse.Namespace, settings: Settings) -> int:
    from harness.platform.cluster import remove_leftovers
    from harness.platform.engine import EngineUnavailable, ensure_engine

    try:
        ensure_engine()
    except EngineUnavailable as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(f"removed {remove_leftovers(settings, all_owners=args.all)} containers/networks")
    return EXIT_OK


def cmd_image(args: argparse.Namespace, settings: Settings) -> int:
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.image import ImageError, ensure_image

    try:
        ensure_engine()
        built = ensure_image(
            args.kafka_version,
            image=args.image,
            rebuild=args.rebuild,
            settings=settings,
            log=lambda line: print(line, file=sys.stderr),
        )
    except (EngineUnavailable, ImageError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(f"{built.tag} ({built.source} in {built.seconds:.1f} s)")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from analysis.pipeline import NoRunsFound

    out = args.out or settings.reports_dir / "latest"
    try:
        return _analyse_and_print(
            args.runs, out, args.master or settings.spark_master, "kafka-chaos report", args.junit
        )
    except NoRunsFound as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR


def _analyse_and_print(
    patterns: Sequence[str], out: Path, master: str, title: str, junit: Path | None = None
) -> int:
    """Run the analysis, print the verdict table and the report paths; return the exit code."""
    from rich.console import Console
    from rich.table import Table

    from analysis.pipeline import analyse, verdict_table
    from harness.workload.journal import finalize

    for run_dir in _unfinished_runs(patterns):
        finalize(run_dir)  # a crashed harness left only the journal: rebuild acked.parquet
    result = analyse(patterns, out, master=master, title=title, junit=junit)
    table = Table(title=title)
    for column in (
        "cell",
        "reps",
        "acked",
        "loss",
        "lost",
        "unseen",
        "dup",
        "diverged",
        "loss rate",
        "verdict",
    ):
        table.add_column(column, justify="left" if column in ("cell", "verdict") else "right")
    for row in verdict_table(result.cells):
        table.add_row(*row)
    console = Console(width=160)
    console.print(table)
    console.print(f"HTML report: {result.html}")
    console.print(f"Markdown:    {result.markdown}")
    console.print(f"JUnit XML:   {result.junit}")
    return result.exit_code


def _unfinished_runs(patterns: Sequence[str]) -> list[Path]:
    """Run directories with a journal but no acked.parquet (the harness died mid-run)."""
    import glob

    found = []
    for pattern in patterns:
        for match in glob.glob(pattern):
            for spec in Path(match).rglob(layout.SPEC):
                run_dir = spec.parent
                if not (run_dir / layout.ACKED).exists() and any(run_dir.glob(layout.JOURNAL_GLOB)):
                    found.append(run_dir)
    return found


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from harness.experiment.matrix import expand
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.image import ImageError
    from harness.run.runner import experiment_root, run_experiment, select_shard

    experiment = _load_experiment(args.experiment, args)
    if experiment is None:
        return EXIT_ERROR
    cells = select_shard(expand(experiment), args.shard)
    if not cells:
        print(f"shard {args.shard[0]}/{args.shard[1]} has no cells", file=sys.stderr)
        return EXIT_OK
    try:
        ensure_engine()
    except EngineUnavailable as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    root = experiment_root(args.runs_dir or settings.runs_dir, experiment, args.shard)
    root.mkdir(parents=True, exist_ok=True)
    _log_to(root / layout.HARNESS_LOG)
    try:
        outcomes = _run_with_progress(args, settings, experiment, cells, root, run_experiment)
    except ImageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(f"runs: {root}")
    harness_failed = any(outcome.error for outcome in outcomes)
    if args.no_report:
        return EXIT_ERROR if harness_failed else EXIT_OK
    code = _analyse_and_print(
        [str(root)],
        root / layout.REPORT_DIR,
        args.master or settings.spark_master,
        f"{experiment.name}: {experiment.description or 'kafka-chaos'}",
    )
    return EXIT_ERROR if harness_failed and code == EXIT_OK else code


def _run_with_progress(args, settings, experiment, cells, root, run_experiment):
    from harness.platform.image import ensure_image
    from harness.run.progress import LiveProgress, PlainProgress

    images: dict[tuple[str | None, str | None], object] = {}

    def image_for(cell):
        ref = args.image or cell.spec.kafka.image
        version = args.kafka_version or cell.spec.kafka.version
        if (ref, version) not in images:
            images[ref, version] = ensure_image(
                version, image=ref, settings=settings, log=lambda line: print(line, file=sys.stderr)
            )
        return images[ref, version]

    if args.quiet or not sys.stderr.isatty():
        return run_experiment(experiment, cells, root, image_for, PlainProgress())
    with LiveProgress() as progress:
        return run_experiment(experiment, cells, root, image_for, progress)


def _log_to(path: Path) -> None:
    """Send the harness's own log (and librdkafka's) to `path` at INFO."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("kafka_chaos")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "report": cmd_report,
    "image": cmd_image,
    "engine": cmd_engine,
    "clean": cmd_clean,
}

if __name__ == "__main__":
    sys.exit(main())
