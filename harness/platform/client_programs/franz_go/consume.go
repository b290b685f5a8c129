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
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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
	journals
	out     *output
	topic   string
	commit  string
	cl      *kgo.Client
	stopped atomic.Bool

	heldMu sync.Mutex
	held   map[int32]bool
}

func consume(a args) int {
	m := &member{out: newOutput(0), topic: a.required("--topic"), commit: a.required("--commit"), held: map[int32]bool{}}
	switch m.commit {
	case "auto", "after-process", "before-process":
	default:
		fatalf(2, "unknown commit mode %s", m.commit)
	}
	processingMs, err := strconv.ParseInt(a.get("--processing-ms", "0"), 10, 64)
	if err != nil {
		fatalf(2, "--processing-ms must be a whole number")
	}
	m.processing = time.Duration(processingMs) * time.Millisecond
	if err := m.run(a); err != nil {
		m.out.emitNow(map[string]any{"name": "error", "message": err.Error()})
		os.Exit(1)
	}
	m.out.emitNow(event("shutdown_complete"))
	return 0
}

func (m *member) run(a args) error {
	var err error
	if m.processed, err = openJournal(a.required("--processed")); err != nil {
		return err
	}
	if m.commits, err = openJournal(a.required("--commits")); err != nil {
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
	group, clientID := a.required("--group"), a.get("--client-id", "kchaos-consumer")
	opts := []kgo.Opt{
		kgo.SeedBrokers(splitList(a.required("--bootstrap-server"))...),
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
	m.out.emitNow(map[string]any{"name": "effective_config", "config": m.effective(group, clientID)})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onTerminate(func() {
		m.stopped.Store(true)
		cancel()
	})
	go watchStdin()
	m.out.emitNow(event("startup_complete"))

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
		"client.version":                moduleVersion(franzModule),
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
	return m.handleBatch(m.commit, rows, m.commitSync)
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
			journalErr = m.writeCommits(commitRows(next, outcomes))
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

// commitRows are the commits journal's rows: each partition's offset and outcome.
func commitRows(offsets map[int32]kgo.EpochOffset, outcomes map[int32]string) []commitRow {
	rows := make([]commitRow, 0, len(offsets))
	for p, o := range offsets {
		rows = append(rows, commitRow{p, o.Offset, outcomes[p]})
	}
	return rows
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
	if werr := m.writeCommits(commitRows(offsets, commitOutcomes(m.topic, offsets, resp, err))); werr != nil {
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
	held := make([]int32, 0, len(m.held))
	for p := range m.held {
		held = append(held, p)
	}
	m.heldMu.Unlock()
	sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
	m.out.emitNow(holdingLine(name, held))
}
