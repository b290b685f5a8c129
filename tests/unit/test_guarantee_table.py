"""The guarantee table, and settings as they travel through the matrix (or that it does not
cover)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from analysis.judge import guarantees
from analysis.judge.guarantees import (
    ALLOWED,
    FORBIDDEN,
    FORBIDDEN_UNLESS_ISR_SHRANK,
    LOSS_TABLE,
)
from analysis.judge.outcomes import Verdict
from tests.unit.verdict_runs import (
    ACKS0,
    AP,
    CP,
    FAULT_CLASSES,
    MIN1,
    guarantee_for,
    judge_repetition,
    result,
    with_fault,
)


def test_table_is_data_of_frozen_rows() -> None:
    assert isinstance(LOSS_TABLE, tuple)
    for row in LOSS_TABLE:
        assert dataclasses.is_dataclass(row)
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.loss = ALLOWED  # type: ignore[misc]
        assert row.citation


@pytest.mark.parametrize("fault_class", FAULT_CLASSES)
def test_acks0_allows_loss_everywhere(fault_class: str) -> None:
    assert guarantee_for(with_fault(ACKS0, fault_class)).loss == ALLOWED


@pytest.mark.parametrize("fault_class", [f for f in FAULT_CLASSES if f != "none"])
def test_cp_forbids_loss_under_every_simulated_fault(fault_class: str) -> None:
    g = guarantee_for(with_fault(CP, fault_class))
    assert g.loss == FORBIDDEN
    assert "min.insync=2" in g.citation


@pytest.mark.parametrize(
    ("fault_class", "loss", "quote"),
    [
        ("leader-kill", ALLOWED, "leader kill"),
        ("leader-stop", ALLOWED, "loss allowed"),
        ("leader-pause", ALLOWED, "loss allowed"),
        ("leader-partition", ALLOWED, "zombie leader keeps acking"),
        ("leader-isolate", ALLOWED, "zombie leader keeps acking"),
        ("leader-loss", ALLOWED, "loss allowed"),
        ("leader-slow", ALLOWED, "loss allowed"),
        ("all-kill", ALLOWED, "all brokers killed at once"),
        ("mixed", ALLOWED, "may hit the current leader"),
        ("random-kill", ALLOWED, "may hit the current leader"),
        ("controller-kill", ALLOWED, "may hit the current leader"),
        ("follower-kill", FORBIDDEN, "none expected"),
        ("follower-partition", FORBIDDEN, "treated as forbidden"),
        ("none", FORBIDDEN, "no fault injected"),
    ],
)
def test_ap_acks1_rows(fault_class: str, loss: str, quote: str) -> None:
    g = guarantee_for(with_fault(AP, fault_class))
    assert (g.loss, g.duplicates, g.order) == (loss, ALLOWED, "not-guaranteed")
    assert quote in g.citation


@pytest.mark.parametrize(
    ("fault_class", "loss", "quote"),
    [
        ("leader-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "unless the ISR had already shrunk"),
        ("leader-stop", FORBIDDEN_UNLESS_ISR_SHRANK, "unless the ISR had already shrunk"),
        ("all-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "none expected"),
        ("mixed", FORBIDDEN_UNLESS_ISR_SHRANK, "may hit the current leader"),
        ("random-kill", FORBIDDEN_UNLESS_ISR_SHRANK, "may hit the current leader"),
        ("leader-partition", FORBIDDEN, "ISR change needs the controller"),
        ("follower-kill", FORBIDDEN, "follower kill"),
        ("leader-pause", FORBIDDEN, "none"),
    ],
)
def test_acks_all_min_insync_1_rows(fault_class: str, loss: str, quote: str) -> None:
    g = guarantee_for(with_fault(MIN1, fault_class))
    assert g.loss == loss
    assert quote in g.citation


@pytest.mark.parametrize(
    ("base", "fault_class", "loss"),
    [
        (CP, "all-power-loss", ALLOWED),
        (MIN1, "all-power-loss", ALLOWED),
        (AP, "all-power-loss", ALLOWED),
        (CP, "leader-power-loss", FORBIDDEN),
        (CP, "follower-power-loss", FORBIDDEN),
        (MIN1, "leader-power-loss", FORBIDDEN_UNLESS_ISR_SHRANK),
        (MIN1, "random-power-loss", FORBIDDEN_UNLESS_ISR_SHRANK),
        (AP, "leader-power-loss", ALLOWED),
        (AP, "follower-power-loss", FORBIDDEN),
    ],
)
def test_power_loss_rows(base: dict[str, Any], fault_class: str, loss: str) -> None:
    g = guarantee_for(with_fault(base, fault_class))
    assert g.loss == loss
    if fault_class == "all-power-loss":
        assert "power loss" in g.citation


FSYNCED = {"fsync_each_message": True}


@pytest.mark.parametrize(
    ("base", "fault_class", "loss"),
    [
        # Every append fsynced before its acknowledgement: acks=all with min.insync >= 2
        # keeps everything through a power loss of all (docs/kafka-reliability.md's table) ...
        ({**CP, **FSYNCED}, "all-power-loss", FORBIDDEN),
        ({**CP, **FSYNCED, "min_insync_replicas": 3}, "all-power-loss", FORBIDDEN),
        ({**CP, "fsync_each_message": "true"}, "all-power-loss", FORBIDDEN),
        # ... but not with one in-sync replica, nor acks=1, nor without the setting.
        ({**MIN1, **FSYNCED}, "all-power-loss", ALLOWED),
        ({**AP, **FSYNCED}, "all-power-loss", ALLOWED),
        ({**CP, "fsync_each_message": False}, "all-power-loss", ALLOWED),
        # Other faults read the rows they read without it.
        ({**CP, **FSYNCED}, "leader-kill", FORBIDDEN),
        ({**AP, **FSYNCED}, "leader-kill", ALLOWED),
        ({**CP, **FSYNCED, "unclean_leader_election": True}, "all-kill", ALLOWED),
    ],
)
def test_power_loss_of_all_under_fsync_each_message(
    base: dict[str, Any], fault_class: str, loss: str
) -> None:
    g = guarantee_for(with_fault(base, fault_class))
    assert g.loss == loss, g.citation
    if loss == FORBIDDEN and fault_class == "all-power-loss":
        assert "fsynced" in g.citation


def test_a_loss_in_a_power_loss_under_fsync_is_a_violation() -> None:
    config = with_fault({**CP, **FSYNCED}, "all-power-loss")
    assert judge_repetition(result(config, lost=3), []).verdict == Verdict.VIOLATION
    assert judge_repetition(result(config), []).verdict == Verdict.PASS
    # Without the setting the same loss is what the documentation allows.
    allowed = with_fault(CP, "all-power-loss")
    assert judge_repetition(result(allowed, lost=3), []).verdict == Verdict.EXPECTED_LOSS


@pytest.mark.parametrize(
    ("base", "fault_class", "loss", "quote"),
    [
        (AP, "all-rolling-restart", ALLOWED, "rolling restart"),
        (CP, "all-rolling-restart", FORBIDDEN, "rolling restart"),
        (MIN1, "all-rolling-restart", FORBIDDEN, "rolling restart"),
        (AP, "follower-rolling-restart", FORBIDDEN, "follower kill"),
    ],
)
def test_rolling_restart_rows(
    base: dict[str, Any], fault_class: str, loss: str, quote: str
) -> None:
    g = guarantee_for(with_fault(base, fault_class))
    assert g.loss == loss and quote in g.citation


@pytest.mark.parametrize(
    ("base", "fault_class", "loss"),
    [
        (CP, "all-kill", ALLOWED),
        (CP, "mixed", ALLOWED),
        (CP, "random-kill", ALLOWED),
        (CP, "node-partition-groups", ALLOWED),
        (CP, "leader-kill", FORBIDDEN),
        (AP, "follower-kill", FORBIDDEN),
        (MIN1, "leader-kill", FORBIDDEN_UNLESS_ISR_SHRANK),
    ],
)
def test_unclean_election_allows_loss_only_for_multi_node_faults(
    base: dict[str, Any], fault_class: str, loss: str
) -> None:
    g = guarantee_for(with_fault(base, fault_class, unclean_leader_election=True))
    assert g.loss == loss
    if loss == ALLOWED:
        assert "unclean.leader.election.enable=true" in g.citation


@pytest.mark.parametrize(
    ("idempotence", "in_flight", "duplicates", "order"),
    [
        (True, 5, FORBIDDEN, "guaranteed"),
        (False, 1, ALLOWED, "guaranteed"),
        (False, 5, ALLOWED, "not-guaranteed"),
    ],
)
def test_duplicates_and_order(
    idempotence: bool, in_flight: int, duplicates: str, order: str
) -> None:
    g = guarantee_for({**CP, "enable_idempotence": idempotence, "max_in_flight": in_flight})
    assert (g.duplicates, g.order) == (duplicates, order)


def test_acks_spellings_and_unknown_settings() -> None:
    assert guarantee_for({**CP, "acks": "-1"}) == guarantee_for(CP)
    with pytest.raises(ValueError, match="unknown fault_class"):
        guarantee_for(with_fault(CP, "leader-meteor"))
    with pytest.raises(ValueError, match="unknown acks"):
        guarantee_for({**CP, "acks": "2"})


@pytest.mark.parametrize(
    ("name", "role", "kind"),
    [
        ("none", "none", ""),
        ("mixed", "mixed", ""),
        ("leader-kill", "leader", "kill"),
        ("all-power-loss", "all", "power-loss"),
        ("node-partition-groups", "node", "partition-groups"),
    ],
)
def test_fault_class_names_split_into_role_and_kind(name: str, role: str, kind: str) -> None:
    assert guarantees.FaultClass.parse(name) == guarantees.FaultClass(name, role, kind)


def test_an_unknown_fault_class_says_how_to_fix_it() -> None:
    fix = r"fix the experiment's fault class or add a row to analysis/judge/guarantees\.py$"
    with pytest.raises(ValueError, match=fix):
        guarantees.FaultClass.parse("leader-meteor")


@pytest.mark.parametrize("spelling", [True, 1, "true", " True ", "TRUE", "1", "yes", "on", "On"])
def test_true_spellings_of_a_bool_setting(spelling: object) -> None:
    g = guarantee_for({**AP, "enable_idempotence": spelling})
    assert (g.duplicates, g.order) == (FORBIDDEN, "guaranteed")
    unclean = guarantee_for(with_fault(CP, "all-kill", unclean_leader_election=spelling))
    assert unclean.loss == ALLOWED


@pytest.mark.parametrize("spelling", [False, 0, "false", "False", "0", "no", "off", ""])
def test_false_spellings_of_a_bool_setting(spelling: object) -> None:
    g = guarantee_for({**AP, "enable_idempotence": spelling})
    assert (g.duplicates, g.order) == (ALLOWED, "not-guaranteed")
    unclean = guarantee_for(with_fault(CP, "all-kill", unclean_leader_election=spelling))
    assert unclean.loss == FORBIDDEN


@pytest.mark.parametrize(
    ("idempotence", "citation"),
    [
        (True, guarantees.DUPLICATES_FORBIDDEN_CITATION),
        (False, guarantees.DUPLICATES_ALLOWED_CITATION),
    ],
)
def test_duplicates_rule_cites_the_idempotence_setting(idempotence: bool, citation: str) -> None:
    g = guarantee_for({**CP, "enable_idempotence": idempotence})
    assert g.duplicates_citation == citation
    assert g.order_citation == guarantees.ORDER_CITATION


@pytest.mark.parametrize("min_insync", [-1, guarantees.MAX_MIN_INSYNC + 1])
def test_a_setting_no_row_covers_raises_naming_it(min_insync: int) -> None:
    with pytest.raises(LookupError) as raised:
        guarantee_for({**CP, "min_insync_replicas": min_insync})
    assert str(raised.value) == (
        f"no documented guarantee for acks=all, min.insync={min_insync}, fault_class=leader-kill: "
        "add a row to analysis/judge/guarantees.py LOSS_TABLE"
    )


def test_an_uncovered_setting_makes_the_repetition_unknown() -> None:
    v = judge_repetition(result({**CP, "min_insync_replicas": 5000}), [])
    assert v.verdict == Verdict.UNKNOWN
    assert v.reasons[0].startswith("checker error: LookupError: no documented guarantee")


def test_a_cell_fsyncing_each_message_says_so_beside_its_settings() -> None:
    from analysis.report.views import config_summary
    from harness.rundir.config import CellConfig

    fsynced = CellConfig.read({**CP, **FSYNCED, "fault_class": "all-power-loss"})
    assert config_summary(fsynced).endswith(" · fsync=each message")
    assert "fsync" not in config_summary(CellConfig.read(CP))  # Kafka's default goes unsaid
