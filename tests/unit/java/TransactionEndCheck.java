// Drives TransactionalSends.end (the Java recorder's end of a transaction) against a scripted
// MockProducer, for tests/unit/test_java_transaction_end.py. Reads one scenario a line on
// stdin: `<intent> <must-abort 0|1> <offsets 0|1> <results> [on-timeout]`, the results comma-separated
// (`-` for none), each the answer of the next offer, commit or abort call (`ok`, `timeout`,
// `abortable`, `fatal`, `illegal`; `ok` once they run out), the answer to a timeout last
// (retry when left out). Prints one JSON object a line: {"outcome": ..., "fatal": ...,
// "reinit": ..., "errors": [...], "trace": ["commit:timeout", ...]}, flushed at once.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TransactionEndCheck {
    /** A MockProducer whose offer, commit and abort calls answer as scripted. */
    static final class Scripted extends MockProducer<byte[], byte[]> {
        final Deque<String> results;
        final List<String> trace = new ArrayList<>();

        Scripted(Deque<String> results) {
            super(true, new ByteArraySerializer(), new ByteArraySerializer());
            this.results = results;
        }

        private void answer(String call) {
            String result = results.isEmpty() ? "ok" : results.poll();
            trace.add(call + ":" + result);
            switch (result) {
                case "timeout": throw new TimeoutException("scripted");
                case "abortable": throw new KafkaException("scripted");
                case "fatal": throw new ProducerFencedException("scripted");
                case "illegal": throw new IllegalStateException("scripted");
                default: return;
            }
        }

        @Override
        public void sendOffsetsToTransaction(
                Map<TopicPartition, OffsetAndMetadata> offsets, ConsumerGroupMetadata group) {
            answer("offer");
            super.sendOffsetsToTransaction(offsets, group);
        }

        @Override
        public void commitTransaction() {
            answer("commit");
            super.commitTransaction();
        }

        @Override
        public void abortTransaction() {
            answer("abort");
            super.abortTransaction();
        }
    }

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] fields = line.trim().split(" ");
            Deque<String> results = new ArrayDeque<>(
                    fields[3].equals("-") ? List.of() : Arrays.asList(fields[3].split(",")));
            List<String> args = new ArrayList<>(List.of(
                    "--topic", "t", "--transaction-size", "4", "--partitions", "3"));
            if (fields[2].equals("1")) {
                args.addAll(List.of("--offsets-group", "g"));
            }
            if (fields.length > 4) {
                args.addAll(List.of("--on-timeout", fields[4]));
            }
            KafkaChaosProducer recorder = new KafkaChaosProducer(args.toArray(new String[0]));
            Scripted producer = new Scripted(results);
            producer.initTransactions();
            producer.beginTransaction();
            TransactionalSends sends = new TransactionalSends(recorder, new Properties(), producer, 1);
            List<String> errors = new ArrayList<>();
            String outcome = sends.end(0, fields[0], fields[1].equals("1"), errors);
            StringBuilder out = new StringBuilder("{\"outcome\":\"");
            out.append(outcome).append("\",\"fatal\":").append(sends.fatal)
                    .append(",\"reinit\":").append(sends.reinitAsked())
                    .append(",\"errors\":[");
            for (int i = 0; i < errors.size(); i++) {
                out.append(i == 0 ? "" : ",").append(JsonText.quote(errors.get(i)));
            }
            out.append("],\"trace\":[");
            for (int i = 0; i < producer.trace.size(); i++) {
                out.append(i == 0 ? "" : ",").append('"').append(producer.trace.get(i)).append('"');
            }
            System.out.println(out.append("]}"));
            System.out.flush();
        }
    }
}
