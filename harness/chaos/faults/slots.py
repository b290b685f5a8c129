"""Which mark bit and NFQUEUE number each shaper in force holds on its node.

Two shaped faults on one node each run a shaper (shape.py) with a queue of its own, and each
lets a packet go through its hook's rules again with a bit of the packet mark of its own set,
which its chain returns on (harness/chaos/shaper/main.py): the other shapers and cuts on the
node still act on it. The harness hands those out here, so that no two shapers on a node share
either.
"""

from __future__ import annotations

import threading

from harness.chaos.faults.base import FaultError
from harness.chaos.shaper.main import DUPLICATE_MARK

# The packet-mark bits a shaper may take on its node: those clear in DUPLICATE_MARK, so that no
# set of them reads as a copy's mark.
MARK_BITS = tuple(1 << bit for bit in range(32) if not DUPLICATE_MARK >> bit & 1)
MAX_QUEUE = 65_000  # the queue numbers drawn: 1 to this, below NFQUEUE's 65,535


class Slots:
    """The mark bits and queue numbers that the shapers in force hold, node by node: two
    shapers on one node need two bits, each returning on its own, and two queues (injections
    run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], dict[int, int]] = {}  # node -> bit -> queue

    def take(self, node: tuple[str, str], queue: int) -> tuple[int, int]:
        """(bit, queue) for a shaper on `node` (network, host name): a bit no shaper in force
        there holds, and `queue` or the next number none holds; FaultError when every bit is
        held."""
        with self._lock:
            held = self._held.setdefault(node, {})
            free = [bit for bit in MARK_BITS if bit not in held]
            if not free:
                raise FaultError(f"{node[1]}: {len(MARK_BITS)} shaped faults in force already")
            while queue in held.values():
                queue = queue % MAX_QUEUE + 1
            held[free[0]] = queue
            return free[0], queue

    def give_back(self, node: tuple[str, str], bit: int) -> None:
        with self._lock:
            self._held.get(node, {}).pop(bit, None)


SLOTS = Slots()
