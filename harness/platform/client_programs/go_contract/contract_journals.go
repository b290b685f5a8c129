package main

// The consume role's journals (KafkaChaosConsumer.java's contract): every record the member
// processed and every commit outcome, one write(2) a batch with one ts_us, before the next
// step, so a killed member leaves whole batches in the order it took them.

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// row is a record the member processed: [msg_id, partition, offset] in the processed journal.
type row struct {
	msgID     int64
	partition int32
	offset    int64
	epoch     int32 // its leader epoch, for a client that commits with it (franz-go's)
}

// commitRow is a partition's commit outcome: [partition, offset, outcome] in the commits
// journal, outcome "ok" or the error's name.
type commitRow struct {
	partition int32
	offset    int64
	outcome   string
}

// journals are the member's two files (--processed, --commits) and --processing-ms.
type journals struct {
	processed  *os.File
	commits    *os.File
	commitsMu  sync.Mutex    // the client's own goroutines journal the commits it makes
	processing time.Duration // each record's processing time (0: the batch at once)
	// processedFailure starts the error a failed write of the processed journal ends the
	// member with: "" leaves the write's own error (franz-go's program), Sarama's names the
	// journal.
	processedFailure string
}

// openJournal opens a journal for appending, created if missing: a member's restart goes on
// where the one before it stopped.
func openJournal(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// handleBatch processes one polled batch as --commit says: before-process commits first and
// processes only the partitions whose commit succeeded, after-process processes then
// commits, auto only processes (the client commits by itself). commitSync commits the next
// offsets after the rows, journals each partition's outcome and returns those committed.
func (j *journals) handleBatch(commit string, rows []row, commitSync func([]row) (map[int32]bool, error)) error {
	switch commit {
	case "before-process":
		done, err := commitSync(rows)
		if err != nil {
			return err
		}
		var kept []row
		for _, r := range rows {
			if done[r.partition] {
				kept = append(kept, r)
			}
		}
		return j.process(kept)
	case "after-process":
		if err := j.process(rows); err != nil {
			return err
		}
		_, err := commitSync(rows)
		return err
	}
	return j.process(rows)
}

// process journals the rows: at once, or one after the other after --processing-ms each.
func (j *journals) process(rows []row) error {
	if j.processing <= 0 {
		return j.writeProcessed(rows)
	}
	for i := range rows {
		time.Sleep(j.processing)
		if err := j.writeProcessed(rows[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// writeProcessed appends [msg_id, partition, offset, ts_us] rows in one write.
func (j *journals) writeProcessed(rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	var text strings.Builder
	now := nowUs()
	for _, r := range rows {
		fmt.Fprintf(&text, "[%d,%d,%d,%d]\n", r.msgID, r.partition, r.offset, now)
	}
	_, err := j.processed.WriteString(text.String())
	if err != nil && j.processedFailure != "" {
		return fmt.Errorf("%s: %w", j.processedFailure, err)
	}
	return err
}

// writeCommits appends [partition, offset, outcome, ts_us] rows in one write, by partition.
func (j *journals) writeCommits(rows []commitRow) error {
	sort.Slice(rows, func(a, b int) bool { return rows[a].partition < rows[b].partition })
	var text strings.Builder
	now := nowUs()
	for _, r := range rows {
		fmt.Fprintf(&text, "[%d,%d,%s,%d]\n", r.partition, r.offset, strconv.Quote(r.outcome), now)
	}
	j.commitsMu.Lock()
	defer j.commitsMu.Unlock()
	if _, err := j.commits.WriteString(text.String()); err != nil {
		return fmt.Errorf("the commits journal cannot be written: %w", err)
	}
	return nil
}
