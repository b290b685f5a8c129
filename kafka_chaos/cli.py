"""kafka-chaos: the command line.

Exit codes, by the cells' verdicts (run and report; --fail-on names the failing verdicts):
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from harness.run.interrupts import INTERRUPTS
from harness.settings import DEFAULT_KAFKA_VERSION, Settings, load_settings
from kafka_chaos import __version__
from kafka_chaos.commands import (
    clean,
    cluster_check,
    completion,
    engine,
    image,
    init,
    listing,
    reconcile,
    report,
    run,
    shrink,
    spark_s3a,
    validate,
)
from kafka_chaos.commands.common import EXIT_ERROR, JAVA_FIX, SESSION

log = logging.getLogger("kafka_chaos")
# A reader that left early (`| head`): the status of a process SIGPIPE ended (128 + 13), as
# cat, grep and git give; Python ignores the signal, so the harness returns it itself.
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE
# Every sub-command, in the order `--help` lists them (kafka_chaos.commands says what one is).
COMMAND_MODULES = (
    *(init, run, validate, listing, report, reconcile, cluster_check, image, engine, clean),
    shrink,
    spark_s3a,
    completion,
)
COMMANDS = {module.NAME: module for module in COMMAND_MODULES}


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
    from analysis.judge.verdicts import exit_code_table

    table = "\n".join(f"  {line}" for line in exit_code_table())
    parser = argparse.ArgumentParser(
        prog="kafka-chaos",
        description=f"{__doc__}{table}\nbad input, no Docker or Java: 2, naming the fix\n"
        f"stdout closed by its reader (| head): {EXIT_STDOUT_CLOSED}",
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument("--version", action=_PrintVersion, help="print versions and exit")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an unexpected error"
    )
    parser.set_defaults(parser=parser)  # the whole command line, for `completion`
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        command = sub.add_parser(module.NAME, help=module.HELP)
        # --debug after the command too; SUPPRESS keeps a --debug given before it.
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="print the traceback of an unexpected error")  # fmt: skip
        module.add_arguments(command)
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
        code = COMMANDS[args.command].run(args, settings)
        sys.stdout.flush()  # here, so a reader gone early is met below, not at exit
        return code
    except KeyboardInterrupt:
        return _interrupted(settings)
    except BrokenPipeError as exc:
        if not _stdout_closed():
            return _crashed(exc, debug=args.debug)  # a socket's peer, not our reader
        # The reader of our output went away (`| head`): nothing left to tell it. Python
        # ignores SIGPIPE, so end as its default action would have, without a word.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_STDOUT_CLOSED
    except Exception as exc:
        return _crashed(exc, debug=args.debug)
    finally:
        INTERRUPTS.restore(previous)


def _stdout_closed() -> bool:
    """True when nobody reads stdout any more (a pipe whose reader has exited)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll(), or no stdout file at all
        return False


def _interrupted(settings: Settings) -> int:
    """After SIGINT/SIGTERM: reap this process's containers and networks, say what is kept."""
    INTERRUPTS.stop.set()  # from here on a signal only says that the cleanup still runs
    removed = _remove_own_containers(settings)
    _stop_own_children()
    what = INTERRUPTS.signal.name if INTERRUPTS.signal else "interrupt"
    print(
        f"{what}: faults healed, containers and networks removed"
        + (f" ({removed} more reaped)" if removed else ""),
        file=sys.stderr,
    )
    if SESSION.run_root is not None:
        print(
            f"runs so far: {SESSION.run_root} (the interrupted repetition is judged UNKNOWN). "
            f"Report them with: kafka-chaos report {SESSION.run_root}",
            file=sys.stderr,
        )
    return INTERRUPTS.exit_code


def _stop_own_children() -> None:
    """SIGTERM every process this one started that is still running (Linux /proc; nothing
    elsewhere). Spark's JVM leaves by itself when its stdin closes, except when the interrupt
    lands while it starts: its gateway then waits for a driver that never comes, for good."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The fields after the command's closing parenthesis: state, then the parent pid.
            parent = stat.read_text().rpartition(")")[2].split()[1]
            if parent == me:
                os.kill(int(stat.parent.name), signal.SIGTERM)
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to signal


def _remove_own_containers(settings: Settings) -> int:
    """Remove what this process created (twice: a create the interrupt abandoned lands late)."""
    from harness.platform.leftovers import remove_leftovers

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
    if SESSION.log_path is None:
        handle, name = tempfile.mkstemp(prefix="kafka-chaos-error-", suffix=".log")
        os.close(handle)
        SESSION.log_path = Path(name)
    with SESSION.log_path.open("a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} unexpected error\n")
        traceback.print_exception(exc, file=out)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    first_line = (str(exc).strip().splitlines() or [""])[0][:300]
    print(f"error: {type(exc).__name__}: {first_line}", file=sys.stderr)
    fix = _known_fix(exc)
    if fix:
        print(f"fix: {fix}", file=sys.stderr)
    print(f"details: {SESSION.log_path} (or rerun with --debug)", file=sys.stderr)
    return EXIT_ERROR


def _known_fix(exc: Exception) -> str | None:
    """The fix for an exception whose cause is known, else None."""
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if "Java gateway" in text or "JAVA_HOME" in text:
        return JAVA_FIX
    if text.startswith("docker.errors") or "Docker" in type(exc).__name__:
        return "start a Docker engine (`make engine` or `kafka-chaos engine`) and retry."
    if isinstance(exc, OSError) and exc.errno == 28:
        return "free disk space (runs/ and Docker images grow) and retry."
    return None


if __name__ == "__main__":
    sys.exit(main())
