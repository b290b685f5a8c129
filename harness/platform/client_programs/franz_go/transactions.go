package main

// The producer role in transactions (TransactionalSends.java's contract): one intent a line
// on stdin before each transaction, N sends round-robin over the partitions, with
// --offsets-group an offset for that group in the transaction, then commit or abort, and a
// transaction_end line.
//
// Outcomes follow TransactionalSends.java, with franz-go's errors in Java's classes:
//   - an EndTransaction that returned nil is definite;
//   - fatal (PRODUCER_FENCED, OUT_OF_ORDER_SEQUENCE_NUMBER, *_AUTHORIZATION_FAILED,
//     UNSUPPORTED_VERSION, kgo's "fatal, unrecoverable" producer id): outcome unknown, the
//     client is closed and replaced (at most 5 times);
//   - a timeout (a deadline, a retriable broker error kgo gave up retrying, a network error):
//     --on-timeout retry|abort|reinit as Java's program answers it;
//   - any other error: abort; if the abort fails too, unknown.
// franz-go leaves two things to its user that Java's commitTransaction does itself: flushing
// before the commit, and not committing a transaction one of whose sends failed. The program
// does both (a failed send makes the commit an abort, its error text says so).
//
// franz-go has no public call that puts a non-member's offsets in a transaction (only the
// GroupTransactSession of a group member). With --offsets-group the program sends what
// Java's sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group)) sends:
// AddOffsetsToTxn, then TxnOffsetCommit (generation -1, no member id) of offset txn+1 on
// partition 0, with the client's producer id and epoch, through the client's Request.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// txnOpts are the options transactions add: explicit partitions.
func txnOpts(a args) []kgo.Opt {
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if a["--offsets-group"] != "" {
		// TxnOffsetCommit from v6 names topics by id only; the program names them.
		versions := kversion.Stable()
		if max, ok := versions.LookupMaxKeyVersion(int16(kmsg.TxnOffsetCommit)); ok && max > 5 {
			versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 5)
		}
		opts = append(opts, kgo.MaxVersions(versions))
	}
	return opts
}

type transactions struct {
	txnPlan
	p        *producer
	cl       *kgo.Client
	opts     []kgo.Opt
	txnID    string
	maxBlock time.Duration
	intents  *bufio.Reader

	mu      sync.Mutex
	sendErr error // the first send of the open transaction that failed
}

func newTransactions(p *producer, cl *kgo.Client, opts []kgo.Opt, s producerSettings) *transactions {
	t := &transactions{p: p, cl: cl, opts: opts, txnID: s.txnID, maxBlock: s.maxBlock,
		txnPlan: txnPlan{group: p.a["--offsets-group"]}, intents: bufio.NewReader(os.Stdin)}
	var err error
	if t.size, err = strconv.ParseInt(p.a.required("--transaction-size"), 10, 64); err != nil || t.size < 1 {
		fatalf(2, "--transaction-size must be a positive whole number")
	}
	if t.partitions, err = strconv.ParseInt(p.a.required("--partitions"), 10, 64); err != nil || t.partitions < 1 {
		fatalf(2, "--partitions must be a positive whole number")
	}
	if t.onTimeout, err = onTimeoutArg(p.a); err != nil {
		fatalf(2, "%v", err)
	}
	return t
}

// run sends transactions until the count, the duration, the end of the plan or a stop;
// returns how many sends were handed to the client, or the error that kept the producer id
// from ever loading (nothing was sent).
func (t *transactions) run() (int64, error) {
	maxMessages, end, rate := t.p.limits()
	start := time.Now()
	var i int64
	if err := t.init(); err != nil {
		return 0, fmt.Errorf("the transactional producer id could not be initialised: %w", err)
	}
	for txn := int64(0); !t.p.stopped.Load() && (maxMessages < 0 || i < maxMessages) && time.Now().Before(end); txn++ {
		intent, err := t.intents.ReadString('\n')
		intent = strings.TrimSpace(intent)
		if intent == "" && err != nil {
			fmt.Fprintln(os.Stderr, "the harness's plan ended: no more transactions")
			break
		}
		i = t.transaction(txn, i, t.count(maxMessages, i), intent, start, rate, end)
		if t.fatal && (t.p.stopped.Load() || !t.replace()) {
			break
		}
	}
	return i, nil
}

// init loads the transactional producer id (Java's initTransactions), retried after a timeout.
func (t *transactions) init() error {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), t.maxBlock)
		_, _, err := t.cl.ProducerID(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if !isTimeout(err) || attempt >= initAttempts || t.p.stopped.Load() {
			return err
		}
		fmt.Fprintf(os.Stderr, "initialising the producer id timed out, retrying: %v\n", err)
	}
}

// transaction runs transaction `txn` from the first-th send; returns the next send's index.
func (t *transactions) transaction(txn, first, count int64, intent string, start time.Time, rate float64, end time.Time) int64 {
	beginUs := nowUs()
	t.fatal = false
	t.mu.Lock()
	t.sendErr = nil
	t.mu.Unlock()
	if err := t.cl.BeginTransaction(); err != nil { // nothing sent in it: no line; a new client
		fmt.Fprintf(os.Stderr, "BeginTransaction failed: %v\n", err)
		t.fatal = true
		return first
	}
	i := first
	var refused error
	for i < first+count && !t.p.stopped.Load() {
		if rate > 0 && !t.p.pace(start, i, rate, end.Add(time.Hour)) {
			break
		}
		t.p.sendOne(t.cl, int32(i%t.partitions), i, t.failed)
		i++
		t.p.progress(i)
		if refused = t.failure(); refused != nil { // the rest is not sent, and it is aborted
			break
		}
	}
	var errs []string
	if refused != nil {
		errs = append(errs, "send: "+describe(refused))
	}
	outcome := t.end(txn, intent, refused != nil, &errs)
	var errText any
	if len(errs) > 0 {
		errText = strings.Join(errs, "; ")
	}
	t.p.out.emitNow(map[string]any{
		"name": "transaction_end", "transaction": txn, "first_msg_id": t.p.idBase + first,
		"messages": i - first, "intent": intent, "outcome": outcome, "error": errText,
		"begin_ts_us": beginUs, "end_ts_us": nowUs(),
	})
	if refused != nil && !t.fatal {
		time.Sleep(refusedBackoff)
	}
	return i
}

// failed records a send of the open transaction that failed (its promise).
func (t *transactions) failed(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.sendErr == nil {
		t.sendErr = err
	}
	t.mu.Unlock()
}

func (t *transactions) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sendErr
}

// end ends the open transaction as `intent` says (aborts it whatever the intent when
// mustAbort): committed, aborted or unknown, the errors on the way added to errs; sets
// t.fatal when the client must be replaced.
func (t *transactions) end(txn int64, intent string, mustAbort bool, errs *[]string) string {
	commit := !mustAbort && intent == "commit"
	planned := !mustAbort && intent == "abort"
	offered := t.group == ""
	doubtful := false      // a commit timed out after EndTxn was asked for
	unconfirmed := false   // an EndTransaction call timed out: a later nil confirms nothing
	answeredAbort := false // an abort the answer to a timeout asked for
	t.reinit = false
	for attempt := 0; attempt < endAttempts; attempt++ {
		doing := "abort"
		if commit {
			doing = "commit"
		}
		committing, ending := false, false
		err := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), t.maxBlock)
			defer cancel()
			if commit {
				if err := t.cl.Flush(ctx); err != nil {
					return err
				}
				if failed := t.failure(); failed != nil {
					return errSendFailed{failed}
				}
				if !offered {
					if err := t.offer(ctx, txn+1); err != nil {
						return err
					}
					offered = true
				}
				committing, ending = true, true
				return t.cl.EndTransaction(ctx, kgo.TryCommit)
			}
			if planned {
				// Deliver first: aborting drops what the client still holds, and an abort
				// that never reached the log gives read_committed nothing to hide.
				if err := t.cl.Flush(ctx); err != nil {
					return err
				}
			} else if err := t.cl.AbortBufferedRecords(ctx); err != nil {
				return err
			}
			ending = true
			return t.cl.EndTransaction(ctx, kgo.TryAbort)
		}()
		if err == nil {
			switch {
			case unconfirmed:
				// Releases before 1.22 forget the transaction when its EndTxn fails, and
				// a second EndTransaction then returns nil doing nothing: not a confirmation.
				return "unknown"
			case commit:
				return "committed"
			case doubtful:
				return "unknown"
			}
			return "aborted"
		}
		unconfirmed = unconfirmed || (ending && isTimeout(err))
		*errs = append(*errs, doing+": "+describe(err))
		switch {
		case isFatal(err):
			t.fatal = true
			return "unknown"
		case isTimeout(err):
			doubtful = doubtful || (commit && committing)
			if t.p.stopped.Load() {
				t.fatal = true
				return "unknown"
			}
			switch t.answerTimeout(commit, errs) {
			case "reinit":
				t.fatal = true
				return "unknown"
			case "abort":
				commit, planned, answeredAbort = false, false, true
			}
		default:
			if !commit {
				t.abortRefused(answeredAbort, errs)
				t.fatal = true
				return "unknown"
			}
			// A broker's definite refusal, or kgo refusing before the EndTxn (a failed
			// producer id: OPERATION_NOT_ATTEMPTED; a second commit after an unconfirmed
			// one, which a timeout already made doubtful).
			commit = false // the documented answer to any other error: abort
		}
	}
	t.fatal = true
	return "unknown"
}

// errSendFailed: a send of the transaction failed, so it cannot commit.
type errSendFailed struct{ err error }

func (e errSendFailed) Error() string { return "a send in the transaction failed: " + e.err.Error() }

// isFatal: Java's fatal classes (fenced, out of order sequence, authorization, unsupported
// version) and kgo's unrecoverable producer id.
func isFatal(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke.Code {
		case kerr.ProducerFenced.Code, kerr.OutOfOrderSequenceNumber.Code, kerr.UnsupportedVersion.Code,
			kerr.TransactionalIDAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code,
			kerr.GroupAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code:
			return true
		}
	}
	return strings.Contains(err.Error(), "fatal, unrecoverable")
}

// offer puts offset `offset` of partition 0 for the group in the open transaction, as
// Java's sendOffsetsToTransaction does for a group given by id.
func (t *transactions) offer(ctx context.Context, offset int64) error {
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	txnID := t.txnID
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, t.group
	if err := retryConcurrent(ctx, func() error {
		resp, err := add.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return err
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = txnID, t.group, id, epoch
	commit.Generation, commit.MemberID = -1, ""
	topic := kmsg.NewTxnOffsetCommitRequestTopic()
	topic.Topic = t.p.topic
	part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	part.Partition, part.Offset, part.LeaderEpoch = 0, offset, -1
	topic.Partitions = append(topic.Partitions, part)
	commit.Topics = append(commit.Topics, topic)
	return retryConcurrent(ctx, func() error {
		resp, err := commit.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// retryConcurrent retries CONCURRENT_TRANSACTIONS (the coordinator still ending the last
// transaction) as kgo does for its own transactional requests.
func retryConcurrent(ctx context.Context, fn func() error) error {
	backoff := 20 * time.Millisecond
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// replace closes the client after a fatal error and makes a fresh one with the same
// transactional id; false when replaceLimit is used up or it cannot start. A replacement
// --on-timeout asked for uses up no attempt.
func (t *transactions) replace() bool {
	old := t.cl
	t.cl = nil
	closeWithin(old, closeFatal)
	if !t.mayReplace() {
		return false
	}
	cl, err := kgo.NewClient(t.opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "the client could not be replaced: %v\n", err)
		return false
	}
	t.cl = cl
	if err := t.init(); err != nil {
		fmt.Fprintf(os.Stderr, "the client could not be replaced: %v\n", err)
		return false
	}
	return true
}

// closeWithin closes a client, waiting at most d (a stuck close is left behind).
func closeWithin(cl *kgo.Client, d time.Duration) {
	done := make(chan struct{})
	go func() {
		cl.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Fprintf(os.Stderr, "closing the failed client took more than %s; left behind\n", d)
	}
}

// transactionVersion is the cluster's finalized transaction.version feature, "" if unknown.
func transactionVersion(cl *kgo.Client, limit time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), min(limit, 10*time.Second))
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return ""
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return strconv.Itoa(int(f.MaxVersionLevel))
		}
	}
	return "0"
}
