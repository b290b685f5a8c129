"""Each anomaly class on the reconciled scenarios: what counts as lost, unseen, duplicated,
moved, divergent, expired, reordered or phantom, and the one loss figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.checks.messages import RunInput, check_run
from analysis.model.results import Example
from tests.unit.reconcile_runs import (
    counts,
    example_ids,
    read,
    sent,
    write_run,
)


def test_clean_run_counts_nothing(results: dict) -> None:
    result = results[("clean", 0)]
    assert result.status == "complete" and result.error is None
    assert result.counts == counts(6, 6, 6)
    assert all(examples == () for examples in result.examples.values())


def test_lost_needs_a_later_offset_read(results: dict) -> None:
    result = results[("lost", 0)]
    assert result.counts == counts(4, 4, 3, lost=1)
    assert result.examples["lost"] == (Example(3, partition=0, offset=2),)
    assert result.examples["lost"][0].as_json("lost") == {
        "msg_id": 3,
        "partition": 0,
        "offset": 2,
        "readback_msg_id_at_offset": None,
    }


def test_unseen_is_beyond_the_last_offset_read_or_unlocated(results: dict) -> None:
    result = results[("unseen", 0)]
    assert result.counts == counts(5, 5, 3, unseen=2)
    assert result.examples["unseen"] == (Example(4, partition=0, offset=3), Example(5))


def test_a_queue_written_again_is_duplicated_not_reordered(results: dict) -> None:
    """Order is judged by each message's first read: the copies of a re-sent queue follow later
    sends by construction and count as duplicates only."""
    result = results[("requeued", 0)]
    assert result.counts == counts(4, 4, 7, duplicated=3)


def test_duplicated_counts_ids_read_twice(results: dict) -> None:
    result = results[("duplicated", 0)]
    assert result.counts == counts(3, 3, 4, duplicated=1)
    assert result.examples["duplicated"] == (Example(2, partition=0, offset=1, reads=2),)
    assert result.examples["duplicated"][0].as_json("duplicated") == {
        "msg_id": 2,
        "partition": 0,
        "offset": 1,
        "reads": 2,
    }


def test_offset_divergent_names_the_record_now_at_the_offset(results: dict) -> None:
    result = results[("offset_divergent", 0)]
    # msg 3 acknowledged at msg 2's offset: the rewrite shows as a send backwards too.
    assert result.counts == counts(4, 4, 3, lost=1, offset_divergent=1, nonmonotonic_send=1)
    expected = Example(2, partition=0, offset=1, readback_msg_id_at_offset=3)
    assert result.examples["offset_divergent"] == (expected,)
    assert result.examples["lost"] == (expected,)


def test_moved_is_read_elsewhere_than_acked(results: dict) -> None:
    result = results[("moved", 0)]
    assert result.counts == counts(3, 3, 3, moved=1)
    assert result.examples["moved"] == (Example(2, partition=0, offset=1),)


def test_failed_present(results: dict) -> None:
    result = results[("failed_present", 0)]
    assert result.counts == counts(2, 1, 2, failed=1, failed_present=1)
    assert example_ids(result, "failed_present") == [2]
    assert result.examples["failed_present"][0].offset == 1


def test_indeterminate_present_and_never_lost(results: dict) -> None:
    result = results[("indeterminate_present", 0)]
    assert result.counts == counts(3, 1, 2, indeterminate=2, indeterminate_present=1)
    assert example_ids(result, "indeterminate_present") == [2]


def test_reordered_per_key_in_read_order(results: dict) -> None:
    result = results[("reordered", 0)]
    # msg 3 acknowledged below msg 2: one send backwards as well as one reordered record.
    assert result.counts == counts(6, 6, 6, reordered=1, nonmonotonic_send=1)
    assert result.examples["reordered"] == (
        Example(2, partition=0, offset=2, key="k", key_seq=1, max_key_seq_before=2),
    )


def test_phantom_counts_records_of_unknown_or_unparsed_ids(results: dict) -> None:
    result = results[("phantom", 0)]
    # 99 read twice is a phantom, never a duplicate: only acknowledged ids count as duplicated
    assert result.counts == counts(2, 2, 5, phantom=3)
    assert example_ids(result, "phantom") == [99, None]
    assert result.examples["phantom"][1] == Example(None, partition=0, offset=3, reads=1)


def test_one_loss_figure_counts_each_missing_message_once(results: dict) -> None:
    result = results[("ap_cut", 0)]
    # Worked by hand: acked 1..8; read 1, 2, 7, 8 at 0..3. Missing: 3 (p0@2, now 7) and
    # 4 (p0@3, now 8) are lost; 5 and 6 (p0@4, p0@5) lie beyond the last offset read: unseen.
    # 7, acked at 2 after 6 at 5, is a send backwards; 8 at 3 after it is not.
    counted = counts(8, 8, 4, lost=2, unseen=2, offset_divergent=2, nonmonotonic_send=1)
    assert result.counts == counted
    assert result.loss == 4 == result.counts["lost"] + result.counts["unseen"]
    assert result.loss_by_partition == {"0": 4}
    assert example_ids(result, "offset_divergent") == [3, 4]


def test_rewritten_last_offset_read_is_lost_not_unseen(results: dict) -> None:
    result = results[("last_offset_rewritten", 0)]
    assert result.counts == counts(3, 3, 2, lost=1, offset_divergent=1, nonmonotonic_send=1)
    assert example_ids(result, "lost") == [2]


def test_one_record_read_twice_is_not_a_duplicate(results: dict) -> None:
    assert results[("record_read_twice", 0)].counts == counts(3, 3, 3)


def test_duplicates_of_unacknowledged_sends_are_counted_apart(results: dict) -> None:
    result = results[("unacked_duplicates", 0)]
    assert result.counts == counts(
        3, 1, 6, failed=1, indeterminate=1, duplicated=1, duplicated_unacked=2,
        failed_present=1, indeterminate_present=1,
    )  # fmt: skip
    assert example_ids(result, "duplicated") == [1]
    assert example_ids(result, "duplicated_unacked") == [2, 3]


def test_order_is_judged_per_partition(results: dict) -> None:
    assert results[("order_per_partition", 0)].counts["reordered"] == 0


def test_acked_below_the_log_start_offset_expired_not_lost(results: dict) -> None:
    result = results[("retention", 0)]
    assert result.counts == counts(7, 7, 2, expired=3, lost=1, unseen=1)
    assert example_ids(result, "expired") == [1, 2, 3]
    assert example_ids(result, "lost") == [5]
    assert example_ids(result, "unseen") == [7]  # p1 was never read
    assert result.loss == 2


def test_contract_facts_are_counted(results: dict) -> None:
    contract = results[("broken_contract", 0)].contract
    assert contract == {
        "repeated_msg_ids": 1,
        "unidentified_rows": 2,
        "unknown_statuses": 1,
        "reported_ok": 3,
        "reported_failed": 2,
        "reported_indeterminate": 0,
    }
    assert results[("clean", 0)].contract["repeated_msg_ids"] == 0


def test_acks0_lost_needs_a_later_send_read_in_the_partition(results: dict) -> None:
    result = results[("acks0", 0)]
    assert result.counts == counts(6, 6, 4, lost=1, unseen=1)
    assert example_ids(result, "lost") == [2]
    assert example_ids(result, "unseen") == [6]
    assert result.examples["lost"][0].offset is None


def test_the_send_time_proof_is_acks0s_from_later_sends_without_an_offset(tmp_path: Path) -> None:
    # Message 1 (no offset) is missing; 2, sent after it to the same partition, was read, but
    # it carries its offset: it is judged at that offset and proves nothing of 1's.
    acked = [sent(1, None), sent(2, 0)]
    run_dir = write_run(tmp_path, "acks0", acked, [read(2, 0)], acks="0")
    facts = check_run(RunInput(run_dir, complete=True, unlocated_acks=True))
    assert (facts.counts["lost"], facts.counts["unseen"]) == (0, 1)
    # Under acks=1 every success carries its offset: one without is unseen, whatever was
    # read after it (here failed message 2, in the log all the same).
    acked = [sent(1, None), sent(2, None, status="failed")]
    run_dir = write_run(tmp_path, "acks1", acked, [read(2, 0)], acks="1")
    facts = check_run(RunInput(run_dir, complete=True, unlocated_acks=False))
    assert (facts.counts["lost"], facts.counts["unseen"]) == (0, 1)
    # Without its offset, 2 proves 1 lost.
    run_dir = write_run(tmp_path, "acks0-b", [sent(1, None), sent(2, None)], [read(2, 0)], acks="0")
    facts = check_run(RunInput(run_dir, complete=True, unlocated_acks=True))
    assert (facts.counts["lost"], facts.counts["unseen"]) == (1, 0)


def _checked(run_dir: Path) -> Any:
    return check_run(RunInput(run_dir, complete=True, unlocated_acks=False))


def test_orphan_reports_at_the_probes_hidden_record_leave_the_probe_whole(tmp_path: Path) -> None:
    # Two delivery reports without a msg_id, one at p0@1, the slot of message 2, the
    # partition's last healthy record, which the probe hides.
    orphans = [{**sent(3, 1), "msg_id": None}, {**sent(4, 5), "msg_id": None}]
    run_dir = write_run(tmp_path, "c", [sent(1, 0), sent(2, 1), *orphans], [read(1, 0), read(2, 1)])
    facts = _checked(run_dir)
    assert (facts.counts["lost"], facts.counts["offset_divergent"]) == (1, 1)
    assert facts.sensitivity is not None and facts.sensitivity.passed


def test_an_ack_without_a_partition_is_at_no_slot(tmp_path: Path) -> None:
    # Message 1's ack names offset 0 but no partition; a record without a partition sits at
    # offset 0: nothing proves 1 lost.
    nowhere = {**read(2, 0), "partition": None}
    run_dir = write_run(tmp_path, "c", [sent(1, 0, partition=None)], [nowhere])
    counts = _checked(run_dir).counts
    assert (counts["lost"], counts["unseen"], counts["phantom"]) == (0, 1, 1)


def test_the_message_without_a_msg_id_comes_last_up_to_the_highest_id(tmp_path: Path) -> None:
    top = 2**63 - 2  # the highest msg_id below the marker of none
    run_dir = write_run(tmp_path, "c", [sent(1, 0)], [read(1, 0), read(top, 1), read(None, 2)])
    facts = _checked(run_dir)
    assert facts.counts["phantom"] == 2
    assert [row["msg_id"] for row in facts.examples["phantom"]] == [top, None]


def test_a_run_without_its_read_back_has_its_send_counts_and_contract_only(tmp_path: Path) -> None:
    acked = [sent(1, 0), sent(2, None, status="failed"), {**sent(3, 1), "status": "maybe"}]
    run_dir = write_run(tmp_path, "c", acked, None)
    facts = check_run(RunInput(run_dir, complete=False, unlocated_acks=False))
    assert facts.counts == {"sent": 3, "acked": 1, "failed": 1, "indeterminate": 0}
    assert facts.contract == {
        "unknown_statuses": 1, "reported_ok": 1, "reported_failed": 1,
        "reported_indeterminate": 0,
    }  # fmt: skip
    assert facts.examples == {} and facts.sensitivity is None


def test_loss_and_rewritten_offsets_are_counted_by_acked_partition(tmp_path: Path) -> None:
    # p0: 2 lost below 3, read; p1: 5's offset holds 6, 7 never located (partition unknown).
    acked = [sent(1, 0), sent(2, 1), sent(3, 2), sent(5, 0, partition=1), sent(6, 1, partition=1)]
    acked.append(sent(7, None, partition=None))
    readback = [read(1, 0), read(3, 2), read(6, 0, partition=1), read(6, 1, partition=1)]
    facts = _checked(write_run(tmp_path, "c", acked, readback))
    assert facts.loss_by_partition == {"0": 1, "1": 1, "unknown": 1}
    assert facts.divergence_by_partition == {"1": 1}
