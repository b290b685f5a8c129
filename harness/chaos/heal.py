"""The final heal: every node of the cluster back and every fault's residue cleared, whatever
ran before (a finished schedule, an exception, Ctrl-C or SIGTERM)."""

from __future__ import annotations

from harness.chaos.faults import RESIDUE_CLEANUP, FaultContext
from harness.platform import disk_layer


def heal_all(ctx: FaultContext) -> list[str]:
    """Bring every node back: start, unpause, then every fault type's cleanup; return actions."""
    actions = []
    for node in ctx.cluster.all_nodes:  # ZooKeeper servers and controllers too
        try:
            state = node.state()
            if state == "paused":
                node.unpause()
                actions.append(f"unpause {node.hostname}")
            elif state != "running":
                node.start()
                actions.append(f"start {node.hostname}")
            # One exec per node: each costs ~0.2 s, and the cleanups never fail.
            node.net_exec(["sh", "-c", RESIDUE_CLEANUP])
            if node.disk_layered:  # its disk faults' modes off
                node.exec(disk_layer.HEAL)
        except Exception as exc:  # heal the others even if one node misbehaves
            actions.append(f"{node.hostname}: heal failed: {exc}")
    try:  # helpers a fault's own heal never stopped (the harness was interrupted)
        if removed := ctx.cluster.remove_helpers():
            actions.append(f"removed {removed} helper container(s)")
    except Exception as exc:
        actions.append(f"helpers: removal failed: {exc}")
    return actions
