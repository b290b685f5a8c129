"""kafka-chaos: the command line.

Exit codes: 0 every verdict consistent; 1 a violation, and only then; 2 a harness or
infrastructure error (bad input, no Docker, an unexpected exception); 130 interrupted by
Ctrl-C (SIGINT), 143 stopped by SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from harness.run.interrupts import INTERRUPTS
from harness.rundir import layout
from harness.settings import DEFAULT_KAFKA_VERSION, Settings, load_settings
from kafka_chaos import __version__

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2
KNOWN_BUG_HELP = "exit 1 also when a cell is KNOWN-BUG (a loss bug of that Kafka release)"
log = logging.getLogger("kafka_chaos")
# The log an unexpected exception's traceback goes to: the run's harness.log once it exists.
_log_path: Path | None = None
# The experiment run's root once `run` made it: named after an interrupt.
_run_root: Path | None = None


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: expected i/n, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: need 1 <= i <= n")
    return index, count


def version_text() -> str:
    """What `--version` prints: this harness, the default Kafka, and the client it links."""
    import confluent_kafka

    return (
        f"kafka-chaos {__version__}\n"
        f"default Kafka {DEFAULT_KAFKA_VERSION}\n"
        f"confluent-kafka {confluent_kafka.__version__}\n"
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )


class _PrintVersion(argparse.Action):
    """`--version`: print version_text() and exit 0 (imports the client only when asked)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(
        prog="kafka-chaos", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--version", action=_PrintVersion, help="print versions and exit")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an unexpected error"
    )
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
    run.add_argument("--fail-on-known-bug", action="store_true", help=KNOWN_BUG_HELP)

    validate = sub.add_parser("validate", help="check an experiment file and list its cells")
    validate.add_argument("experiment", type=Path)

    report = sub.add_parser("report", help="reconcile and judge run directories (any number)")
    report.add_argument("runs", nargs="+", help="run directories or globs (any parent works)")
    report.add_argument("--out", type=Path, help="report folder (default reports/latest)")
    report.add_argument("--master", help="Spark master (default $KCHAOS_SPARK_MASTER, local[*])")
    report.add_argument("--junit", type=Path, help="JUnit XML path (default <out>/junit.xml)")
    report.add_argument("--fail-on-known-bug", action="store_true", help=KNOWN_BUG_HELP)

    check = sub.add_parser(
        "cluster-check",
        help="reconcile runs on a Spark standalone cluster started here; compare with local mode",
    )
    check.add_argument("runs", nargs="+", help="run directories or globs (any parent works)")
    check.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    check.add_argument("--worker-cores", type=int, default=1, help="cores per worker (default 1)")
    check.add_argument("--worker-memory", default="1g", help="executor memory per worker")

    image = sub.add_parser("image", help="build (or find) the broker image and print its tag")
    image.add_argument("--kafka-version")
    image.add_argument("--image", help="use this prebuilt image instead (pulled if missing)")
    image.add_argument("--rebuild", action="store_true")

    sub.add_parser("engine", help="make sure a Docker engine answers (install/start if root)")
    clean = sub.add_parser("clean", help="remove containers/networks a crashed run left")
    clean.add_argument("--all", action="store_true", help="also those of running harnesses")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kafka-chaos` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    # Explicitly: a shell that starts us in the background hands SIGINT down as ignored.
    previous = INTERRUPTS.install()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings()
    try:
        if getattr(args, "experiment", None) is not None:
            args.experiment = settings.experiment_path(args.experiment)
        return COMMANDS[args.command](args, settings)
    except KeyboardInterrupt:
        return _interrupted(settings)
    except BrokenPipeError:
        # The reader of our output went away (`| head`): nothing left to tell it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as exc:
        return _crashed(exc, debug=args.debug)
    finally:
        INTERRUPTS.restore(previous)


def _interrupted(settings: Settings) -> int:
    """After SIGINT/SIGTERM: reap this process's containers and networks, say what is kept."""
    INTERRUPTS.stop.set()  # from here on a signal only says that the cleanup still runs
    removed = _remove_own_containers(settings)
    what = INTERRUPTS.signal.name if INTERRUPTS.signal else "interrupt"
    print(
        f"{what}: faults healed, containers and networks removed"
        + (f" ({removed} more reaped)" if removed else ""),
        file=sys.stderr,
    )
    if _run_root is not None:
        print(
            f"runs so far: {_run_root} (the interrupted repetition is judged UNKNOWN). "
            f"Report them with: kafka-chaos report {_run_root}",
            file=sys.stderr,
        )
    return INTERRUPTS.exit_code


def _remove_own_containers(settings: Settings) -> int:
    """Remove what this process created (twice: a create the interrupt abandoned lands late)."""
    from harness.platform.cluster import remove_leftovers

    removed = 0
    for attempt in range(2):
        try:
            removed += remove_leftovers(settings, owner=os.getpid())
        except Exception as exc:  # no engine at all: then nothing of ours can exist either
            log.info("no leftover sweep: %s", exc)
            return removed
        if attempt == 0:
            time.sleep(0.5)
    return removed


def _crashed(exc: Exception, debug: bool) -> int:
    """An unexpected exception: one line naming it, the traceback in the log; exit 2."""
    global _log_path
    if _log_path is None:
        handle, name = tempfile.mkstemp(prefix="kafka-chaos-error-", suffix=".log")
        os.close(handle)
        _log_path = Path(name)
    with _log_path.open("a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} unexpected error\n")
        traceback.print_exception(exc, file=out)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    first_line = (str(exc).strip().splitlines() or [""])[0][:300]
    print(f"error: {type(exc).__name__}: {first_line}", file=sys.stderr)
    fix = _known_fix(exc)
    if fix:
        print(f"fix: {fix}", file=sys.stderr)
    print(f"details: {_log_path} (or rerun with --debug)", file=sys.stderr)
    return EXIT_ERROR


def _known_fix(exc: Exception) -> str | None:
    """The fix for an exception whose cause is known, else None."""
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if "Java gateway" in text or "JAVA_HOME" in text:
        return _JAVA_FIX
    if text.startswith("docker.errors") or "Docker" in type(exc).__name__:
        return "start a Docker engine (`make engine` or `kafka-chaos engine`) and retry."
    if isinstance(exc, OSError) and exc.errno == 28:
        return "free disk space (runs/ and Docker images grow) and retry."
    return None


_JAVA_FIX = (
    "install a Java 17 runtime (apt-get install openjdk-17-jre-headless) or set JAVA_HOME; "
    "or run with --no-report and analyse later with `kafka-chaos report`."
)


def _require_java() -> bool:
    """True when a Java runtime for Spark is found; else print what is missing and the fix."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return True
    if not java_home and shutil.which("java"):
        return True
    where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
    print(f"the Spark analysis needs Java, and {where}. Fix: {_JAVA_FIX}", file=sys.stderr)
    return False


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

    if not _require_java():
        return EXIT_ERROR
    out = args.out or settings.reports_dir / "latest"
    try:
        return _analyse_and_print(
            args.runs,
            out,
            args.master or settings.spark_master,
            "kafka-chaos report",
            args.junit,
            known_bug_fails=args.fail_on_known_bug,
        )
    except NoRunsFound as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR


def cmd_cluster_check(args: argparse.Namespace, settings: Settings) -> int:
    """Start a master and workers on 127.0.0.1, reconcile through it and in local mode, compare;
    exit 0 when every run's result is the same, 2 otherwise (an analysis fault, not Kafka's)."""
    from analysis.reconcile import find_runs
    from analysis.spark_cluster import ClusterError, StandaloneCluster, compare_with_local

    if not _require_java():
        return EXIT_ERROR
    run_dirs = find_runs(args.runs)
    if not run_dirs:
        print(f"no run directory under {' '.join(args.runs)}", file=sys.stderr)
        return EXIT_ERROR
    try:
        with StandaloneCluster(args.workers, args.worker_cores, args.worker_memory) as cluster:
            print(f"{cluster.master_url}: {cluster.alive_workers()} workers alive")
            report = compare_with_local(run_dirs, cluster)
    except ClusterError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    print(
        f"{len(report.run_dirs)} runs: local[2] {report.local_s:.1f} s, "
        f"{report.master_url} {report.cluster_s:.1f} s (each with its session start)"
    )
    for run_dir in report.differing:
        print(f"  differs: {run_dir}")
    print("identical results" if report.identical else f"{len(report.differing)} runs differ")
    return EXIT_OK if report.identical else EXIT_ERROR


def _analyse_and_print(
    patterns: Sequence[str],
    out: Path,
    master: str,
    title: str,
    junit: Path | None = None,
    *,
    known_bug_fails: bool = False,
) -> int:
    """Run the analysis, print the verdict table and the report paths; return the exit code
    (1 for a KNOWN-BUG cell too when `known_bug_fails`)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from analysis.judge.verdicts import exit_code
    from analysis.pipeline import analyse, verdict_table
    from harness.workload.journal import finalize

    for run_dir in _unfinished_runs(patterns):
        finalize(run_dir)  # a crashed harness left only the journal: rebuild acked.parquet
    result = analyse(patterns, out, master=master, title=title, junit=junit)
    table = Table(title=escape(title))  # user text: square brackets are not markup
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
        table.add_row(*(escape(value) for value in row))
    console = Console(width=160)
    console.print(table)
    console.print(f"HTML report: {result.html}")
    console.print(f"Markdown:    {result.markdown}")
    console.print(f"JUnit XML:   {result.junit}")
    console.print(f"Dataset:     {result.dataset} (Parquet, one row per repetition)")
    for failure in result.failures:  # shown in place in the report too; the verdicts stand
        print(f"warning: {failure}", file=sys.stderr)
    if not result.written:  # verdicts nobody can read: a harness error, whatever they say
        print(f"error: no report file could be written under {out}", file=sys.stderr)
        return EXIT_ERROR
    return exit_code(result.cells, known_bug_fails=known_bug_fails)


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

    global _run_root
    experiment = _load_experiment(args.experiment, args)
    if experiment is None:
        return EXIT_ERROR
    cells = select_shard(expand(experiment), args.shard)
    if not cells:
        print(f"shard {args.shard[0]}/{args.shard[1]} has no cells", file=sys.stderr)
        return EXIT_OK
    if not args.no_report and not _require_java():
        return EXIT_ERROR
    try:
        ensure_engine()
        # Every image before any cluster: a missing build tool fails here, not mid-experiment.
        images = _images_for(args, settings, cells)
    except (EngineUnavailable, ImageError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    root = experiment_root(args.runs_dir or settings.runs_dir, experiment, args.shard)
    root.mkdir(parents=True, exist_ok=True)
    _run_root = root
    _log_to(root / layout.HARNESS_LOG)
    summaries = _run_with_progress(args, experiment, cells, root, images, run_experiment)
    print(f"runs: {root}")
    harness_failed = any(summary.error for summary in summaries)
    if args.no_report:
        return EXIT_ERROR if harness_failed else EXIT_OK
    code = _analyse_and_print(
        [str(root)],
        root / layout.REPORT_DIR,
        args.master or settings.spark_master,
        f"{experiment.name}: {experiment.description or 'kafka-chaos'}",
        known_bug_fails=args.fail_on_known_bug,
    )
    return EXIT_ERROR if harness_failed and code == EXIT_OK else code


def _image_key(args: argparse.Namespace, cell) -> tuple[str | None, str]:
    """(prebuilt image ref or None, Kafka version) of a cell, the CLI's flags first."""
    return args.image or cell.spec.kafka.image, args.kafka_version or cell.spec.kafka.version


def _images_for(args: argparse.Namespace, settings: Settings, cells) -> dict:
    """The broker image of every distinct (image, version) of `cells`, built or found."""
    from harness.platform.image import ensure_image

    images = {}
    for cell in cells:
        key = _image_key(args, cell)
        if key not in images:
            ref, version = key
            images[key] = ensure_image(
                version, image=ref, settings=settings, log=lambda line: print(line, file=sys.stderr)
            )
    return images


def _run_with_progress(args, experiment, cells, root, images, run_experiment):
    from harness.run.progress import LiveProgress, PlainProgress

    def image_for(cell):
        return images[_image_key(args, cell)]

    if args.quiet or not sys.stderr.isatty():
        return run_experiment(experiment, cells, root, image_for, PlainProgress())
    with LiveProgress() as progress:
        return run_experiment(experiment, cells, root, image_for, progress)


def _log_to(path: Path) -> None:
    """Send the harness's own log (and librdkafka's) to `path` at INFO."""
    global _log_path
    _log_path = path
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
    "cluster-check": cmd_cluster_check,
    "image": cmd_image,
    "engine": cmd_engine,
    "clean": cmd_clean,
}

if __name__ == "__main__":
    sys.exit(main())
