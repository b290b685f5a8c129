"""`kafka-chaos list faults|targets|experiments|versions|clients`: what an experiment file may name,
read from the registries validation uses (so the list cannot drift from what it accepts)."""

from __future__ import annotations

import argparse
import json
from typing import Any, NotRequired, TypedDict

from harness.settings import Settings
from kafka_chaos.commands.common import EXIT_OK

NAME = "list"
HELP = (
    "list the faults (with their params), targets, shipped experiments, Kafka releases or "
    "client families (with their roles)"
)
TARGET_PATTERNS = {
    "node:<id>": "the broker (or controller) with that node id",
    "zookeeper:<i>": "one ZooKeeper server (zookeeper mode)",
    "consumer-<i>": "one member of the consumer group (workload.consumers)",
    "@<name>": "the nodes an earlier step bound with `as: <name>`",
}


class Param(TypedDict):
    """A fault's param: its name, its default (None: required) as JSON writes it, its meaning."""

    name: str
    default: object
    meaning: str


class Entry(TypedDict):
    """One listed item: its name and summary, a fault's params, other items' details."""

    name: str
    summary: str
    params: NotRequired[list[Param]]
    details: NotRequired[list[str]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("what", choices=("faults", "targets", "experiments", "versions", "clients"))
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the list asked for, as text or JSON; exit 0."""
    listing = {
        "faults": faults,
        "targets": targets,
        "experiments": lambda: experiments(settings),
        "versions": versions,
        "clients": clients,
    }[args.what]()
    if args.json:
        print(json.dumps({args.what: listing}, indent=2))
        return EXIT_OK
    for entry in listing:
        print(_text(entry))
    return EXIT_OK


def _text(entry: Entry) -> str:
    """One entry as text: its name and summary, then an indented line per param or feature."""
    lines = [f"{entry['name']}: {entry['summary']}"]
    for param in entry.get("params", []):
        default = "" if param["default"] is None else f" (default {param['default']})"
        lines.append(f"    {param['name']}{default}: {param['meaning']}")
    lines.extend(f"    {line}" for line in entry.get("details", []))
    return "\n".join(lines)


def _summary(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def faults() -> list[Entry]:
    """Every fault type with its summary and params (name, default, meaning)."""
    from harness.chaos.faults import FAULT_TYPES

    listed: list[Entry] = []
    for name, fault in FAULT_TYPES.items():
        params: list[Param] = [
            {
                "name": info.alias or field,
                "default": None if info.is_required() else _plain(info.get_default()),
                "meaning": info.description or "",
            }
            for field, info in fault.Params.model_fields.items()
        ]
        listed.append({"name": name, "summary": _summary(fault.__doc__), "params": params})
    return listed


def _plain(value: Any) -> Any:
    """A default as JSON writes it (a list or scalar)."""
    return list(value) if isinstance(value, tuple) else value


def clients() -> list[Entry]:
    """Every kind workload.client names: its roles, library, current release and transaction
    protocol, and how a file names it (the in-process librdkafka recorder first)."""
    from harness.experiment.client_families import FAMILIES

    listed: list[Entry] = [
        {
            "name": "librdkafka",
            "summary": "the harness's recorder on its own confluent-kafka, in the harness "
            "process (the default)",
            "details": [
                "roles: producer, transactions (with reads), member",
                "name it: librdkafka",
            ],
        }
    ]
    for family in FAMILIES.values():
        if family.name == "command":
            summary = "your program, speaking a protocol of docs/clients.md"
            details = [
                "protocol: verifiable (the default): roles: producer (its group members are "
                "librdkafka's); name it: {kind: command, argv: [...]}",
                "protocol: contract: roles: producer, transactions, member; name it: "
                "{kind: command, protocol: contract, argv: [program, ...]}",
            ]
        else:
            how = "built from its registry" if family.language != "java" else "built with Maven"
            summary = f"{family.package} at any release, {how} ({family.language})"
            details = [
                f"roles: {family.role_names}",
                f"current release: {family.current}",
                f"transactions: {family.transaction_protocol}",
                f"name it: {family.name}:<version>"
                + (
                    ""
                    if family.name in ("java", "librdkafka")
                    else f" (or {family.name}: the current release)"
                ),
            ]
        # librdkafka is listed twice: in the harness's process, and at a release as a program.
        name = "librdkafka:<version>" if family.name == "librdkafka" else family.name
        listed.append({"name": name, "summary": summary, "details": details})
    return listed


def targets() -> list[Entry]:
    """Every target a step may name: the roles, then the patterns."""
    from harness.experiment.fields import TARGET_MEANINGS

    roles: list[Entry] = [{"name": role, "summary": text} for role, text in TARGET_MEANINGS.items()]
    return roles + [{"name": name, "summary": text} for name, text in TARGET_PATTERNS.items()]


def experiments(settings: Settings) -> list[Entry]:
    """The shipped experiment files (known-bugs/ included), each with its description."""
    import yaml

    listed: list[Entry] = []
    for path in sorted(settings.experiments_dir.rglob("*.yaml")):
        try:
            document = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            document = {"description": f"(unreadable: {exc})"}
        summary = " ".join(str(document.get("description", "")).split())
        name = path.relative_to(settings.experiments_dir).with_suffix("").as_posix()
        listed.append({"name": name, "summary": summary, "details": [str(path)]})
    return listed


def versions() -> list[Entry]:
    """The releases the harness builds, the default one, and each feature's releases."""
    from harness.platform.versions import FEATURES, OLDEST, Mode
    from harness.settings import DEFAULT_KAFKA_VERSION

    listed: list[Entry] = [
        {
            "name": "releases",
            "summary": f"any Apache Kafka release from {OLDEST} on (built from Maven Central's "
            f"jars); default {DEFAULT_KAFKA_VERSION}",
            "details": [f"modes: {', '.join(mode.value for mode in Mode)}"],
        }
    ]
    for feature, span in FEATURES.items():
        listed.append({"name": feature.value, "summary": span.describe(), "details": [span.source]})
    return listed
