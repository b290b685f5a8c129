"""NFQUEUE over netlink with the standard library only: bind a queue, read its packets, give
verdicts (the kernel's include/uapi/linux/netfilter/nfnetlink_queue.h describes the messages).

Messages are built and parsed by pure functions (tested without a kernel); `Queue` owns the
socket. Only what the shaper needs is here: bind with a copy mode, fail-open when the queue
is full, packet ids, marks and payloads in, ACCEPT/DROP/REPEAT verdicts out (REPEAT with a
mark: the packet goes through its hook's rules again, those of other shapers and cuts).
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5

NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER

NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2

NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_MARK = 3
NFQA_PAYLOAD = 10

NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQA_CFG_F_FAIL_OPEN = 0x1

NFQNL_COPY_META = 1
NFQNL_COPY_PACKET = 2

NF_DROP = 0
NF_ACCEPT = 1
NF_REPEAT = 4

HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
NFGEN = struct.Struct("!BBH")  # nfgenmsg: family, version, resource id (the queue number)
ATTR = struct.Struct("=HH")  # nlattr: length, type


class NetlinkError(OSError):
    """The kernel refused a request (an NLMSG_ERROR with a non-zero code)."""


@dataclass(frozen=True)
class Packet:
    """One queued packet: the id its verdict names, its bytes when the mode copies them, and
    its netfilter mark (0: none)."""

    packet_id: int
    payload: bytes = b""
    mark: int = 0


def _align(n: int) -> int:
    return (n + 3) & ~3


def attribute(kind: int, data: bytes) -> bytes:
    """One netlink attribute, padded to four bytes."""
    raw = ATTR.pack(ATTR.size + len(data), kind) + data
    return raw + b"\0" * (_align(len(raw)) - len(raw))


def message(msg: int, flags: int, queue: int, attributes: bytes, seq: int = 0) -> bytes:
    """One nfnetlink message of the queue subsystem for `queue`."""
    body = NFGEN.pack(socket.AF_UNSPEC, 0, queue) + attributes
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg
    return HEADER.pack(HEADER.size + len(body), kind, flags, seq, 0) + body


def bind_messages(queue: int, copy_payload: bool, max_len: int) -> list[bytes]:
    """The requests that bind `queue`: command, copy mode, queue length, fail-open."""
    flags = NLM_F_REQUEST | NLM_F_ACK
    mode = NFQNL_COPY_PACKET if copy_payload else NFQNL_COPY_META
    fail_open = struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)
    return [
        message(NFQNL_MSG_CONFIG, flags, queue, attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)), seq=1),  # noqa: E501
        message(NFQNL_MSG_CONFIG, flags, queue, attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, mode)), seq=2),  # noqa: E501
        message(NFQNL_MSG_CONFIG, flags, queue, attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", max_len)), seq=3),  # noqa: E501
        message(NFQNL_MSG_CONFIG, flags, queue, attribute(NFQA_CFG_MASK, fail_open) + attribute(NFQA_CFG_FLAGS, fail_open), seq=4),  # noqa: E501
    ]  # fmt: skip


def unbind_message(queue: int) -> bytes:
    """The request that unbinds `queue` (the kernel drops what is still queued)."""
    cmd = attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, 0))
    return message(NFQNL_MSG_CONFIG, NLM_F_REQUEST, queue, cmd)


def verdict_message(queue: int, packet_id: int, verdict: int, mark: int | None = None) -> bytes:
    """The verdict on one packet of `queue`, setting its mark to `mark` when one is given."""
    attrs = attribute(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id))
    if mark is not None:
        attrs += attribute(NFQA_MARK, struct.pack("!I", mark))
    return message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, queue, attrs)


def attributes(data: bytes) -> dict[int, bytes]:
    """The attributes in `data` by type (the last one of a type wins)."""
    found: dict[int, bytes] = {}
    at = 0
    while at + ATTR.size <= len(data):
        length, kind = ATTR.unpack_from(data, at)
        if length < ATTR.size or at + length > len(data):
            break
        found[kind & NLA_TYPE_MASK] = data[at + ATTR.size : at + length]
        at += _align(length)
    return found


def parse(datagram: bytes) -> Iterator[Packet]:
    """The packets in one datagram from the kernel; NetlinkError for a refused request."""
    at = 0
    while at + HEADER.size <= len(datagram):
        length, kind, _flags, _seq, _port = HEADER.unpack_from(datagram, at)
        if length < HEADER.size or at + length > len(datagram):
            return
        body = datagram[at + HEADER.size : at + length]
        at += _align(length)
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", body)
            if code:
                raise NetlinkError(
                    -code, f"NFQUEUE request refused: {errno.errorcode.get(-code, code)}"
                )
            continue
        if kind == NLMSG_DONE or kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            continue
        found = attributes(body[NFGEN.size :])
        header = found.get(NFQA_PACKET_HDR)
        if header is None:
            continue
        (packet_id,) = struct.unpack_from("!I", header)
        raw_mark = found.get(NFQA_MARK, b"")
        mark = struct.unpack_from("!I", raw_mark)[0] if len(raw_mark) >= 4 else 0
        yield Packet(packet_id, found.get(NFQA_PAYLOAD, b""), mark)


class Queue:
    """One bound NFQUEUE in the calling process' network namespace."""

    def __init__(self, number: int, copy_payload: bool = False, max_len: int = 65536):
        self.number = number
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        # A full receive buffer loses the kernel's messages; without this, recv then fails.
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        for request in bind_messages(number, copy_payload, max_len):
            self.sock.send(request)
            list(parse(self.sock.recv(65536)))  # the ack, or NetlinkError

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list[Packet]:
        """Every packet waiting now (none when nothing is; never blocks)."""
        packets: list[Packet] = []
        while True:
            try:
                datagram = self.sock.recv(1 << 17, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return packets
            packets.extend(parse(datagram))

    def verdict(self, packet_id: int, accept: bool) -> None:
        """Let the packet go on (accept) or drop it."""
        self.sock.send(verdict_message(self.number, packet_id, NF_ACCEPT if accept else NF_DROP))

    def repeat(self, packet_id: int, mark: int) -> None:
        """Send the packet through its hook's rules again, marked `mark`."""
        self.sock.send(verdict_message(self.number, packet_id, NF_REPEAT, mark))

    def close(self) -> None:
        """Unbind and close (packets still queued are dropped by the kernel)."""
        try:
            self.sock.send(unbind_message(self.number))
        finally:
            self.sock.close()
