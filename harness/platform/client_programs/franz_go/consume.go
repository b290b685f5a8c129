package main

// The consumer role: one start of one member of the workload's group (KafkaChaosConsumer.java's
// contract): join read_committed from the earliest offset, process what it polls and commit
// as the commit mode says, journalling every processed record and every commit outcome, one
// write(2) a batch, before the next step.
//
// kgo runs its group apart from polling unless told otherwise; the member uses
// BlockRebalanceOnPoll (and AllowRebalance after each batch is processed and committed), so,
// as with Java's poll, partitions change only between batches. In `auto` mode kgo
// autocommits (every 5 s, what earlier polls returned) and the journal has each commit kgo
// reports through AutoCommitCallback; a revocation callback replaces kgo's default one, so
// the member makes the commit kgo's default revocation makes (everything polled, which is
// processed by then) itself, journalled the same way.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	pollTimeout    = 200 * time.Millisecond
	maxPollRecords = 500 // Java's max.poll.records default
)

type member struct {
	out          *out
	topic        string
	commit       string
	processingMs int64
	processed    *os.File
	commits      *os.File
	commitsMu    sync.Mutex
	cl           *kgo.Client
	stopped      atomic.Bool

	heldMu sync.Mutex
	held   map[int32]bool
}

// row is a processed record: [msg_id, partition, offset] (+ ts when written).
type row struct {
	msgID     int64
	partition int32
	offset    int64
	epoch     int32
}

func consume(a args) int {
	m := &member{out: newOut(0), topic: a.get("--topic", ""), commit: a.get("--commit", ""), held: map[int32]bool{}}
	switch m.commit {
	case "auto", "after-process", "before-process":
	default:
		fatalf(2, "unknown commit mode %s", m.commit)
	}
	var err error
	if m.processingMs, err = strconv.ParseInt(a.get("--processing-ms", "0"), 10, 64); err != nil {
		fatalf(2, "--processing-ms must be a whole number")
	}
	if err := m.run(a); err != nil {
		m.out.line(map[string]any{"name": "error", "message": err.Error()}, true)
		os.Exit(1)
	}
	m.out.line(event("shutdown_complete"), true)
	return 0
}

func (m *member) run(a args) error {
	var err error
	if m.processed, err = os.OpenFile(a.get("--processed", ""), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		return err
	}
	if m.commits, err = os.OpenFile(a.get("--commits", ""), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		return err
	}
	defer m.processed.Close()
	defer m.commits.Close()
	sessionMs, err := strconv.ParseInt(a.get("--session-timeout-ms", "6000"), 10, 64)
	if err != nil {
		return fmt.Errorf("--session-timeout-ms: %w", err)
	}
	heartbeatMs, err := strconv.ParseInt(a.get("--heartbeat-ms", "1000"), 10, 64)
	if err != nil {
		return fmt.Errorf("--heartbeat-ms: %w", err)
	}
	group, clientID := a.get("--group", ""), a.get("--client-id", "kchaos-consumer")
	opts := []kgo.Opt{
		kgo.SeedBrokers(splitList(a.get("--bootstrap-server", ""))...),
		kgo.ClientID(clientID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(m.topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(time.Duration(sessionMs) * time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(heartbeatMs) * time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	}
	if m.commit == "auto" {
		opts = append(opts, kgo.AutoCommitCallback(m.journalCommit))
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	if m.cl, err = kgo.NewClient(opts...); err != nil {
		return err
	}
	m.out.line(map[string]any{"name": "effective_config", "config": m.effective(group, clientID)}, true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		m.stopped.Store(true)
		cancel()
	}()
	go watchStdin()
	m.out.line(event("startup_complete"), true)

	for !m.stopped.Load() {
		pollCtx, pollCancel := context.WithTimeout(ctx, pollTimeout)
		fetches := m.cl.PollRecords(pollCtx, maxPollRecords)
		pollCancel()
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if ctx.Err() == nil && err != context.DeadlineExceeded && err != context.Canceled {
				fmt.Fprintf(os.Stderr, "fetch error on %s[%d]: %v\n", topic, partition, err)
			}
		})
		var rows []row
		fetches.EachRecord(func(r *kgo.Record) {
			rows = append(rows, row{msgID(r.Value), r.Partition, r.Offset, r.LeaderEpoch})
		})
		if len(rows) > 0 {
			if err := m.handle(rows); err != nil {
				m.cl.AllowRebalance()
				m.cl.Close()
				return err
			}
		}
		m.cl.AllowRebalance()
	}
	m.cl.Close() // leaves the group; in auto mode the revocation commits what was polled
	return nil
}

func (m *member) effective(group, clientID string) map[string]string {
	eff := map[string]string{
		"client.name":                   "franz-go",
		"client.version":                franzVersion(),
		"group.id":                      group,
		"client.id":                     clientID,
		"auto.offset.reset":             "earliest",
		"isolation.level":               "read_committed",
		"enable.auto.commit":            strconv.FormatBool(m.commit == "auto"),
		"group.protocol":                "classic",
		"partition.assignment.strategy": "cooperative-sticky",
		"max.poll.records":              strconv.Itoa(maxPollRecords),
		"block.rebalance.on.poll":       "true",
	}
	for key, opt := range map[string]any{
		"session.timeout.ms":      kgo.SessionTimeout,
		"heartbeat.interval.ms":   kgo.HeartbeatInterval,
		"rebalance.timeout.ms":    kgo.RebalanceTimeout,
		"auto.commit.interval.ms": kgo.AutoCommitInterval,
	} {
		if d, ok := m.cl.OptValue(opt).(time.Duration); ok {
			eff[key] = millis(d)
		}
	}
	if m.commit != "auto" {
		delete(eff, "auto.commit.interval.ms")
	}
	return eff
}

// handle processes one batch under the commit mode.
func (m *member) handle(rows []row) error {
	switch m.commit {
	case "before-process":
		done, err := m.commitSync(rows)
		if err != nil {
			return err
		}
		var kept []row
		for _, r := range rows {
			if done[r.partition] {
				kept = append(kept, r)
			}
		}
		return m.process(kept)
	case "after-process":
		if err := m.process(rows); err != nil {
			return err
		}
		_, err := m.commitSync(rows)
		return err
	}
	return m.process(rows)
}

// process journals the rows: at once, or one after the other after processing-ms each.
func (m *member) process(rows []row) error {
	if m.processingMs <= 0 {
		return m.writeProcessed(rows)
	}
	for i := range rows {
		time.Sleep(time.Duration(m.processingMs) * time.Millisecond)
		if err := m.writeProcessed(rows[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (m *member) writeProcessed(rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	now := nowUs()
	for _, r := range rows {
		fmt.Fprintf(&b, "[%d,%d,%d,%d]\n", r.msgID, r.partition, r.offset, now)
	}
	_, err := m.processed.Write([]byte(b.String()))
	return err
}

// commitSync commits each partition's next offset after rows, synchronously, and journals
// each partition's outcome; returns the partitions whose commit succeeded.
func (m *member) commitSync(rows []row) (map[int32]bool, error) {
	next := map[int32]kgo.EpochOffset{}
	for _, r := range rows {
		if had, ok := next[r.partition]; !ok || had.Offset < r.offset+1 {
			next[r.partition] = kgo.EpochOffset{Epoch: r.epoch, Offset: r.offset + 1}
		}
	}
	done := map[int32]bool{}
	var journalErr error
	m.cl.CommitOffsetsSync(context.Background(), map[string]map[int32]kgo.EpochOffset{m.topic: next},
		func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			outcomes := commitOutcomes(m.topic, next, resp, err)
			for p, outcome := range outcomes {
				if outcome == "ok" {
					done[p] = true
				}
			}
			journalErr = m.writeCommits(next, outcomes)
		})
	return done, journalErr
}

// commitOutcomes is each partition's outcome: "ok", or the error's name (the request's, or
// the partition's in the response).
func commitOutcomes(topic string, offsets map[int32]kgo.EpochOffset, resp *kmsg.OffsetCommitResponse, err error) map[int32]string {
	outcomes := map[int32]string{}
	for p := range offsets {
		outcomes[p] = "ok"
		if err != nil {
			outcomes[p] = errName(err)
		} else if resp == nil {
			outcomes[p] = "no response"
		} else {
			outcomes[p] = "not in the response"
		}
	}
	if err != nil || resp == nil {
		return outcomes
	}
	for _, t := range resp.Topics {
		if t.Topic != topic && t.Topic != "" {
			continue
		}
		for _, rp := range t.Partitions {
			if _, ok := outcomes[rp.Partition]; !ok {
				continue
			}
			if e := kerr.ErrorForCode(rp.ErrorCode); e != nil {
				outcomes[rp.Partition] = errName(e)
			} else {
				outcomes[rp.Partition] = "ok"
			}
		}
	}
	return outcomes
}

func (m *member) writeCommits(offsets map[int32]kgo.EpochOffset, outcomes map[int32]string) error {
	parts := make([]int, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	var b strings.Builder
	now := nowUs()
	for _, p := range parts {
		fmt.Fprintf(&b, "[%d,%d,%s,%d]\n", p, offsets[int32(p)].Offset, strconv.Quote(outcomes[int32(p)]), now)
	}
	m.commitsMu.Lock()
	defer m.commitsMu.Unlock()
	if _, err := m.commits.Write([]byte(b.String())); err != nil {
		return fmt.Errorf("the commits journal cannot be written: %w", err)
	}
	return nil
}

// journalCommit journals a commit kgo made itself (auto mode): its request's offsets for
// the topic, each with its outcome.
func (m *member) journalCommit(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if req == nil {
		return
	}
	offsets := map[int32]kgo.EpochOffset{}
	for _, t := range req.Topics {
		if t.Topic != m.topic {
			continue
		}
		for _, p := range t.Partitions {
			offsets[p.Partition] = kgo.EpochOffset{Epoch: p.LeaderEpoch, Offset: p.Offset}
		}
	}
	if len(offsets) == 0 {
		return
	}
	if werr := m.writeCommits(offsets, commitOutcomes(m.topic, offsets, resp, err)); werr != nil {
		fmt.Fprintln(os.Stderr, werr)
	}
}

func (m *member) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.change("partitions_assigned", assigned[m.topic], true)
}

func (m *member) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if m.commit == "auto" {
		// kgo's default revocation, which this callback replaces: commit what was polled.
		if uncommitted := cl.UncommittedOffsets(); len(uncommitted) > 0 {
			cl.CommitOffsetsSync(ctx, uncommitted, m.journalCommit)
		}
	}
	m.change("partitions_revoked", revoked[m.topic], false)
}

func (m *member) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.change("partitions_lost", lost[m.topic], false)
}

// change prints the partitions held after an assignment change.
func (m *member) change(name string, partitions []int32, add bool) {
	m.heldMu.Lock()
	for _, p := range partitions {
		if add {
			m.held[p] = true
		} else {
			delete(m.held, p)
		}
	}
	held := make([]int, 0, len(m.held))
	for p := range m.held {
		held = append(held, int(p))
	}
	m.heldMu.Unlock()
	sort.Ints(held)
	m.out.line(map[string]any{"name": name, "partitions": held, "ts_us": nowUs()}, true)
}

// msgID is the message id at the head of a value the harness wrote ("<msg_id>:<key_seq>:..."),
// -1 for any other value.
func msgID(value []byte) int64 {
	var id int64
	i := 0
	for ; i < len(value) && value[i] != ':'; i++ {
		if value[i] < '0' || value[i] > '9' || i >= 18 {
			return -1
		}
		id = id*10 + int64(value[i]-'0')
	}
	if i == 0 || i == len(value) {
		return -1
	}
	return id
}

// watchStdin halts the program when stdin ends: the harness is gone.
func watchStdin() {
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	os.Exit(3)
}
