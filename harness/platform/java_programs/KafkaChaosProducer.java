// kafka-chaos's Java recorder: sends the workload with the Java client (kafka-clients at the
// version it was compiled against) and prints one JSON object a line on stdout, in the
// verifiable-client protocol (docs/clients.md): startup_complete, effective_config,
// producer_send_success / producer_send_error for every send's callback, progress (sends so
// far), shutdown_complete. Written against the API every kafka-clients release since 0.10
// has; what changed between releases (close, the idempotence flag) goes through reflection.
// With --transaction-size the sends go in transactions (TransactionalSends.java, compiled
// with this file), each also ending in a transaction_end line.
//
// Arguments: --bootstrap-server B --topic T --producer.config FILE --message-bytes N --keys K
// --id-base I --key-prefix P [--max-messages N] [--duration-s S] [--throughput R]
// [--transaction-size N --partitions P [--offsets-group G]]
// SIGTERM stops sending; the sends in flight then get at most --close-s seconds.

import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.OutputStreamWriter;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaChaosProducer {
    private static final int HEAD_BYTES = 29; // "%015d:%012d:", as harness/workload/values.py
    private static final long PROGRESS_EVERY_NS = 200_000_000L;

    private final BufferedWriter out =
            new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
    final AtomicBoolean stopped = new AtomicBoolean();
    private final Map<String, String> args = new HashMap<>();
    private long lastProgressNs = System.nanoTime();
    private final long keys;
    private final long idBase;
    private final String keyPrefix;
    private final int messageBytes;

    public static void main(String[] argv) throws Exception {
        new KafkaChaosProducer(argv).run();
    }

    KafkaChaosProducer(String[] argv) {
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i], argv[i + 1]);
        }
        keys = Long.parseLong(arg("--keys", "16"));
        idBase = Long.parseLong(arg("--id-base", "0"));
        keyPrefix = arg("--key-prefix", "");
        messageBytes = Integer.parseInt(arg("--message-bytes", "100"));
    }

    private void run() throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(arg("--producer.config", null))) {
            props.load(in);
        }
        props.put("bootstrap.servers", arg("--bootstrap-server", null));
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        final Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopped.set(true);
            try {
                main.join(); // the JVM exits once the sends in flight are reported
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        startFlusher();
        emit("{\"name\":\"startup_complete\"}");
        emit("{\"name\":\"effective_config\",\"config\":" + JsonText.resolvedConfig(ProducerConfig.class, props)
                + ",\"idempotent\":" + idempotent(producer) + "}");
        flush();
        long closeS = Long.parseLong(arg("--close-s", "30"));
        long sent;
        if (args.containsKey("--transaction-size")) {
            sent = transactions(props, producer, closeS);
        } else {
            sent = send(producer);
            close(producer, closeS);
        }
        synchronized (this) {
            emit("{\"name\":\"progress\",\"sent\":" + sent + "}");
            emit("{\"name\":\"shutdown_complete\"}");
            flush();
        }
    }

    /**
     * Sends in transactions (TransactionalSends, compiled beside this class for a client that
     * has them: 0.11+); by reflection, so that this file alone compiles against older clients.
     */
    private long transactions(Properties props, KafkaProducer<byte[], byte[]> producer, long closeS)
            throws Exception {
        Class<?> sends = Class.forName("TransactionalSends");
        java.lang.reflect.Constructor<?> make = sends.getDeclaredConstructor(
                KafkaChaosProducer.class, Properties.class, Producer.class, long.class);
        make.setAccessible(true);
        Method run = sends.getDeclaredMethod("run");
        run.setAccessible(true);
        try {
            return (Long) run.invoke(make.newInstance(this, props, producer, closeS));
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    String arg(String name, String fallback) {
        String value = args.get(name);
        if (value == null && fallback == null) {
            throw new IllegalArgumentException("missing argument " + name);
        }
        return value == null ? fallback : value;
    }

    /** Sends until the count, the duration or a stop; returns how many were handed over. */
    private long send(KafkaProducer<byte[], byte[]> producer) throws Exception {
        String topic = arg("--topic", null);
        long max = Long.parseLong(arg("--max-messages", "-1"));
        double duration = Double.parseDouble(arg("--duration-s", "-1"));
        double rate = Double.parseDouble(arg("--throughput", "-1"));
        long start = System.nanoTime();
        long end = duration > 0 ? start + (long) (duration * 1e9) : Long.MAX_VALUE;
        long i = 0;
        while (!stopped.get() && (max < 0 || i < max)) {
            long now = System.nanoTime();
            if (now >= end) {
                break;
            }
            if (rate > 0) {
                long due = start + (long) (i * 1e9 / rate);
                if (due > now) {
                    TimeUnit.NANOSECONDS.sleep(Math.min(due - now, 50_000_000L));
                    continue;
                }
            }
            sendOne(producer, topic, null, i);
            i++;
            progress(i);
        }
        return i;
    }

    /**
     * Sends the i-th message (to `partition`, or where the client puts it), its outcome reported
     * by its callback; returns the exception of a send the client refused before it entered the
     * client (reported as an error at once: never written), or null.
     */
    Exception sendOne(Producer<byte[], byte[]> producer, String topic, Integer partition, long i) {
        byte[] key = (keyPrefix + "k" + (i % keys)).getBytes(StandardCharsets.UTF_8);
        byte[] value = value(idBase + i, i / keys, messageBytes);
        String head = new String(value, 0, HEAD_BYTES, StandardCharsets.US_ASCII);
        final long sentNs = System.nanoTime();
        try {
            producer.send(new ProducerRecord<>(topic, partition, key, value), reporter(topic, head, sentNs));
            return null;
        } catch (Exception e) { // refused before it entered the client: never written
            report(topic, head, sentNs, null, e);
            return e;
        }
    }

    /** A progress line (sends so far) at most every PROGRESS_EVERY_NS. */
    void progress(long sent) throws Exception {
        long now = System.nanoTime();
        if (now - lastProgressNs >= PROGRESS_EVERY_NS) {
            lastProgressNs = now;
            synchronized (this) {
                emit("{\"name\":\"progress\",\"sent\":" + sent + "}");
                flush();
            }
        }
    }

    private static byte[] value(long id, long keySeq, int size) {
        byte[] value = new byte[Math.max(size, HEAD_BYTES)];
        Arrays.fill(value, (byte) '.');
        byte[] head = String.format("%015d:%012d:", id, keySeq).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(head, 0, value, 0, HEAD_BYTES);
        return value;
    }

    private Callback reporter(String topic, String head, long sentNs) {
        return (metadata, exception) -> report(topic, head, sentNs, metadata, exception);
    }

    private synchronized void report(
            String topic, String head, long sentNs, RecordMetadata metadata, Exception e) {
        long latencyUs = (System.nanoTime() - sentNs) / 1000;
        String common = "\"topic\":" + JsonText.quote(topic) + ",\"value\":" + JsonText.quote(head)
                + ",\"latency_us\":" + latencyUs;
        try {
            if (e == null) {
                emit("{\"name\":\"producer_send_success\"," + common + ",\"partition\":"
                        + metadata.partition() + ",\"offset\":" + metadata.offset() + "}");
            } else {
                emit("{\"name\":\"producer_send_error\"," + common + ",\"exception\":"
                        + JsonText.quote(e.getClass().getName()) + ",\"message\":" + JsonText.quote(String.valueOf(e.getMessage()))
                        + "}");
            }
        } catch (Exception ignored) {
            // stdout gone: the harness sees the run end without shutdown_complete
        }
    }

    /** close(Duration) where the client has it (2.2+), else close(long, TimeUnit). */
    static void close(Producer<byte[], byte[]> producer, long seconds) throws Exception {
        try {
            Class<?> duration = Class.forName("java.time.Duration");
            Method of = duration.getMethod("ofSeconds", long.class);
            producer.getClass().getMethod("close", duration).invoke(producer, of.invoke(null, seconds));
        } catch (NoSuchMethodException e) {
            producer.getClass().getMethod("close", long.class, TimeUnit.class)
                    .invoke(producer, seconds, TimeUnit.SECONDS);
        }
    }

    /** Whether the producer runs idempotent (it has a transaction manager: 0.11+), or null. */
    private static String idempotent(KafkaProducer<byte[], byte[]> producer) {
        try {
            Field manager = KafkaProducer.class.getDeclaredField("transactionManager");
            manager.setAccessible(true);
            return String.valueOf(manager.get(producer) != null);
        } catch (Exception e) {
            return "null";
        }
    }

    /** Hands what the callbacks printed to the harness every 100 ms, sends or not. */
    private void startFlusher() {
        Thread flusher = new Thread(() -> {
            while (true) {
                try {
                    TimeUnit.MILLISECONDS.sleep(100);
                    synchronized (this) {
                        flush();
                    }
                } catch (Exception e) {
                    return;
                }
            }
        }, "kafka-chaos-flusher");
        flusher.setDaemon(true);
        flusher.start();
    }

    void emit(String line) throws Exception {
        out.write(line);
        out.write('\n');
    }

    void flush() throws Exception {
        out.flush();
    }
}
