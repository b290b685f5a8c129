// kafka-chaos's Java recorder in transactions (KafkaChaosProducer --transaction-size N): each
// transaction sends N messages round-robin over --partitions partitions, offers an offset for
// the group --offsets-group when given (sendOffsetsToTransaction), and ends as the harness's
// plan says: the plan is the harness's, one intent a line on stdin (`commit` or `abort`), read
// before each transaction. Every send is reported as the plain recorder reports it; every
// transaction that sent something ends in one transaction_end line (docs/clients.md).
// --age-transactions N only commits N offset-only transactions and exits (aged line): the
// harness runs it before the workload to start the transactional.id at a high epoch.
//
// Outcomes follow KafkaProducer's documented contract. A commit or abort that returned is
// definite. ProducerFencedException, OutOfOrderSequenceException, AuthorizationException and
// UnsupportedVersionException are fatal: the producer is closed and replaced (the same
// transactional.id fences the old one), the outcome unknown. A TimeoutException (or
// InterruptException) is answered as --on-timeout says: `retry` (the default) calls the same
// method again, as the contract allows; `abort` aborts and goes on (an abort that times out
// too, or that the client refuses after a pending commit, leaves a new producer); `reinit`
// replaces the producer at once. Each answer other than a retry is named in the
// transaction's error ("on timeout: abort"). A commit that timed out may already have
// reached the coordinator, so an abort after it leaves the outcome unknown.
// Any other KafkaException is answered with abortTransaction; if that fails too, unknown.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;

final class TransactionalSends {
    private static final int END_ATTEMPTS = 6; // commit or abort calls for one transaction
    private static final int INIT_ATTEMPTS = 3; // initTransactions calls after timeouts
    private static final int REPLACE_ATTEMPTS = 5; // fatal errors survived by a fresh producer
    private static final long REFUSED_BACKOFF_MS = 20; // after a transaction a refusal aborted
    private static final long CLOSE_FATAL_S = 5; // closing a producer after a fatal error
    private static final String AGE_GROUP = "kchaos-age"; // the offsets --age-transactions commits

    private final KafkaChaosProducer recorder;
    private final Properties props;
    private final long closeS;
    private final String topic;
    private final int size;
    private final int partitions;
    private final long idBase;
    private final String onTimeout; // retry, abort or reinit
    private final BufferedReader intents =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    private Producer<byte[], byte[]> producer;
    private Method sendOffsets; // Producer.sendOffsetsToTransaction, null without a group
    private Object group; // its group argument: a ConsumerGroupMetadata (2.5+), else the id
    boolean fatal; // the last transaction left the producer unusable
    private boolean reinit; // ... because its timeout was answered with a new producer
    private int replaced;

    TransactionalSends(KafkaChaosProducer recorder, Properties props,
            Producer<byte[], byte[]> producer, long closeS) throws Exception {
        this.recorder = recorder;
        this.props = props;
        this.producer = producer;
        this.closeS = closeS;
        topic = recorder.arg("--topic", null);
        size = Integer.parseInt(recorder.arg("--transaction-size", null));
        partitions = Integer.parseInt(recorder.arg("--partitions", null));
        idBase = Long.parseLong(recorder.arg("--id-base", "0"));
        onTimeout = recorder.arg("--on-timeout", "retry");
        if (!List.of("retry", "abort", "reinit").contains(onTimeout)) {
            throw new IllegalArgumentException("--on-timeout must be retry, abort or reinit");
        }
        String groupId = recorder.arg("--offsets-group", "");
        if (!groupId.isEmpty()) {
            offsetsFor(groupId);
        }
    }

    /** The sendOffsetsToTransaction this client has: with ConsumerGroupMetadata since 2.5
     *  (the String overload is gone in 4.0), with the group id before. 2.4 already has the
     *  ConsumerGroupMetadata class, without that overload or a constructor from the id: the
     *  method decides, not the class. */
    private void offsetsFor(String groupId) throws Exception {
        try {
            Class<?> metadata = Class.forName("org.apache.kafka.clients.consumer.ConsumerGroupMetadata");
            sendOffsets = Producer.class.getMethod("sendOffsetsToTransaction", Map.class, metadata);
            group = metadata.getConstructor(String.class).newInstance(groupId);
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            group = groupId;
            sendOffsets = Producer.class.getMethod("sendOffsetsToTransaction", Map.class, String.class);
        }
    }

    /** Sends transactions until the count, the duration, the end of the plan or a stop;
     *  returns how many sends were handed to the client. Closes the producer. */
    long run() throws Exception {
        long max = Long.parseLong(recorder.arg("--max-messages", "-1"));
        double duration = Double.parseDouble(recorder.arg("--duration-s", "-1"));
        double rate = Double.parseDouble(recorder.arg("--throughput", "-1"));
        long start = System.nanoTime();
        long end = duration > 0 ? start + (long) (duration * 1e9) : Long.MAX_VALUE;
        long i = 0;
        try {
            long age = Long.parseLong(recorder.arg("--age-transactions", "0"));
            if (age > 0) {
                age(age);
                return 0;
            }
            init();
            for (long txn = 0; !recorder.stopped.get() && (max < 0 || i < max)
                    && System.nanoTime() < end; txn++) {
                String intent = intents.readLine();
                if (intent == null) {
                    System.err.println("the harness's plan ended: no more transactions");
                    break;
                }
                long count = max < 0 ? size : Math.min(size, max - i);
                i = transaction(txn, i, count, intent.trim(), start, rate);
                if (fatal && (recorder.stopped.get() || !replace())) {
                    break;
                }
            }
        } finally {
            if (producer != null) {
                KafkaChaosProducer.close(producer, closeS);
            }
        }
        return i;
    }

    /** Commits `n` transactions that hold only an offset of AGE_GROUP (no record of the
     *  topic), then reports `{"name":"aged","transactions":k,"seconds":s}`: under transaction
     *  version 2 each commit raises the producer epoch by one, so the transactional.id starts
     *  the workload near the epoch's limit (KAFKA-19367, KAFKA-20090). A stop ends it early;
     *  any error ends the program (the harness refuses the run). */
    private void age(long n) throws Exception {
        // A transaction's end leaves the next one's first request refused with
        // CONCURRENT_TRANSACTIONS until its markers are written; the client's default backoff
        // (100 ms) would make the ageing last an hour.
        Properties fast = new Properties();
        fast.putAll(props);
        fast.setProperty("retry.backoff.ms", "1");
        fast.setProperty("retry.backoff.max.ms", "20");
        KafkaChaosProducer.close(producer, closeS);
        producer = new KafkaProducer<>(fast);
        init();
        offsetsFor(AGE_GROUP);
        long started = System.nanoTime();
        long k = 0;
        for (; k < n && !recorder.stopped.get(); k++) {
            producer.beginTransaction();
            offer(k + 1);
            producer.commitTransaction();
            if ((k + 1) % 1000 == 0) {
                double rate = (k + 1) / ((System.nanoTime() - started) / 1e9);
                System.err.printf(java.util.Locale.ROOT, "aged %d of %d transactions (%.0f/s)%n",
                        k + 1, n, rate);
            }
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        synchronized (recorder) {
            recorder.emit("{\"name\":\"aged\",\"transactions\":" + k + ",\"seconds\":"
                    + String.format(java.util.Locale.ROOT, "%.3f", seconds) + "}");
            recorder.flush();
        }
    }

    /** initTransactions, retried after a timeout (as the contract allows). */
    private void init() {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.initTransactions();
                return;
            } catch (TimeoutException e) {
                if (attempt >= INIT_ATTEMPTS || recorder.stopped.get()) {
                    throw e;
                }
                System.err.println("initTransactions timed out, retrying: " + e.getMessage());
            }
        }
    }

    /** Runs transaction `txn` from the first-th send; returns the next send's index. */
    private long transaction(long txn, long first, long count, String intent, long start,
            double rate) throws Exception {
        long beginUs = nowUs();
        fatal = false;
        try {
            producer.beginTransaction();
        } catch (Exception e) { // nothing sent in it: no line; the producer is replaced
            System.err.println("beginTransaction failed: " + e);
            fatal = true;
            return first;
        }
        long i = first;
        Exception refused = null;
        while (i < first + count && !recorder.stopped.get()) {
            if (rate > 0) {
                long wait = start + (long) (i * 1e9 / rate) - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(Math.min(wait, 50_000_000L));
                    continue;
                }
            }
            refused = recorder.sendOne(producer, topic, (int) (i % partitions), i);
            i++;
            recorder.progress(i);
            if (refused != null) { // the rest is not sent, and the transaction is aborted
                break;
            }
        }
        List<String> errors = new ArrayList<>();
        if (refused != null) {
            errors.add("send: " + describe(refused));
        }
        String outcome = end(txn, intent, refused != null, errors);
        synchronized (recorder) {
            recorder.emit("{\"name\":\"transaction_end\",\"transaction\":" + txn
                    + ",\"first_msg_id\":" + (idBase + first) + ",\"messages\":" + (i - first)
                    + ",\"intent\":" + JsonText.quote(intent)
                    + ",\"outcome\":" + JsonText.quote(outcome)
                    + ",\"error\":" + (errors.isEmpty() ? "null" : JsonText.quote(String.join("; ", errors)))
                    + ",\"begin_ts_us\":" + beginUs + ",\"end_ts_us\":" + nowUs() + "}");
            recorder.flush();
        }
        if (refused != null && !fatal) { // a refusal that lasts must not spin transactions
            TimeUnit.MILLISECONDS.sleep(REFUSED_BACKOFF_MS);
        }
        return i;
    }

    /**
     * Ends the open transaction as `intent` says (aborts it whatever the intent when
     * `mustAbort`): `committed`, `aborted` or `unknown`, with the errors on the way added to
     * `errors`; sets `fatal` when the producer must be replaced.
     */
    String end(long txn, String intent, boolean mustAbort, List<String> errors) {
        boolean commit = !mustAbort && intent.equals("commit");
        boolean planned = !mustAbort && intent.equals("abort");
        boolean offered = sendOffsets == null; // the offsets are in the transaction
        boolean committing = false; // commitTransaction was called
        boolean doubtful = false; // a commit timed out: it may have reached the coordinator
        boolean answeredAbort = false; // an abort the answer to a timeout asked for
        reinit = false;
        for (int attempt = 0; attempt < END_ATTEMPTS; attempt++) {
            String doing = commit ? "commit" : "abort";
            try {
                if (commit) {
                    if (!offered) {
                        offer(txn + 1);
                        offered = true;
                    }
                    committing = true;
                    producer.commitTransaction();
                    return "committed";
                }
                if (planned) {
                    // Deliver first: aborting drops what the client still holds, and an abort
                    // that never reached the log gives read_committed nothing to hide.
                    producer.flush();
                }
                producer.abortTransaction();
                return doubtful ? "unknown" : "aborted";
            } catch (ProducerFencedException | OutOfOrderSequenceException
                    | AuthorizationException | UnsupportedVersionException e) {
                errors.add(doing + ": " + describe(e));
                break; // fatal: close the producer
            } catch (TimeoutException | InterruptException e) {
                errors.add(doing + ": " + describe(e));
                doubtful = doubtful || (commit && committing); // the commit timed out
                if (recorder.stopped.get()) {
                    break;
                }
                // An abort that timed out under `abort` leaves nothing but a new producer.
                String answer = onTimeout.equals("abort") && !commit ? "reinit" : onTimeout;
                if (!answer.equals("retry")) {
                    errors.add("on timeout: " + answer);
                }
                if (answer.equals("reinit")) {
                    reinit = true;
                    break;
                }
                if (answer.equals("abort")) {
                    commit = false;
                    planned = false; // nothing is flushed first: the client moves on at once
                    answeredAbort = true;
                }
            } catch (KafkaException e) {
                errors.add(doing + ": " + describe(e));
                if (!commit) {
                    refusedAnswer(answeredAbort, errors);
                    break; // the abort failed for good
                }
                commit = false; // the documented answer to any other error: abort
            } catch (Exception e) { // a state the contract does not name (IllegalStateException)
                errors.add(doing + ": " + describe(e));
                if (!commit) {
                    refusedAnswer(answeredAbort, errors);
                }
                break;
            }
        }
        fatal = true;
        return "unknown";
    }

    /** After an abort that failed: when the answer to a timeout had asked for it (the client
     *  refuses an abort while a commit is pending), the same answer goes on with a new
     *  producer, which uses up no attempt. */
    private void refusedAnswer(boolean answeredAbort, List<String> errors) {
        if (answeredAbort) {
            errors.add("on timeout: reinit");
            reinit = true;
        }
    }

    /** sendOffsetsToTransaction of offset `offset` on partition 0 for the group. */
    private void offer(long offset) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                Collections.singletonMap(new TopicPartition(topic, 0), new OffsetAndMetadata(offset));
        try {
            sendOffsets.invoke(producer, offsets, group);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new KafkaException(cause);
        }
    }

    /** Closes the producer after a fatal error and makes a fresh one with the same
     *  transactional.id; false when REPLACE_ATTEMPTS are used up or it cannot start. A
     *  replacement --on-timeout asked for uses up no attempt. */
    private boolean replace() throws Exception {
        Producer<byte[], byte[]> old = producer;
        producer = null;
        try {
            KafkaChaosProducer.close(old, CLOSE_FATAL_S);
        } catch (Exception e) {
            System.err.println("closing the failed producer: " + e);
        }
        if (!reinit) {
            replaced++;
        }
        reinit = false;
        if (replaced > REPLACE_ATTEMPTS) {
            System.err.println("too many fatal errors, stopping the workload");
            return false;
        }
        try {
            producer = new KafkaProducer<>(props);
            init();
            return true;
        } catch (Exception e) {
            System.err.println("the producer could not be replaced: " + e);
            return false;
        }
    }

    /** Whether the last transaction's end asked for a new producer as its answer to a
     *  timeout (for the harness's unit test of end). */
    boolean reinitAsked() {
        return reinit;
    }

    private static String describe(Exception e) {
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    private static long nowUs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }
}
