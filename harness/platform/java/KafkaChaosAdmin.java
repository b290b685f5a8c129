import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The harness's admin actions that librdkafka's admin API lacks, one per run:
 *
 *   reassign BOOTSTRAP TOPIC PARTITION IDS TIMEOUT_MS
 *
 * moves the partition's replicas to IDS (comma-separated broker ids, the first the preferred
 * leader) through AlterPartitionReassignments (Kafka 2.4+), waits until no reassignment of it
 * is in progress and its replica set is IDS, and prints one JSON line:
 * {"reassigned": {"before": [...], "after": [...], "isr": [...], "ms": N}}, or
 * {"error": "..."} with exit status 1.
 */
public final class KafkaChaosAdmin {
    public static void main(String[] args) {
        try {
            if (args.length != 6 || !args[0].equals("reassign")) {
                throw new IllegalArgumentException(
                    "usage: reassign BOOTSTRAP TOPIC PARTITION IDS TIMEOUT_MS");
            }
            System.out.println(reassign(args[1], args[2], Integer.parseInt(args[3]),
                ids(args[4]), Long.parseLong(args[5])));
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null
                ? e.getCause() : e;
            System.out.println("{\"error\": " + quoted(cause.getClass().getSimpleName() + ": "
                + cause.getMessage()) + "}");
            System.exit(1);
        }
    }

    static String reassign(String bootstrap, String topic, int partition, List<Integer> target,
                           long timeoutMs) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        long started = System.currentTimeMillis();
        try (Admin admin = Admin.create(props)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            List<Integer> before = replicas(describe(admin, topic, partition));
            admin.alterPartitionReassignments(
                Map.of(tp, Optional.of(new NewPartitionReassignment(target)))).all().get();
            while (true) {
                boolean moving = admin.listPartitionReassignments(Collections.singleton(tp))
                    .reassignments().get().containsKey(tp);
                TopicPartitionInfo info = describe(admin, topic, partition);
                if (!moving && replicas(info).equals(target)) {
                    long ms = System.currentTimeMillis() - started;
                    return "{\"reassigned\": {\"before\": " + before + ", \"after\": "
                        + replicas(info) + ", \"isr\": " + ids(info.isr()) + ", \"ms\": " + ms
                        + "}}";
                }
                if (System.currentTimeMillis() - started > timeoutMs) {
                    throw new IllegalStateException("the reassignment to " + target
                        + " did not complete in " + timeoutMs + " ms (replicas now "
                        + replicas(info) + ", in progress: " + moving + ")");
                }
                Thread.sleep(200);
            }
        }
    }

    static TopicPartitionInfo describe(Admin admin, String topic, int partition)
            throws Exception {
        TopicDescription description = admin.describeTopics(Collections.singleton(topic))
            .allTopicNames().get().get(topic);
        return description.partitions().get(partition);
    }

    static List<Integer> replicas(TopicPartitionInfo info) {
        return ids(info.replicas());
    }

    static List<Integer> ids(List<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node node : nodes) {
            ids.add(node.id());
        }
        return ids;
    }

    static List<Integer> ids(String csv) {
        List<Integer> ids = new ArrayList<>();
        for (String part : csv.split(",")) {
            ids.add(Integer.parseInt(part.trim()));
        }
        return ids;
    }

    static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : String.valueOf(text).toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
