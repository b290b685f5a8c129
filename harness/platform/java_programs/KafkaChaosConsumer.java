// kafka-chaos's Java consumer-group member: one start of one member of the workload's group
// (workload.consumers) on the Java client, kafka-clients at the version it was compiled
// against. It does what harness/workload/consumer_group/librdkafka.py does on librdkafka: join the group
// read_committed, process what it polls and commit as the commit mode says, journalling every
// processed record and every commit outcome before the next step of the commit protocol.
//
// The journal is two files of JSON arrays, one a line, each batch written with one write(2)
// before the member goes on (a SIGKILL loses nothing already written; a torn last line is
// what a kill mid-write leaves and is ignored): processed rows [msg_id, partition, offset,
// ts_us] (msg_id -1 for a value that is not the harness's), commit rows [partition, offset,
// outcome, ts_us] (outcome "ok" or the exception's simple class name). The harness turns them
// into the run directory's Arrow streams when the member has ended.
//
// stdout carries one JSON object a line: effective_config ({"config": {..}}, the member's
// settings with the client's defaults resolved, as the recorder prints its producer's),
// startup_complete, partitions_assigned, partitions_revoked and partitions_lost
// ({"partitions": [..], "ts_us": ..}, the partitions it holds after the change, and when the
// rebalance callback ran: the harness journals each change from them), error
// ({"message": ..}) before a failing exit, shutdown_complete. SIGTERM leaves the group (close); the end of stdin (the harness is gone)
// halts at once. Written against the API every kafka-clients release since 0.10.0 has; poll's
// signature, which changed in 2.0 and lost the old form in 4.0, goes through reflection.
//
// Arguments: --bootstrap-server B --topic T --group G --client-id C
// --commit auto|after-process|before-process --processed FILE --commits FILE
// [--processing-ms N] [--session-timeout-ms N] [--heartbeat-ms N]

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class KafkaChaosConsumer {
    private static final long POLL_MS = 200;
    /** The member of this JVM: the auto-commit interceptor journals through it. */
    static volatile KafkaChaosConsumer member;

    private final Map<String, String> args = new HashMap<>();
    private final BufferedWriter out =
            new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    private final AtomicBoolean stopped = new AtomicBoolean();
    private final String commit;
    private final long processingMs;
    private FileOutputStream processed;
    private FileOutputStream commits;
    private KafkaConsumer<byte[], byte[]> consumer;

    public static void main(String[] argv) throws Exception {
        KafkaChaosConsumer self = new KafkaChaosConsumer(argv);
        member = self;
        try {
            self.run();
        } catch (Throwable e) {
            self.line("{\"name\":\"error\",\"message\":"
                    + JsonText.quote(e.getClass().getName() + ": " + e.getMessage()) + "}");
            // halt, not exit: a SIGTERM's shutdown hook may be waiting for this thread
            Runtime.getRuntime().halt(1);
        }
        self.line("{\"name\":\"shutdown_complete\"}");
        // Returning ends the JVM: the client's threads are gone once it is closed, the
        // stdin watcher is a daemon, and a shutdown hook waiting for this thread finishes.
    }

    KafkaChaosConsumer(String[] argv) {
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i], argv[i + 1]);
        }
        commit = arg("--commit", null);
        if (!commit.equals("auto") && !commit.equals("after-process") && !commit.equals("before-process")) {
            throw new IllegalArgumentException("unknown commit mode " + commit);
        }
        processingMs = Long.parseLong(arg("--processing-ms", "0"));
    }

    private void run() throws Exception {
        processed = new FileOutputStream(arg("--processed", null), true);
        commits = new FileOutputStream(arg("--commits", null), true);
        Properties config = config();
        consumer = new KafkaConsumer<>(config);
        line("{\"name\":\"effective_config\",\"config\":"
                + JsonText.resolvedConfig(ConsumerConfig.class, config) + "}");
        final Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopped.set(true);
            consumer.wakeup();
            try {
                main.join(); // the JVM exits once the member has left the group
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }));
        watchStdin();
        final Set<Integer> assigned = new TreeSet<>();
        consumer.subscribe(Collections.singletonList(arg("--topic", null)), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) {
                    assigned.remove(tp.partition());
                }
                line(holding("partitions_revoked", assigned));
            }

            // No @Override: the callback is new in 2.4 (its default calls onPartitionsRevoked);
            // on older clients this is a method nothing calls.
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) {
                    assigned.remove(tp.partition());
                }
                line(holding("partitions_lost", assigned));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                for (TopicPartition tp : partitions) {
                    assigned.add(tp.partition());
                }
                line(holding("partitions_assigned", assigned));
            }
        });
        line("{\"name\":\"startup_complete\"}");
        Method poll = pollMethod();
        try {
            while (!stopped.get()) {
                @SuppressWarnings("unchecked")
                ConsumerRecords<byte[], byte[]> records = (ConsumerRecords<byte[], byte[]>) invoke(poll);
                List<long[]> rows = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    rows.add(new long[] {msgId(record.value()), record.partition(), record.offset()});
                }
                if (!rows.isEmpty()) {
                    handle(rows);
                }
            }
        } catch (WakeupException e) {
            if (!stopped.get()) {
                throw e;
            }
        } finally {
            consumer.close(); // leaves the group; in auto mode, commits what was polled
            processed.close();
            commits.close();
        }
    }

    private Properties config() {
        Properties props = new Properties();
        props.put("bootstrap.servers", arg("--bootstrap-server", null));
        props.put("group.id", arg("--group", null));
        props.put("client.id", arg("--client-id", "kchaos-consumer"));
        props.put("auto.offset.reset", "earliest"); // a new group reads from the start
        // The default, written out: in a transactional run an aborted message a member
        // processes is an aborted read (analysis.checks.transactions).
        props.put("isolation.level", "read_committed");
        props.put("enable.auto.commit", String.valueOf(commit.equals("auto")));
        // Short session, as the librdkafka members: a killed or paused member is replaced
        // within a fault of a few seconds.
        props.put("session.timeout.ms", arg("--session-timeout-ms", "6000"));
        props.put("heartbeat.interval.ms", arg("--heartbeat-ms", "1000"));
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (commit.equals("auto")) { // its commits reach the journal through the interceptor
            props.put("interceptor.classes", AutoCommits.class.getName());
        }
        return props;
    }

    /** A line naming a change of assignment, the partitions held after it, and its time. */
    static String holding(String name, Set<Integer> assigned) {
        return "{\"name\":\"" + name + "\",\"partitions\":" + assigned + ",\"ts_us\":" + nowUs() + "}";
    }

    /** Process one batch under the commit mode. */
    private void handle(List<long[]> rows) throws Exception {
        if (commit.equals("before-process")) {
            Set<Integer> done = commitSync(rows);
            List<long[]> kept = new ArrayList<>();
            for (long[] row : rows) {
                if (done.contains((int) row[1])) {
                    kept.add(row);
                }
            }
            process(kept);
        } else {
            process(rows);
            if (commit.equals("after-process")) {
                commitSync(rows);
            }
        }
    }

    /** Processing is journalling: one message after the other when it takes time. */
    private void process(List<long[]> rows) throws Exception {
        if (processingMs <= 0) {
            writeProcessed(rows);
            return;
        }
        for (long[] row : rows) {
            Thread.sleep(processingMs);
            writeProcessed(Collections.singletonList(row));
        }
    }

    private void writeProcessed(List<long[]> rows) throws Exception {
        StringBuilder text = new StringBuilder();
        long now = nowUs();
        for (long[] row : rows) {
            text.append('[').append(row[0]).append(',').append(row[1]).append(',').append(row[2])
                    .append(',').append(now).append("]\n");
        }
        processed.write(text.toString().getBytes(StandardCharsets.US_ASCII));
    }

    /** Commit each partition's next offset after `rows` synchronously; the partitions whose
     *  commit succeeded. The outcome is journalled either way. */
    private Set<Integer> commitSync(List<long[]> rows) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new TreeMap<>(
                (a, b) -> Integer.compare(a.partition(), b.partition()));
        String topic = arg("--topic", null);
        for (long[] row : rows) {
            TopicPartition tp = new TopicPartition(topic, (int) row[1]);
            OffsetAndMetadata next = new OffsetAndMetadata(row[2] + 1);
            OffsetAndMetadata had = offsets.get(tp);
            if (had == null || had.offset() < next.offset()) {
                offsets.put(tp, next);
            }
        }
        String outcome = "ok";
        try {
            consumer.commitSync(offsets);
        } catch (WakeupException e) {
            throw e;
        } catch (Exception e) {
            outcome = e.getClass().getSimpleName();
        }
        writeCommits(offsets, outcome);
        Set<Integer> done = new TreeSet<>();
        if (outcome.equals("ok")) {
            for (TopicPartition tp : offsets.keySet()) {
                done.add(tp.partition());
            }
        }
        return done;
    }

    void writeCommits(Map<TopicPartition, OffsetAndMetadata> offsets, String outcome) {
        StringBuilder text = new StringBuilder();
        long now = nowUs();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
            text.append('[').append(entry.getKey().partition()).append(',').append(entry.getValue().offset())
                    .append(',').append(JsonText.quote(outcome)).append(',').append(now).append("]\n");
        }
        try {
            synchronized (this) {
                commits.write(text.toString().getBytes(StandardCharsets.US_ASCII));
            }
        } catch (Exception e) {
            throw new IllegalStateException("the commits journal cannot be written: " + e, e);
        }
    }

    /** The message id at the head of a value the harness wrote ("<msg_id>:<key_seq>:..."), -1
     *  for any other value. */
    static long msgId(byte[] value) {
        if (value == null) {
            return -1;
        }
        long id = 0;
        int i = 0;
        for (; i < value.length && value[i] != ':'; i++) {
            if (value[i] < '0' || value[i] > '9' || i >= 18) {
                return -1;
            }
            id = id * 10 + (value[i] - '0');
        }
        return i == 0 || i == value.length ? -1 : id;
    }

    /** poll(Duration) where the client has it (2.0+), else poll(long). */
    private Method pollMethod() throws Exception {
        try {
            return KafkaConsumer.class.getMethod("poll", Duration.class);
        } catch (NoSuchMethodException e) {
            return KafkaConsumer.class.getMethod("poll", long.class);
        }
    }

    private Object invoke(Method poll) throws Exception {
        Object timeout = poll.getParameterTypes()[0] == long.class ? (Object) POLL_MS : Duration.ofMillis(POLL_MS);
        try {
            return poll.invoke(consumer, timeout);
        } catch (java.lang.reflect.InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof Exception ? (Exception) cause : new RuntimeException(cause);
        }
    }

    /** The end of stdin means the harness is gone: halt, as a killed member would. */
    private void watchStdin() {
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // nothing is sent on stdin; only its end matters
                }
            } catch (Exception ignored) {
                // treated as the end
            }
            Runtime.getRuntime().halt(3);
        }, "kafka-chaos-stdin");
        watcher.setDaemon(true);
        watcher.start();
    }

    private String arg(String name, String fallback) {
        String value = args.get(name);
        if (value == null && fallback == null) {
            throw new IllegalArgumentException("missing argument " + name);
        }
        return value == null ? fallback : value;
    }

    synchronized void line(String text) {
        try {
            out.write(text);
            out.write('\n');
            out.flush();
        } catch (Exception ignored) {
            // stdout gone: the harness is gone too
        }
    }

    static long nowUs() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    /** Journals the client's automatic commits (auto mode): onCommit is told of each commit
     *  that succeeded, automatic or on close; a failed automatic commit is only logged by the
     *  client, so the journal holds none. */
    public static final class AutoCommits implements ConsumerInterceptor<byte[], byte[]> {
        @Override
        public ConsumerRecords<byte[], byte[]> onConsume(ConsumerRecords<byte[], byte[]> records) {
            return records;
        }

        @Override
        public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
            KafkaChaosConsumer self = member;
            if (self != null && !offsets.isEmpty()) {
                self.writeCommits(offsets, "ok");
            }
        }

        @Override
        public void close() {
        }

        @Override
        public void configure(Map<String, ?> configs) {
        }
    }
}
