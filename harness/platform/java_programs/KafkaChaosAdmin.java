import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.AddRaftVoterOptions;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeMetadataQuorumOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.clients.admin.RemoveRaftVoterOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;

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
 *
 *   quorum BOOTSTRAP
 *   remove-voter BOOTSTRAP ID DIRECTORY_ID TIMEOUT_MS
 *   add-voter BOOTSTRAP ID DIRECTORY_ID HOST PORT TIMEOUT_MS
 *
 * describe the KRaft quorum, or change its voter set (KIP-853, a dynamic quorum, Kafka 3.9+);
 * BOOTSTRAP "controllers=HOST:PORT,..." talks to the controllers themselves
 * (bootstrap.controllers, as kafka-metadata-quorum --bootstrap-controller does), any other
 * BOOTSTRAP to brokers, which forward the voter changes to the active controller:
 * the change is asked again until the leader takes it (it refuses one while another is in
 * flight, or a new voter that has not caught up as an observer) and then waited for until
 * the quorum shows it. Each prints {"quorum": {"leader": N, "epoch": N, "voters": [...],
 * "observers": [...]}, "ms": N}, a replica as {"id": N, "directory": "...", "end": N}; a
 * change adds the quorum before it ("before"), how often it was refused and the last
 * refusal ("refusals", "last_refusal").
 */
public final class KafkaChaosAdmin {
    static final int CALL_MS = 10_000; // each voter-change or describe call, asked again after
    // A describe while a change settles: short, since a client that finds no node to ask
    // stays so (a new one is started, below).
    static final int DESCRIBE_MS = 3_000;
    public static void main(String[] args) {
        try {
            System.out.println(run(args));
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null
                ? e.getCause() : e;
            System.out.println("{\"error\": " + JsonText.quote(cause.getClass().getSimpleName() + ": "
                + cause.getMessage()) + "}");
            System.exit(1);
        }
    }

    static String run(String[] args) throws Exception {
        String command = args.length > 0 ? args[0] : "";
        if (command.equals("reassign") && args.length == 6) {
            return reassign(args[1], args[2], Integer.parseInt(args[3]), ids(args[4]),
                Long.parseLong(args[5]));
        }
        if (command.equals("quorum") && args.length == 2) {
            try (Admin admin = admin(args[1])) {
                return "{\"quorum\": " + quorum(admin, 30_000) + ", \"ms\": 0}";
            }
        }
        if (command.equals("remove-voter") && args.length == 5) {
            return changeVoters(args[1], Integer.parseInt(args[2]), Uuid.fromString(args[3]),
                null, Long.parseLong(args[4]));
        }
        if (command.equals("add-voter") && args.length == 7) {
            RaftVoterEndpoint endpoint =
                new RaftVoterEndpoint("CONTROLLER", args[4], Integer.parseInt(args[5]));
            return changeVoters(args[1], Integer.parseInt(args[2]), Uuid.fromString(args[3]),
                endpoint, Long.parseLong(args[6]));
        }
        throw new IllegalArgumentException("usage: reassign BOOTSTRAP TOPIC PARTITION IDS "
            + "TIMEOUT_MS | quorum BOOTSTRAP | remove-voter BOOTSTRAP ID DIRECTORY_ID TIMEOUT_MS"
            + " | add-voter BOOTSTRAP ID DIRECTORY_ID HOST PORT TIMEOUT_MS");
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        if (bootstrap.startsWith("controllers=")) {
            props.put("bootstrap.controllers", bootstrap.substring("controllers=".length()));
        } else {
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        }
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return Admin.create(props);
    }

    /**
     * Adds (endpoint given) or removes voter ID, asking again until the leader takes it, and
     * returns once the quorum shows the change. Every call has its own short timeout and a
     * failed one is asked again: while the leader changes (it resigns when it removes itself)
     * a call may find no node to go to, or go to one that no longer leads.
     */
    static String changeVoters(String bootstrap, int id, Uuid directory,
                               RaftVoterEndpoint endpoint, long timeoutMs) throws Exception {
        long started = System.currentTimeMillis();
        String last = "";
        String seen = "";
        int refusals = 0;
        int fresh = 0;
        Admin admin = admin(bootstrap);
        try {
            String before = quorum(admin, timeoutMs);
            boolean asked = false;
            while (true) {
                if (!asked) {
                    try {
                        if (endpoint == null) {
                            admin.removeRaftVoter(id, directory,
                                new RemoveRaftVoterOptions().timeoutMs(CALL_MS)).all().get();
                        } else {
                            admin.addRaftVoter(id, directory, Set.of(endpoint),
                                new AddRaftVoterOptions().timeoutMs(CALL_MS)).all().get();
                        }
                        asked = true;
                    } catch (ExecutionException e) {
                        last = reason(e);
                        refusals++;
                    }
                }
                QuorumInfo info = null;
                try {
                    info = admin.describeMetadataQuorum(new DescribeMetadataQuorumOptions()
                        .timeoutMs(DESCRIBE_MS)).quorumInfo().get();
                    seen = "leader " + info.leaderId() + ", voters " + ids(info);
                } catch (ExecutionException e) {
                    seen = "describe failed: " + reason(e);
                    // Seen with bootstrap.controllers once the active controller removed
                    // itself: the client found no node to ask for as long as it lived. A new
                    // client bootstraps its view of the quorum afresh.
                    admin.close(Duration.ZERO);
                    admin = admin(bootstrap);
                    fresh++;
                }
                boolean voter = info != null
                    && info.voters().stream().anyMatch(r -> r.replicaId() == id);
                if (info != null && voter == (endpoint != null)) {
                    return "{\"before\": " + before + ", \"quorum\": " + quorum(info)
                        + ", \"new_clients\": " + fresh + ", \"ms\": "
                        + (System.currentTimeMillis() - started) + ", \"refusals\": "
                        + refusals + ", \"last_refusal\": " + JsonText.quote(last) + "}";
                }
                if (System.currentTimeMillis() - started > timeoutMs) {
                    throw new IllegalStateException((endpoint == null ? "removing" : "adding")
                        + " voter " + id + " did not complete in " + timeoutMs + " ms after "
                        + refusals + " refusal(s)"
                        + (last.isEmpty() ? "" : " (last: " + last + ")") + "; quorum last seen: "
                        + seen + "; " + fresh + " new client(s)");
                }
                Thread.sleep(250);
            }
        } finally {
            admin.close(Duration.ZERO);
        }
    }

    /** The quorum as described, asked again until it answers or TIMEOUT_MS pass. */
    static String quorum(Admin admin, long timeoutMs) throws Exception {
        long started = System.currentTimeMillis();
        while (true) {
            try {
                return quorum(admin.describeMetadataQuorum(
                    new DescribeMetadataQuorumOptions().timeoutMs(CALL_MS)).quorumInfo().get());
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() - started > timeoutMs) {
                    throw e;
                }
                Thread.sleep(250);
            }
        }
    }

    static List<Integer> ids(QuorumInfo info) {
        List<Integer> ids = new ArrayList<>();
        info.voters().forEach(r -> ids.add(r.replicaId()));
        return ids;
    }

    static String reason(ExecutionException e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    static String quorum(QuorumInfo info) {
        return "{\"leader\": " + info.leaderId() + ", \"epoch\": " + info.leaderEpoch()
            + ", \"voters\": " + replicas(info.voters()) + ", \"observers\": "
            + replicas(info.observers()) + "}";
    }

    static String replicas(List<QuorumInfo.ReplicaState> states) {
        List<String> out = new ArrayList<>();
        for (QuorumInfo.ReplicaState state : states) {
            out.add("{\"id\": " + state.replicaId() + ", \"directory\": "
                + JsonText.quote(state.replicaDirectoryId().toString()) + ", \"end\": "
                + state.logEndOffset() + "}");
        }
        return out.toString();
    }

    static String reassign(String bootstrap, String topic, int partition, List<Integer> target,
                           long timeoutMs) throws Exception {
        long started = System.currentTimeMillis();
        try (Admin admin = admin(bootstrap)) {
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
}
