"""Fault types describe themselves; validation, fault classes, the final heal and the guarantee
table's kinds derive from the registry (no Docker)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any, ClassVar

import pytest
from pydantic import Field

from analysis.judge.guarantees import KINDS, ROLES, guarantee_for
from harness.chaos.faults import (
    FAULT_TYPES,
    RESIDUE_CLEANUP,
    Fault,
    FaultParams,
    NoParams,
)
from harness.chaos.faults.partition import PartitionParams
from harness.chaos.faults.process import Stop, StopParams
from harness.experiment.load import parse_experiment
from harness.experiment.matrix import expand
from harness.experiment.plan import fault_class, schedule_for
from harness.experiment.problems import SpecError
from harness.rundir.config import CellConfig
from harness.rundir.fault_classes import CLASS_KINDS


def test_every_type_declares_itself_under_its_own_name():
    for name, fault in FAULT_TYPES.items():
        assert fault.name == name
        assert issubclass(fault.Params, FaultParams)
        assert fault.class_kinds and set(fault.class_kinds) <= CLASS_KINDS
        assert fault.class_kind(fault.Params()) in fault.class_kinds  # defaults are valid


def test_the_guarantee_table_knows_every_kind_a_fault_type_yields():
    assert KINDS == CLASS_KINDS
    # and every kind of the contract is one some fault type yields: none is left unused
    assert {kind for fault in FAULT_TYPES.values() for kind in fault.class_kinds} == CLASS_KINDS
    assert {"kill", "isolate", "partition-groups", "power-loss", "rolling-restart"} <= KINDS


@pytest.mark.parametrize(("acks", "min_insync"), [("0", 1), ("1", 1), ("all", 1), ("all", 2)])
def test_every_fault_class_has_a_documented_guarantee(acks: str, min_insync: int):
    config = {
        "acks": acks,
        "min_insync_replicas": min_insync,
        "unclean_leader_election": False,
        "enable_idempotence": False,
        "max_in_flight": 5,
    }
    for role, kind in itertools.product(sorted(ROLES), sorted(CLASS_KINDS)):
        cell = CellConfig.model_validate({**config, "fault_class": f"{role}-{kind}"})
        assert guarantee_for(cell).citation


def test_the_registry_and_the_guarantees_load_without_docker_or_a_kafka_client():
    code = (
        "import sys, analysis.judge.guarantees, harness.chaos.faults;"
        "heavy = {'docker', 'confluent_kafka', 'testcontainers', 'pyspark'};"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_final_heal_runs_every_types_cleanup_once_and_never_fails():
    cleanups = [fault.residue_cleanup for fault in FAULT_TYPES.values() if fault.residue_cleanup]
    assert len(cleanups) == 3  # partition and loss share one iptables flush; slow has tc
    for cleanup in set(cleanups):
        assert RESIDUE_CLEANUP.count(cleanup) == 1
    assert "iptables -w -F KCHAOS" in RESIDUE_CLEANUP and "tc qdisc del" in RESIDUE_CLEANUP
    assert RESIDUE_CLEANUP.endswith("; true")


def test_a_fault_gets_its_typed_params_or_its_defaults():
    assert Stop(None, []).params == StopParams(timeout_s=60)  # type: ignore[arg-type]
    assert Stop(None, [], StopParams(timeout_s=5)).params.timeout_s == 5  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="StopParams"):
        Stop(None, [], {"timeout_s": 5})  # type: ignore[arg-type]


def test_params_reach_the_schedule_as_the_types_model():
    data = {
        "name": "t",
        "workload": {"rate": 10, "duration_s": 30},
        "faults": {
            "schedule": [
                {"at_s": 1, "fault": "partition", "target": "leader", "duration_s": 2},
                {"at_s": 5, "fault": "stop", "target": "leader", "duration_s": 2},
            ]
        },
    }
    (cell,) = expand(parse_experiment(data))
    cut, stop = schedule_for(cell, 0)
    assert cut.params == PartitionParams(mode="from-brokers")
    assert stop.params == StopParams(timeout_s=60)


class RebootParams(FaultParams):
    """A made-up fault type's params, to show a new type needs nothing but its module."""

    grace_s: int = Field(10, ge=0, description="seconds before the reboot")


class Reboot(Fault[RebootParams]):
    name = "reboot"
    Params = RebootParams
    class_kinds: ClassVar[tuple[str, ...]] = ("reboot",)

    def inject(self) -> dict[str, Any]:
        return {}

    def heal(self) -> None:
        return None


def test_a_new_fault_type_is_validated_and_classed_from_its_own_declaration(monkeypatch):
    monkeypatch.setitem(FAULT_TYPES, "reboot", Reboot)
    step = {"at_s": 1, "fault": "reboot", "target": "follower", "duration_s": 2}
    data = {"name": "t", "workload": {"rate": 10, "duration_s": 30}}
    (cell,) = expand(parse_experiment({**data, "faults": {"schedule": [step]}}))
    (scheduled,) = schedule_for(cell, 0)
    assert scheduled.params == RebootParams(grace_s=10)
    assert fault_class([scheduled]) == "follower-reboot"
    bad = {**step, "params": {"grace_s": -1}}
    with pytest.raises(SpecError, match=r"params.grace_s \(seconds before the reboot\)"):
        parse_experiment({**data, "faults": {"schedule": [bad]}})


def test_a_type_without_params_names_that_in_its_message():
    with pytest.raises(ValueError, match="unknown param 'signal' for fault kill; it takes no"):
        FAULT_TYPES["kill"].parse_params({"signal": 9})
    assert FAULT_TYPES["pause"].parse_params(None) == NoParams()


def test_every_fault_says_where_its_helper_runs_and_tools_go_with_a_site_that_has_them() -> None:
    from harness.chaos.faults import HelperSite

    for fault in FAULT_TYPES.values():
        assert isinstance(fault.helper_site, HelperSite), fault.name
        if fault.tools:  # the engine's API and the client's processes take no tools
            assert fault.helper_site in (HelperSite.BROKER_CONTAINER, HelperSite.SIDECAR)
        if fault.acts_on_consumers:
            assert fault.helper_site == HelperSite.CLIENT_PROCESS, fault.name


def test_a_stop_the_engine_finished_with_sigkill_is_recorded_as_a_kill() -> None:
    """A controlled shutdown that outlives its timeout (no controller quorum to serve it)
    ends in the engine's SIGKILL: an unclean shutdown, which the judge must read as a kill."""
    stop = Stop(None, [])  # type: ignore[arg-type]
    assert stop.acted_as({"signal": "SIGTERM", "timeout_s": 60}) == {}
    forced = stop.acted_as({"signal": "SIGTERM", "timeout_s": 60, "forced": ["kafka-2"]})
    assert forced == {"class_kind": "kill"}
