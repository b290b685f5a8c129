"""`kafka-chaos run FILE`: run an experiment file end to end (every cell and repetition on a
fresh cluster), then report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.rundir import layout
from harness.settings import Settings
from kafka_chaos.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    SESSION,
    add_fail_on,
    add_user_settings,
    fail_on,
    load_experiment,
    log_to,
    require_java,
    user_settings,
)
from kafka_chaos.commands.preflight import analysis_problem, folder_problem
from kafka_chaos.commands.report import add_junit, add_out, add_results_to, analyse_into

if TYPE_CHECKING:
    from analysis.report.publish import Destination

NAME = "run"
HELP = "run an experiment file end to end, then report"


def shard_arg(text: str) -> tuple[int, int]:
    """--shard's value: (i, n) of "i/n", 1 <= i <= n; ArgumentTypeError otherwise."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: expected i/n, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: need 1 <= i <= n")
    return index, count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The experiment file and what the command line overrides of it."""
    parser.add_argument("experiment", type=Path)
    parser.add_argument(
        "--shard",
        type=shard_arg,
        metavar="I/N",
        help="run only shard I of N of the cells: one CI job of N (not Spark's "
        "--spark-chunk-rows, which is on report)",
    )
    parser.add_argument(
        "--cells",
        action="append",
        metavar="GLOB",
        help="run only the cells whose name matches (repeatable), e.g. 'scenario=last-replica*'",
    )
    parser.add_argument("--image", help="prebuilt broker image, e.g. apache/kafka:4.3.1")
    parser.add_argument("--kafka-version", help="Kafka version of the locally built image")
    parser.add_argument("--runs-dir", type=Path, help="where run directories go (default runs/)")
    parser.add_argument("--repetitions", type=int, help="override the file's repetitions")
    parser.add_argument(
        "--seed",
        type=int,
        help="override the file's seed (repetition r runs with seed + r): a new search",
    )
    parser.add_argument(
        "--duration-s", type=float, help="override the workload's duration_s (e.g. a short soak)"
    )
    parser.add_argument(
        "--plain", "--quiet", dest="quiet", action="store_true", help="plain progress lines (CI)"
    )
    parser.add_argument("--no-report", action="store_true", help="skip the Spark analysis")
    add_out(parser, "<runs-dir>/<experiment>/<UTC time>/report")
    add_junit(parser)
    parser.add_argument("--master", help="Spark master for the analysis")
    add_fail_on(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (exit code, runs, each cell's verdict and counts, the "
        "report's files) on stdout; progress stays on stderr",
    )
    add_user_settings(parser)
    add_results_to(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the cells, then analyse them; exit 2 also when the harness failed a repetition."""
    from harness.experiment.matrix import expand
    from harness.platform.engine import EngineUnavailable, ensure_engine
    from harness.platform.image import ImageError
    from harness.run.repetition import experiment_root, select_cells, select_shard

    experiment = load_experiment(args.experiment, args)
    if experiment is None:
        return EXIT_ERROR
    try:
        chosen = select_cells(expand(experiment), args.cells)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    cells = select_shard(chosen, args.shard)
    if not cells:
        print(f"shard {args.shard[0]}/{args.shard[1]} has no cells", file=sys.stderr)
        return EXIT_OK
    # Before Java, Docker and any cluster: what would fail the analysis an hour from now.
    problem = folder_problem(args.runs_dir or settings.runs_dir, "--runs-dir")
    if problem is None and not args.no_report:
        problem = analysis_problem(args.master, settings, args.out, args.junit)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_ERROR
    if not args.no_report and not require_java():
        return EXIT_ERROR
    from analysis.report.publish import DestinationError, destination, is_uri

    try:  # before any cluster: a store nobody can write fails now, not in an hour
        lake = destination(args.results_to) if args.results_to and not args.no_report else None
        published = destination(args.out) if args.out and is_uri(args.out) else None
    except DestinationError as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    from harness.platform.client_builds import ClientBuildError
    from harness.workload.java_client import JavaBuildError

    try:
        ensure_engine()
        # Every image and client before any cluster: a missing build tool fails here, not
        # mid-experiment.
        images = _images_for(args, settings, cells)
        _prepare_faults(args, settings, cells)
        _build_clients(settings, cells)
    except (EngineUnavailable, ImageError, JavaBuildError, ClientBuildError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_ERROR
    root = experiment_root(args.runs_dir or settings.runs_dir, experiment, args.shard)
    root.mkdir(parents=True, exist_ok=True)
    SESSION.run_root = root
    log_to(root / layout.HARNESS_LOG)
    from_files = [setting.recorded() for setting in user_settings(args, say=False)]
    summaries = _run_with_progress(args, experiment, cells, root, images, from_files, chosen)
    # With --json, stdout holds the one JSON object alone.
    print(f"runs: {root}", file=sys.stderr if args.json else sys.stdout)
    harness_failed = any(summary.error for summary in summaries)
    if args.no_report:
        code = EXIT_ERROR if harness_failed else EXIT_OK
        if args.json:
            print(json.dumps({"exit_code": code, "runs": str(root)}, indent=2))
        return code
    code = report_runs(
        args,
        root,
        f"{experiment.name}: {experiment.description or 'kafka-chaos'}",
        args.master or settings.spark_master,
        published,
        lake,
    )
    return EXIT_ERROR if harness_failed and code == EXIT_OK else code


def report_runs(
    args: argparse.Namespace,
    root: Path,
    title: str,
    master: str,
    published: Destination | None = None,
    lake: Destination | None = None,
) -> int:
    """The analysis of the experiment run in `root`: its report in --out (a folder, or the
    URI `published` stands for), else in root/report; junit.xml copied to --junit too."""
    return analyse_into(
        args.out or root / layout.REPORT_DIR,
        published,
        [str(root)],
        master,
        title,
        args.junit,
        failing=fail_on(args),
        as_json=args.json,
        json_context={"runs": str(root)},
        lake=lake,
    )


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


def _fault_types(cell) -> list:
    """The fault types a cell's schedule or generator may inject (heal steps are none)."""
    from harness.chaos.faults import FAULT_TYPES
    from harness.experiment.generic import drawable_kinds

    names = [step.fault for step in cell.spec.faults.schedule] + drawable_kinds(cell.spec)
    return [FAULT_TYPES[name] for name in names if name in FAULT_TYPES]


def _prepare_faults(args: argparse.Namespace, settings: Settings, cells) -> None:
    """What the cells' faults need built before any cluster (Fault.prepare), and the helper
    containers' image (the JRE base) when a cell needs it: a fault run by a
    helper in a node's network namespace, or network faults on a prebuilt broker image (which
    may lack iptables and tc); the locally built broker image brings it anyway."""
    import docker

    from harness.chaos.faults import HelperSite
    from harness.platform.image import ensure_base

    def sites(cell) -> set[HelperSite]:
        return {fault.helper_site for fault in _fault_types(cell)}

    for fault in {t for cell in cells for t in _fault_types(cell)}:
        fault.prepare(settings)
    if any(
        HelperSite.SIDECAR in sites(cell)
        or (_image_key(args, cell)[0] and HelperSite.BROKER_CONTAINER in sites(cell))
        for cell in cells
    ):
        ensure_base(docker.from_env(), settings, lambda line: print(line, file=sys.stderr))


def _build_clients(settings: Settings, cells) -> None:
    """Build (or find cached) the Java recorder of every Java client version of `cells`, the
    program of every client family and release they name, and the Kafka tools their commands
    name."""
    from harness.platform.client_builds import family_program
    from harness.workload.java_client import java_client, java_member, tools_classpath

    java = [cell.spec.workload for cell in cells if cell.spec.workload.client.kind == "java"]
    tools = {v for cell in cells for v in cell.spec.workload.client.tools_versions()}
    builds = (
        ("Java client", "building", {w.client.version for w in java}, java_client),
        ("Java consumer", "building", {w.client.version for w in java if w.consumers}, java_member),
        ("Kafka tools", "resolving", tools, tools_classpath),
    )
    for what, doing, versions, build in builds:
        for version in sorted(v for v in versions if v):
            print(f"{what} {version}: {doing} or found cached", file=sys.stderr)
            build(version, settings)
    families = {
        (client.family, client.version)
        for client in (cell.spec.workload.client for cell in cells)
        if client.family is not None and client.version
    }
    for family, version in sorted(families, key=lambda pair: (pair[0].name, pair[1])):
        print(f"{family.name} {version}: building or found cached", file=sys.stderr)
        family_program(family.source, version, settings)


def _run_with_progress(args, experiment, cells, root, images, from_files, chosen):
    """Run the cells (this shard's of the `chosen`, which plan.json records) with a live
    progress display, or plain lines when quiet or not a TTY; `from_files`: the settings of
    property files and --set, for provenance.json."""
    from functools import partial

    from harness.run.progress import LiveProgress, PlainProgress
    from harness.run.runner import run_experiment

    def image_for(cell):
        return images[_image_key(args, cell)]

    run = partial(run_experiment, shard=args.shard, selection=chosen)
    if args.quiet or not sys.stderr.isatty():
        return run(experiment, cells, root, image_for, PlainProgress(), from_files)
    with LiveProgress() as progress:
        return run(experiment, cells, root, image_for, progress, from_files)
