"""What the sub-commands share: exit codes, the session's log and run root, Java and the
experiment file's loading with the command line's overrides."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2
FAIL_ON_HELP = (
    "the verdicts that fail the command, comma-separated: violation, unknown, known-bug, "
    "expected-loss, not-provoked (default violation,unknown); exit codes: "
)
KNOWN_BUG_HELP = "add known-bug to --fail-on (a loss bug of that Kafka release fails too)"
JAVA_FIX = (
    "install a Java 17 runtime (apt-get install openjdk-17-jre-headless) or set JAVA_HOME; "
    "or run with --no-report and analyse later with `kafka-chaos report`."
)


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    """--fail-on VERDICTS and its older spelling --fail-on-known-bug."""
    from analysis.judge.verdicts import exit_code_table

    parser.add_argument(
        "--fail-on",
        type=_verdicts,
        metavar="VERDICTS",
        help=FAIL_ON_HELP + "; ".join(exit_code_table()),
    )
    parser.add_argument("--fail-on-known-bug", action="store_true", help=KNOWN_BUG_HELP)


def _verdicts(text: str) -> frozenset[Any]:
    """argparse's reading of --fail-on: the verdicts, or an error naming the unknown one."""
    from analysis.judge.verdicts import parse_fail_on

    try:
        return parse_fail_on(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fail_on(args: argparse.Namespace) -> frozenset[Any]:
    """The verdicts that fail this invocation: --fail-on (or the default), plus KNOWN-BUG with
    --fail-on-known-bug."""
    from analysis.judge.outcomes import Verdict
    from analysis.judge.verdicts import DEFAULT_FAIL_ON

    chosen = args.fail_on if args.fail_on is not None else DEFAULT_FAIL_ON
    return chosen | ({Verdict.KNOWN_BUG} if args.fail_on_known_bug else frozenset())


@dataclass
class Session:
    """What one invocation learned that its error handlers need."""

    log_path: Path | None = None  # where an unexpected traceback goes: the run's harness.log
    run_root: Path | None = None  # the experiment run's root once `run` made it


SESSION = Session()


def log_to(path: Path) -> None:
    """Send the harness's own log (and librdkafka's) to `path` at INFO."""
    SESSION.log_path = path
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("kafka_chaos")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def require_java() -> bool:
    """True when a Java runtime for Spark is found; else print what is missing and the fix."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return True
    if not java_home and shutil.which("java"):
        return True
    where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
    print(f"the Spark analysis needs Java, and {where}. Fix: {JAVA_FIX}", file=sys.stderr)
    return False


def load_experiment(path: Path, args: argparse.Namespace):
    """The validated experiment at `path` with the command line's overrides, or None after
    printing why it is invalid (overrides are validated like the file's own values)."""
    from harness.experiment.problems import SpecError

    try:
        return resolved_experiment(path, args)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return None
    except OSError as exc:
        print(f"{exc.filename}: {exc.strerror}; give the path of a property file", file=sys.stderr)
        return None


def resolved_experiment(path: Path, args: argparse.Namespace) -> Any:
    """The experiment at `path` with the command line's overrides; SpecError naming the
    problems, OSError for a property file that cannot be read."""
    from harness.experiment.load import load_experiment as load
    from harness.experiment.load import override

    experiment = load(path)
    if getattr(args, "repetitions", None) is not None:
        experiment = override(experiment, "repetitions", args.repetitions, "--repetitions")
    if getattr(args, "seed", None) is not None:
        experiment = override(experiment, "seed", args.seed, "--seed")
    if getattr(args, "duration_s", None) is not None:
        experiment = override(experiment, "workload.duration_s", args.duration_s, "--duration-s")
    # These replace each cell's image when it runs; checked here like the file's own.
    for flag, path_in_file in (("kafka_version", "kafka.version"), ("image", "kafka.image")):
        if getattr(args, flag, None) is not None:
            override(experiment, path_in_file, getattr(args, flag), f"--{flag.replace('_', '-')}")
    for setting in user_settings(args):
        experiment = override(experiment, setting.path, setting.value, setting.origin)
    return experiment


def add_user_settings(parser: argparse.ArgumentParser) -> None:
    """--producer-config, --topic-config and --set: the user's own settings on every cell."""
    parser.add_argument(
        "--producer-config",
        type=Path,
        metavar="FILE.properties",
        help="a producer property file as you keep it (Java's or librdkafka's names): acks, "
        "idempotence, in-flight, retries, linger and timeouts set the producer's fields (the "
        "cell is judged by them), any other key goes to producer.config",
    )
    parser.add_argument(
        "--topic-config",
        type=Path,
        metavar="FILE.properties",
        help="a topic property file: min.insync.replicas and unclean.leader.election.enable set "
        "the topic's fields, any other key goes to topic.config",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=_assignment,
        metavar="PATH=VALUE",
        help="set any field of the file, e.g. --set workload.rate=500 or --set "
        "topic.config.flush.messages=1 (YAML value; repeatable; after the files)",
    )


def user_settings(args: argparse.Namespace, say: bool = True) -> list[Any]:
    """The settings of --producer-config, --topic-config and --set, in that order (a matrix
    axis that sets the same field still varies it per cell); the harness's own keys of a
    property file (bootstrap.servers, serializers) are left out, and said so unless not `say`;
    SpecError for a --set value that is not YAML."""
    from harness.experiment import properties

    settings = []
    for flag, mapper in (
        ("producer_config", properties.producer_settings),
        ("topic_config", properties.topic_settings),
    ):
        path = getattr(args, flag, None)
        if path is None:
            continue
        pairs = properties.read_properties(path)
        if (skipped := properties.harness_keys(pairs)) and say:
            print(f"{path}: left out, the harness sets them: {', '.join(skipped)}", file=sys.stderr)
        settings += mapper(pairs, str(path))
    for path, text in getattr(args, "set", None) or []:
        settings.append(properties.Setting(path, _yaml_value(path, text), "--set"))
    return settings


def _yaml_value(path: str, text: str) -> Any:
    """The value of `--set path=text` read as YAML; SpecError naming it when it is not YAML."""
    import yaml

    from harness.experiment.problems import SpecError

    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError(
            f"--set {path}={text}: the value is not YAML ({problem}); quote it as text, "
            f"e.g. --set '{path}=\"{text}\"'",
            source="--set",
        ) from None


def _assignment(text: str) -> tuple[str, str]:
    """argparse's reading of --set PATH=VALUE: (path, the value's YAML text)."""
    path, equals, value = text.partition("=")
    if not equals or not path.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: write PATH=VALUE, e.g. workload.rate=500")
    return path.strip(), value


class _Deprecated(argparse.Action):
    """An old spelling of an option: stores as the new one does and says the new name once."""

    def __init__(self, option_strings, dest, new_name: str, **kwargs):
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{option_string} is deprecated: use {self.new_name} (same meaning)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_spark_chunk_rows(parser: argparse.ArgumentParser) -> None:
    """--spark-chunk-rows: above how many acked rows Spark checks a run as DataFrame
    operations rather than whole in one task (not --shard, which splits the cells across CI
    jobs). --shard-rows, its old name, still works and says the new one."""
    from analysis.checks.messages.facts import CHUNK_ROWS

    parser.add_argument(
        "--spark-chunk-rows",
        type=_positive,
        default=CHUNK_ROWS,
        metavar="N",
        help=f"Spark checks a run of more than N acked rows as DataFrame operations, with "
        f"bounded memory per task; smaller runs whole, which is faster (default {CHUNK_ROWS:,})",
    )
    parser.add_argument(
        "--shard-rows",
        dest="spark_chunk_rows",
        type=_positive,
        action=_Deprecated,
        new_name="--spark-chunk-rows",
        metavar="N",
        help=argparse.SUPPRESS,
    )


def _positive(text: str) -> int:
    """A whole number above 0, else argparse's error naming the value and the fix."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows above 0")
    return value
