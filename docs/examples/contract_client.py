"""The client-program contract (docs/clients.md) in every role, on confluent-kafka, as short as
the contract allows: `contract_client.py produce ARGS` (plain sends, or transactions with
--transaction-size) or `contract_client.py consume ARGS` (one start of a group member).

Simplifications the contract allows: an error ending a transaction is answered as
`--on-timeout reinit` would (outcome unknown, a fresh producer); a before-process batch whose
commit failed is skipped whole.
"""

import json
import os
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

role, args = sys.argv[1], dict(zip(sys.argv[2::2], sys.argv[3::2], strict=False))
stopped = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopped.set())
topic, boot = args["--topic"], {"bootstrap.servers": args["--bootstrap-server"]}


def say(name, **fields):
    print(json.dumps({"name": name, **fields}), flush=True)


def now_us():
    return time.time_ns() // 1000


def produce():
    with open(args["--producer.config"]) as file:  # Java's names, which librdkafka takes
        conf = dict(line.split("=", 1) for line in file.read().splitlines() if "=" in line)
    keys, size, base = int(args["--keys"]), int(args["--message-bytes"]), int(args["--id-base"])
    most, rate = int(args["--max-messages"]), float(args["--throughput"])
    duration = float(args["--duration-s"])
    size_txn, group = int(args.get("--transaction-size", 0)), args.get("--offsets-group")

    def fresh():
        producer = Producer({**boot, **conf})
        if size_txn:
            producer.init_transactions()
        return producer

    def report(err, msg, head):
        if err:
            say("producer_send_error", value=head, message=str(err))
        else:
            say("producer_send_success", value=head, partition=msg.partition(),
                offset=msg.offset())  # fmt: skip

    def send(i, partition=-1):
        value = (b"%015d:%012d:" % (base + i, i // keys)).ljust(size, b".")
        if rate > 0:
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
        head = value[:29].decode()
        p.produce(topic, value, f"{args['--key-prefix']}k{i % keys}", partition,
                  on_delivery=lambda err, msg: report(err, msg, head))  # fmt: skip
        p.poll(0)

    def more(n):
        in_time = duration <= 0 or time.monotonic() - start < duration
        return (most < 0 or i + n <= most) and in_time and not stopped.is_set()

    p, i, txn = fresh(), 0, 0
    meta = group and Consumer({**boot, "group.id": group}).consumer_group_metadata()
    say("startup_complete")
    say("effective_config", config=conf, idempotent=conf.get("enable.idempotence") == "true")
    start = time.monotonic()
    while size_txn and more(size_txn) and (intent := sys.stdin.readline().strip()):
        begin, first, error = now_us(), i, None
        outcome = "committed" if intent == "commit" else "aborted"
        try:
            p.begin_transaction()
            while i < first + size_txn:
                send(i, i % int(args["--partitions"]))
                i += 1
            if group:
                p.send_offsets_to_transaction([TopicPartition(topic, 0, txn + 1)], meta)
            p.commit_transaction() if intent == "commit" else p.abort_transaction()
        except KafkaException as exc:
            outcome, error = "unknown", str(exc)
            p.flush(5)
            p = fresh()
        ended = {"transaction": txn, "first_msg_id": base + first, "messages": i - first}
        say("transaction_end", **ended, intent=intent, outcome=outcome, error=error,
            begin_ts_us=begin, end_ts_us=now_us())  # fmt: skip
        txn += 1
    while not size_txn and more(1):
        try:
            send(i)
            i += 1
        except BufferError:  # the library's queue is full: let it drain
            p.poll(0.1)
    p.flush()
    say("shutdown_complete")


def consume():
    mode, pause = args["--commit"], int(args.get("--processing-ms", 0)) / 1000
    journals = {
        name: os.open(args[name], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        for name in ("--processed", "--commits")
    }

    def write(name, rows):  # one write a batch: a SIGKILL leaves whole rows
        os.write(journals[name], "".join(json.dumps(row) + "\n" for row in rows).encode())

    def committed(err, tps):  # commits and their outcomes (in auto mode, as the library says)
        rows = [[tp.partition, tp.offset, (tp.error or err).name() if tp.error or err else "ok",
                 now_us()] for tp in tps if tp.offset >= 0]  # fmt: skip
        write("--commits", rows)

    conf = {**boot, "group.id": args["--group"], "client.id": args["--client-id"],
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "enable.auto.commit": mode == "auto"}  # fmt: skip
    consumer = Consumer({**conf, **({"on_commit": committed} if mode == "auto" else {})})
    held = set()

    def holding(name, change):
        def changed(_, tps):
            change({tp.partition for tp in tps})
            say(name, partitions=sorted(held), ts_us=now_us())

        return changed

    consumer.subscribe([topic], on_assign=holding("partitions_assigned", held.update),
                       on_revoke=holding("partitions_revoked", held.difference_update),
                       on_lost=holding("partitions_lost", held.difference_update))  # fmt: skip
    say("effective_config", config=conf)
    say("startup_complete")

    def orphaned():  # the end of stdin: the harness is gone, halt as a killed member would
        while os.read(0, 4096):
            pass
        os._exit(3)

    threading.Thread(target=orphaned, daemon=True).start()

    def commit(offsets):
        tps = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        try:
            tps = consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            committed(exc.args[0], tps)
            return False
        committed(None, tps)
        return not any(tp.error for tp in tps)

    while not stopped.is_set():
        messages = [m for m in consumer.consume(500, 0.5) if m.error() is None]
        values = [m.value() or b"" for m in messages]
        rows = [[int(v[:15]) if v[15:16] == b":" and v[:15].isdigit() else -1, m.partition(),
                 m.offset()] for v, m in zip(values, messages, strict=True)]  # fmt: skip
        offsets = {}
        for _, partition, offset in rows:
            offsets[partition] = max(offsets.get(partition, 0), offset + 1)
        if not rows or (mode == "before-process" and not commit(offsets)):
            continue
        time.sleep(pause * len(rows))  # the processing
        write("--processed", [[*row, now_us()] for row in rows])
        if mode == "after-process":
            commit(offsets)
    consumer.close()
    say("shutdown_complete")


produce() if role == "produce" else consume()
