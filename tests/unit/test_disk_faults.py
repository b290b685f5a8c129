"""The disk faults' parameters and their conversation with the disk layer, on fake nodes (the
layer's effect on real files: tests/integration/diskfs/; on a broker:
tests/integration/test_disk_faults.py)."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest
from docker.errors import APIError
from hypothesis import given
from hypothesis import strategies as st

from harness.chaos.faults import FAULT_TYPES, FaultContext, FaultError, HelperSite, disk
from harness.chaos.faults.disk import (
    DiskFull,
    FsyncError,
    LoseUnsynced,
    SlowDisk,
    TornWrite,
    _crash_summary,
)
from harness.platform import disk_layer

DISK_FAULTS = ("lose-unsynced", "torn-write", "fsync-error", "disk-full", "slow-disk")


class FakeNode:
    """A node whose disk layer answers `replies` (command words -> reply) and records calls."""

    def __init__(self, layered: bool = True, state: str = "running", replies=None, code=0):
        self.hostname, self.node_id = "kafka-1", 1
        self.disk_layered = layered
        self._state, self.code = state, code
        self.replies = replies or {}
        self.calls: list = []

    def exec(self, argv: list[str]) -> tuple[int, str]:
        assert argv[:4] == [disk_layer.BINARY, "ctl", "--control", disk_layer.CONTROL]
        command = tuple(argv[4:])
        self.calls.append(command)
        reply = self.replies.get(command, {"ok": True})
        return self.code, json.dumps(reply) + "\n"

    def kill(self) -> None:
        self.calls.append("kill")
        self._state = "exited"

    def state(self) -> str:
        return self._state

    def start(self) -> None:
        self.calls.append("start")
        self._state = "running"


def fault(kind, nodes, **params):
    cls = FAULT_TYPES[kind]
    ctx = FaultContext(cluster=SimpleNamespace(), topic="chaos")
    return cls(ctx, nodes, cls.parse_params(params) if params else None)


def test_every_disk_fault_is_registered_acts_through_the_layer_and_builds_it_first():
    for kind in DISK_FAULTS:
        cls = FAULT_TYPES[kind]
        assert cls.helper_site is HelperSite.FUSE_MOUNT
        assert cls.prepare.__func__ is not FAULT_TYPES["kill"].prepare.__func__
    assert {FAULT_TYPES[k].class_kinds[0] for k in DISK_FAULTS} == {
        "power-loss",
        "disk-error",
        "slow-disk",
    }


def test_a_power_loss_on_the_layer_crashes_it_before_the_kill_and_reports_what_was_dropped():
    reply = {
        "ok": True,
        "torn": False,
        "dropped_bytes": 300,
        "files": [
            {"path": "chaos-0/0.log", "synced_size": 100, "size_before": 400, "size_after": 100},
            {"path": "chaos-1/0.log", "synced_size": 50, "size_before": 50, "size_after": 50},
        ],
    }
    node = FakeNode(replies={("crash",): reply})
    loss = fault("lose-unsynced", [node])
    detail = loss.inject()
    # The crash first: after it the layer refuses every write, so none lands before the kill.
    assert node.calls == [("crash",), "kill"]
    assert detail["method"] == "disk-layer" and detail["page_cache"] == "lost"
    assert detail["lost"]["kafka-1"] == {
        "dropped_bytes": 300,
        "torn": False,
        "files": {"chaos-0/0.log": {"synced": 100, "before": 400, "after": 100}},
    }
    loss.heal()
    assert node.calls[-1] == "start"


def test_a_torn_write_asks_the_layer_for_a_torn_crash():
    node = FakeNode()
    fault("torn-write", [node]).inject()
    assert node.calls[0] == ("crash", "torn")
    assert isinstance(fault("torn-write", [node]), LoseUnsynced)
    assert TornWrite.class_kinds == ("power-loss",)


def test_a_disk_fault_on_a_node_without_the_layer_says_so_and_touches_nothing():
    node = FakeNode(layered=False)
    for kind in DISK_FAULTS:
        with pytest.raises(FaultError, match="has no disk layer"):
            fault(kind, [node]).inject()
    assert node.calls == []


def test_a_refusal_of_the_layer_names_the_node_the_command_and_the_reason():
    node = FakeNode(replies={("set", "disk-full", "on"): {"ok": False, "error": "no space"}})
    with pytest.raises(FaultError, match=r"kafka-1: `set disk-full on`.*no space"):
        fault("disk-full", [node]).inject()
    with pytest.raises(FaultError, match="exit 2"):
        fault("fsync-error", [FakeNode(code=2)]).inject()


@pytest.mark.parametrize(("kind", "cls"), [("fsync-error", FsyncError), ("disk-full", DiskFull)])
def test_an_error_mode_is_on_while_the_fault_lasts_and_its_heal_restarts_a_halted_broker(
    kind, cls, monkeypatch
):
    # One that goes on running after failed operations (Kafka would halt) is left running
    # once the heal's wait for the halt is over.
    monkeypatch.setattr(disk, "HALT_WAIT_S", 0.01)
    running = FakeNode(replies={("status",): {"ok": True, "failed_ops": 7}})
    halted = FakeNode()
    halted.hostname = "kafka-2"
    error = fault(kind, [running, halted])
    assert isinstance(error, cls)
    assert error.inject() == {"mode": kind}
    halted._state = "exited"  # Kafka halts when its only log directory fails
    error.heal()
    assert running.calls == [("set", kind, "on"), ("status",), ("set", kind, "off")]
    assert halted.calls == [("set", kind, "on"), "start"]
    assert error.detail() == {"failed_ops": {"kafka-1": 7}, "halted": ["kafka-2"]}


class HaltsOnExec(FakeNode):
    """Running when asked, halted by the time a command reaches it (Docker refuses an exec
    in a stopped container)."""

    def exec(self, argv: list[str]) -> tuple[int, str]:
        if self.calls:  # the fault's own `set ... on` went through
            self._state = "exited"
            return 126, "OCI runtime exec failed: cannot exec in a stopped container\n"
        return super().exec(argv)


@pytest.mark.parametrize("kind", ["fsync-error", "disk-full"])
def test_a_broker_that_halts_while_its_heal_asks_the_layer_is_restarted_not_failed(kind):
    node = HaltsOnExec()
    error = fault(kind, [node])
    error.inject()
    error.heal()
    assert node.calls == [("set", kind, "on"), "start"]
    assert error.detail() == {"failed_ops": {}, "halted": ["kafka-1"]}


class RefusedByTheEngine(FakeNode):
    """Halted by the time the heal's command comes: the engine refuses the exec (409)."""

    def exec(self, argv: list[str]) -> tuple[int, str]:
        if self.calls:
            self._state = "exited"
            raise APIError("409 Client Error: Conflict (container is not running)")
        return super().exec(argv)


def test_an_exec_the_engine_refuses_on_a_halted_broker_counts_as_halted():
    node = RefusedByTheEngine()
    error = fault("fsync-error", [node])
    error.inject()
    error.heal()
    assert error.detail() == {"failed_ops": {}, "halted": ["kafka-1"]}


class HaltsAfterTheHeal(FakeNode):
    """Its layer failed an operation; Kafka halts it a moment after the mode went off."""

    def state(self) -> str:
        if ("set", "disk-full", "off") in self.calls and self._state == "running":
            self._state = "exited"
            return "running"  # the first look after the heal still finds it up
        return self._state


def test_a_broker_whose_disk_failed_an_operation_is_awaited_halting_and_restarted():
    node = HaltsAfterTheHeal(replies={("status",): {"ok": True, "failed_ops": 1}})
    error = fault("disk-full", [node])
    error.inject()
    error.heal()
    assert node.calls[-1] == "start" and node.state() == "running"
    assert error.detail() == {"failed_ops": {"kafka-1": 1}, "halted": ["kafka-1"]}


def test_a_layer_that_refuses_a_running_node_still_fails_the_heal():
    node = FakeNode()
    error = fault("disk-full", [node])
    error.inject()
    node.code = 2
    with pytest.raises(FaultError, match="exit 2"):
        error.heal()


def test_a_slow_disk_sets_both_delays_and_its_heal_clears_them():
    node = FakeNode()
    slow = fault("slow-disk", [node], write_ms=5, fsync_ms=500)
    assert isinstance(slow, SlowDisk)
    assert slow.inject() == {"write_ms": 5, "fsync_ms": 500}
    slow.heal()
    assert node.calls == [
        ("set", "write-delay", "5"),
        ("set", "fsync-delay", "500"),
        ("set", "write-delay", "0"),
        ("set", "fsync-delay", "0"),
    ]


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"write_ms": -1}, "params.write_ms"),
        ({"fsync_ms": 60_001}, "params.fsync_ms"),
        ({"write_ms": 1.5}, "params.write_ms"),
        ({"write_ms": True}, "params.write_ms"),
        ({"latency_ms": 3}, "unknown param 'latency_ms' for fault slow-disk"),
    ],
)
def test_slow_disk_params_out_of_range_are_refused_naming_the_param(params, problem):
    with pytest.raises(ValueError, match=problem.replace("'", ".")):
        SlowDisk.parse_params(params)


class SilentOnce(FakeNode):
    """A layer whose first answer arrives empty with exit 0 (seen once through docker exec)."""

    def exec(self, argv: list[str]) -> tuple[int, str]:
        code, out = super().exec(argv)
        return (0, "") if len(self.calls) == 1 else (code, out)


def test_an_empty_answer_is_asked_again_except_for_a_crash_which_must_not_run_twice():
    node = SilentOnce()
    assert disk_layer.control(node, "sync") == {"ok": True}
    assert node.calls == [("sync",), ("sync",)]
    node = SilentOnce()
    with pytest.raises(disk_layer.DiskLayerError, match="`crash` on its disk layer failed"):
        disk_layer.control(node, "crash")
    assert node.calls == [("crash",)]


def test_the_other_disk_faults_take_no_params():
    for kind in ("lose-unsynced", "torn-write", "fsync-error", "disk-full"):
        with pytest.raises(ValueError, match="takes no params"):
            FAULT_TYPES[kind].parse_params({"window_s": 1})


files = st.lists(
    st.fixed_dictionaries(
        {
            "path": st.text("ab/.", max_size=6),
            "synced_size": st.integers(0, 10),
            "size_before": st.integers(0, 10),
            "size_after": st.integers(0, 10),
            "restored_bytes": st.integers(0, 3),
        }
    ),
    max_size=6,
)


@given(files)
def test_a_crash_summary_keeps_exactly_the_files_the_crash_changed(entries):
    summary = _crash_summary({"ok": True, "files": entries, "dropped_bytes": 1})
    changed = {
        e["path"] or "(unlinked)"
        for e in entries
        if e["size_before"] != e["size_after"] or e["restored_bytes"]
    }
    assert set(summary["files"]) == changed
    assert summary["dropped_bytes"] == 1


def test_the_layer_is_mounted_by_a_script_that_runs_the_images_own_entrypoint(
    tmp_path, monkeypatch
):
    image = SimpleNamespace(attrs={"Config": {"Entrypoint": ["/entry.sh"], "Cmd": ["serve"]}})
    client = SimpleNamespace(images=SimpleNamespace(get=lambda name: image))
    monkeypatch.setattr(disk_layer, "APPARMOR", tmp_path / "enabled")
    (tmp_path / "enabled").write_text("N\n")
    options = disk_layer.create_options(client, "img", "/var/lib/kafka/data")
    assert options["devices"] == ["/dev/fuse:/dev/fuse:rwm"]
    assert options["command"] == ["/entry.sh", "serve"]
    assert "security_opt" not in options
    (tmp_path / "enabled").write_text("Y\n")
    assert disk_layer.create_options(client, "img", "/d")["security_opt"] == ["apparmor=unconfined"]
    entry, flag, script, _name = options["entrypoint"]
    assert (entry, flag) == ("/bin/sh", "-c")
    assert "--mount /var/lib/kafka/data" in script and script.rstrip().endswith('exec "$@"')
    empty = SimpleNamespace(images=SimpleNamespace(get=lambda name: SimpleNamespace(attrs={})))
    with pytest.raises(disk_layer.DiskLayerError, match="no entrypoint"):
        disk_layer.create_options(empty, "img", "/d")


def test_the_start_script_fails_naming_chaosfs_output_when_it_cannot_mount(tmp_path):
    # A chaosfs stand-in that exits at once: the script must not run the broker.
    fake = tmp_path / "chaosfs"
    fake.write_text("#!/bin/sh\necho 'fuse: device not found' >&2\nexit 1\n")
    fake.chmod(0o755)
    script = disk_layer.start_script(str(tmp_path / "data"))
    script = script.replace(disk_layer.BINARY, str(fake))
    script = script.replace(disk_layer.SERVE_LOG, str(tmp_path / "serve.log"))
    script = script.replace(disk_layer.CONTROL, str(tmp_path / "sock"))
    script = script.replace(disk_layer.DISK_DIR, str(tmp_path / "disk"))
    done = subprocess.run(
        ["sh", "-c", script, "layer", "echo", "BROKER RAN"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "could not mount" in done.stderr and "device not found" in done.stderr
    assert "BROKER RAN" not in done.stdout
