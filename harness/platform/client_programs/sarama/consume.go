package main

// The consumer-group member role, as KafkaChaosConsumer.java: one start of one member of the
// group on a Sarama ConsumerGroup (read_committed, from the earliest offset), processing what
// it reads and committing as --commit says, every processed record and every commit outcome
// journalled (one write a batch) before the next step.
//
// Commits: `after-process` and `before-process` mark the batch's next offsets
// (session.MarkOffset) and commit them synchronously (session.Commit, auto commit off).
// session.Commit reports nothing: a partition whose commit the coordinator refused, or that
// Sarama only queued for a later try, looks the same as a committed one. So each commit's
// outcome is read back from the coordinator (an OffsetFetch of the group): `ok` when the
// group's committed offset has reached the marked one, else the error Sarama reported for the
// partition meanwhile (ConsumerGroup.Errors), else NotCommitted; CommitUnverified when the
// read-back itself failed. A mark that was not committed stays in Sarama, which sends it
// again with its next commit: its `ok` is journalled when a later read-back sees it.
// `auto` marks each record once processed and leaves the commits to Sarama's auto commit
// (Consumer.Offsets.AutoCommit), which reports none: its journal has no commits.
//
// Rebalances: Sarama ends a session at each rebalance; Setup prints partitions_assigned with
// the session's claims, Cleanup partitions_revoked (or partitions_lost when the session ended
// because the member was no longer in the group: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID) holding none.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const (
	batchMax     = 500 // records one batch holds at most (Java's max.poll.records)
	consumeRetry = time.Second
)

type member struct {
	journals
	out    *output
	topic  string
	group  string
	commit string
	admin  sarama.ClusterAdmin

	mu      sync.Mutex      // one batch at a time, as the Java member's poll loop
	pending map[int32]int64 // marked offsets a read-back has not seen committed yet

	errMu   sync.Mutex
	lastErr map[int32]partitionError // the last error Sarama reported per partition
}

type partitionError struct {
	name string
	at   time.Time
}

type errorLine struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

type consumerConfig struct {
	Name   string            `json:"name"`
	Config map[string]string `json:"config"`
}

func runConsume(argv []string) int {
	out := newOutput(flushEvery)
	code, err := consume(out, argv)
	if err != nil {
		out.emitNow(errorLine{"error", err.Error()})
		fmt.Fprintln(os.Stderr, "error:", err)
		return code
	}
	out.emitNow(event("shutdown_complete"))
	return 0
}

func consume(out *output, argv []string) (int, error) {
	a, err := parseArgs(argv, false)
	if err != nil {
		return 2, err
	}
	m := &member{out: out, pending: map[int32]int64{}, lastErr: map[int32]partitionError{}}
	m.processedFailure = "the processed journal cannot be written"
	var bootstrap, processedPath, commitsPath string
	for name, target := range map[string]*string{
		"--bootstrap-server": &bootstrap, "--topic": &m.topic, "--group": &m.group,
		"--commit": &m.commit, "--processed": &processedPath, "--commits": &commitsPath,
	} {
		if *target, err = a.need(name); err != nil {
			return 2, err
		}
	}
	switch m.commit {
	case "auto", "after-process", "before-process":
	default:
		return 2, fmt.Errorf("unknown commit mode %s", m.commit)
	}
	processingMs, err := intArg(a, "--processing-ms", "0")
	if err != nil {
		return 2, err
	}
	m.processing = time.Duration(processingMs) * time.Millisecond
	sessionMs, err := intArg(a, "--session-timeout-ms", "6000")
	if err != nil {
		return 2, err
	}
	heartbeatMs, err := intArg(a, "--heartbeat-ms", "1000")
	if err != nil {
		return 2, err
	}
	if m.processed, err = openJournal(processedPath); err != nil {
		return 1, err
	}
	defer m.processed.Close()
	if m.commits, err = openJournal(commitsPath); err != nil {
		return 1, err
	}
	defer m.commits.Close()

	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = a.get("--client-id", "kchaos-consumer")
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = m.commit == "auto"
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Group.Session.Timeout = time.Duration(sessionMs) * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = time.Duration(heartbeatMs) * time.Millisecond
	if err := cfg.Validate(); err != nil {
		return 2, err
	}

	go watchStdin()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	onTerminate(func() {
		close(stop)
		cancel()
	})

	m.out.emitNow(consumerConfig{"effective_config", m.effectiveConfig(cfg)})
	var client sarama.Client
	for client == nil {
		if client, err = sarama.NewClient(brokerList(bootstrap), cfg); err != nil {
			fmt.Fprintf(os.Stderr, "reaching the cluster: %v\n", err)
			client = nil
			select {
			case <-stop:
				return 0, nil
			case <-time.After(consumeRetry):
			}
		}
	}
	defer client.Close()
	group, err := sarama.NewConsumerGroupFromClient(m.group, client)
	if err != nil {
		return 1, err
	}
	if m.admin, err = sarama.NewClusterAdminFromClient(client); err != nil {
		return 1, err
	}
	go m.watchErrors(group.Errors())
	m.out.emitNow(event("startup_complete"))
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{m.topic}, m); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			fmt.Fprintf(os.Stderr, "consume: %s\n", describe(err))
			select {
			case <-ctx.Done():
			case <-time.After(consumeRetry):
			}
		}
	}
	// Leave the group (LeaveGroup), as the Java member's close.
	if err := group.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "closing the group: %v\n", err)
	}
	return 0, nil
}

func (m *member) effectiveConfig(cfg *sarama.Config) map[string]string {
	strategies := []string{}
	for _, s := range cfg.Consumer.Group.Rebalance.GroupStrategies {
		strategies = append(strategies, s.Name())
	}
	return map[string]string{
		"group.id":                      m.group,
		"client.id":                     cfg.ClientID,
		"isolation.level":               "read_committed",
		"auto.offset.reset":             "earliest",
		"enable.auto.commit":            strconv.FormatBool(cfg.Consumer.Offsets.AutoCommit.Enable),
		"auto.commit.interval.ms":       millis(cfg.Consumer.Offsets.AutoCommit.Interval),
		"session.timeout.ms":            millis(cfg.Consumer.Group.Session.Timeout),
		"heartbeat.interval.ms":         millis(cfg.Consumer.Group.Heartbeat.Interval),
		"rebalance.timeout.ms":          millis(cfg.Consumer.Group.Rebalance.Timeout),
		"partition.assignment.strategy": strings.Join(strategies, ","),
		"client.version":                "sarama " + moduleVersion(saramaModule),
		"sarama.version":                cfg.Version.String(),
		"commit":                        m.commit,
		"commit.outcome":                "read back from the coordinator after session.Commit",
	}
}

// watchErrors logs what Sarama reports on the group's error channel, keeping the last error
// of each partition to name a commit that did not happen.
func (m *member) watchErrors(errs <-chan error) {
	for err := range errs {
		fmt.Fprintf(os.Stderr, "group error: %s\n", describe(err))
		var cerr *sarama.ConsumerError
		if errors.As(err, &cerr) && cerr.Topic == m.topic {
			m.errMu.Lock()
			m.lastErr[cerr.Partition] = partitionError{errorName(cerr.Err), time.Now()}
			m.errMu.Unlock()
		}
	}
}

// claimed is the session's partitions of the topic, sorted.
func (m *member) claimed(sess sarama.ConsumerGroupSession) []int32 {
	parts := append([]int32{}, sess.Claims()[m.topic]...)
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	return parts
}

// Setup: a new session holds its claims.
func (m *member) Setup(sess sarama.ConsumerGroupSession) error {
	m.out.emitNow(holdingLine("partitions_assigned", m.claimed(sess)))
	return nil
}

// Cleanup: the session is over, the member holds nothing until the next one.
func (m *member) Cleanup(sess sarama.ConsumerGroupSession) error {
	name := "partitions_revoked"
	cause := context.Cause(sess.Context())
	for _, kerr := range []sarama.KError{sarama.ErrUnknownMemberId, sarama.ErrIllegalGeneration, sarama.ErrFencedInstancedId} {
		if errors.Is(cause, kerr) {
			name = "partitions_lost"
		}
	}
	m.mu.Lock()
	m.pending = map[int32]int64{} // marks of this session not committed now never will be
	m.mu.Unlock()
	m.out.emitNow(holdingLine(name, []int32{}))
	return nil
}

// ConsumeClaim reads one partition's records, a batch at a time (what is already there, up
// to batchMax), until Sarama closes it.
func (m *member) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	records := claim.Messages()
	for {
		var batch []row
		select {
		case msg, ok := <-records:
			if !ok {
				return nil
			}
			batch = append(batch, row{msgID: msgID(msg.Value), partition: msg.Partition, offset: msg.Offset})
		case <-sess.Context().Done():
			return nil
		}
	more:
		for len(batch) < batchMax {
			select {
			case msg, ok := <-records:
				if !ok {
					break more
				}
				batch = append(batch, row{msgID: msgID(msg.Value), partition: msg.Partition, offset: msg.Offset})
			default:
				break more
			}
		}
		if err := m.handle(sess, batch); err != nil {
			return err
		}
	}
}

// handle processes one batch under the commit mode.
func (m *member) handle(sess sarama.ConsumerGroupSession, rows []row) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	commitSync := func(rows []row) (map[int32]bool, error) { return m.commitSync(sess, rows) }
	if err := m.handleBatch(m.commit, rows, commitSync); err != nil {
		return err
	}
	if m.commit == "auto" { // mark what was processed; Sarama commits it
		for p, next := range nextOffsets(rows) {
			sess.MarkOffset(m.topic, p, next, "")
		}
	}
	return nil
}

func nextOffsets(rows []row) map[int32]int64 {
	next := map[int32]int64{}
	for _, r := range rows {
		if r.offset+1 > next[r.partition] {
			next[r.partition] = r.offset + 1
		}
	}
	return next
}

// commitSync marks each partition's next offset after `rows`, commits (session.Commit) and
// reads the outcome back; the partitions whose commit is seen done. Outcomes are journalled,
// with the `ok` of earlier marks a later commit carried.
func (m *member) commitSync(sess sarama.ConsumerGroupSession, rows []row) (map[int32]bool, error) {
	offsets := nextOffsets(rows)
	started := time.Now()
	for p, next := range offsets {
		sess.MarkOffset(m.topic, p, next, "")
	}
	sess.Commit()
	asked := map[int32]bool{}
	for p := range offsets {
		asked[p] = true
	}
	for p := range m.pending {
		asked[p] = true
	}
	var parts []int32
	for p := range asked {
		parts = append(parts, p)
	}
	committed, readErr := m.readCommitted(parts)

	var journal []commitRow
	done := map[int32]bool{}
	for p, next := range offsets {
		text := "ok"
		if readErr != nil {
			text = "CommitUnverified"
		} else if got, ok := committed[p]; !ok || got < next {
			text = m.failure(p, started)
		}
		if text == "ok" {
			done[p] = true
			delete(m.pending, p)
		} else {
			m.pending[p] = next
		}
		journal = append(journal, commitRow{p, next, text})
	}
	if readErr == nil {
		for p, next := range m.pending {
			if _, now := offsets[p]; now {
				continue
			}
			if got, ok := committed[p]; ok && got >= next {
				journal = append(journal, commitRow{p, next, "ok"})
				delete(m.pending, p)
			}
		}
	} else {
		fmt.Fprintf(os.Stderr, "reading the commit back: %s\n", describe(readErr))
	}
	if err := m.writeCommits(journal); err != nil {
		return nil, err
	}
	return done, nil
}

// failure names why partition p's commit is not seen: the error Sarama reported for it
// since the commit started, else NotCommitted.
func (m *member) failure(p int32, since time.Time) string {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	if e, ok := m.lastErr[p]; ok && !e.at.Before(since) {
		return e.name
	}
	return "NotCommitted"
}

// readCommitted is the group's committed offset of each partition, from its coordinator.
func (m *member) readCommitted(parts []int32) (map[int32]int64, error) {
	resp, err := m.admin.ListConsumerGroupOffsets(m.group, map[string][]int32{m.topic: parts})
	if err != nil {
		return nil, err
	}
	got := map[int32]int64{}
	for _, p := range parts {
		block := resp.GetBlock(m.topic, p)
		if block == nil {
			continue
		}
		if !errors.Is(block.Err, sarama.ErrNoError) {
			return nil, block.Err
		}
		got[p] = block.Offset
	}
	return got, nil
}
