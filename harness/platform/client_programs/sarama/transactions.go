package main

// The producer role in transactions (--transaction-size N), as TransactionalSends.java: the
// harness's plan gives one intent a line on stdin (`commit` or `abort`) before each
// transaction; each transaction sends N messages to partition i % P, offers an offset for
// --offsets-group when given (AddOffsetsToTxn), ends as the intent says and is reported in a
// transaction_end line.
//
// Sarama speaks the transaction protocol of version 1 (no KIP-890 client side). Its calls
// have no timeout of their own: a transaction request is retried up to
// Producer.Transaction.Retry.Max times on a retriable error and then returned, the
// transaction still pending in the client (TxnStatus without ProducerTxnFlagInError). That is
// this program's "timeout", answered as --on-timeout says. An error that leaves
// ProducerTxnFlagFatalError (or names a fencing, sequence, authorization or version error)
// is fatal: the producer is closed and replaced, the outcome unknown. Any other error (an
// abortable one: ProducerTxnFlagAbortableError) is answered with AbortTxn; if that fails
// too, unknown. A commit that returned is committed, an abort that returned aborted.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

type transactions struct {
	txnPlan
	r       *recorder
	setup   *producerSetup
	brokers []string
	limits  limits
	intents chan string // the plan's lines; closed at the end of stdin
}

type transactionEnd struct {
	Name        string  `json:"name"`
	Transaction int64   `json:"transaction"`
	FirstMsgID  int64   `json:"first_msg_id"`
	Messages    int64   `json:"messages"`
	Intent      string  `json:"intent"`
	Outcome     string  `json:"outcome"`
	Error       *string `json:"error"`
	BeginTsUs   int64   `json:"begin_ts_us"`
	EndTsUs     int64   `json:"end_ts_us"`
}

func newTransactions(r *recorder, a args, setup *producerSetup, brokers []string, l limits) (*transactions, error) {
	t := &transactions{r: r, setup: setup, brokers: brokers, limits: l}
	var err error
	if t.size, err = intArg(a, "--transaction-size", ""); err != nil || t.size < 1 {
		return nil, fmt.Errorf("--transaction-size must be a number >= 1")
	}
	if t.partitions, err = intArg(a, "--partitions", ""); err != nil || t.partitions < 1 {
		return nil, fmt.Errorf("--partitions must be a number >= 1")
	}
	t.group = a.get("--offsets-group", "")
	if t.onTimeout, err = onTimeoutArg(a); err != nil {
		return nil, err
	}
	t.intents = make(chan string)
	go func() {
		defer close(t.intents)
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			t.intents <- scanner.Text()
		}
	}()
	return t, nil
}

// start makes a transactional producer (Sarama initialises its producer id as it is made),
// retried as initTransactions is after a timeout.
func (t *transactions) start() (*producer, error) {
	var err error
	for attempt := 1; attempt <= initAttempts; attempt++ {
		var p *producer
		if p, err = startProducer(t.setup.cfg, t.brokers, t.r); err == nil {
			return p, nil
		}
		fmt.Fprintf(os.Stderr, "starting the transactional producer (attempt %d): %v\n", attempt, err)
		if t.r.stopped.Load() {
			break
		}
	}
	return nil, err
}

// run sends transactions until the count, the duration, the end of the plan or a stop;
// returns how many sends were handed over. Closes the producer.
func (t *transactions) run(p *producer, closeLimit time.Duration) int64 {
	var i int64
	for txn := int64(0); t.r.more(t.limits, i); txn++ {
		intent, ok := t.nextIntent()
		if !ok {
			fmt.Fprintln(os.Stderr, "the harness's plan ended (or a stop came): no more transactions")
			break
		}
		i = t.transaction(p, txn, i, t.count(t.limits.max, i), strings.TrimSpace(intent))
		if t.fatal {
			if t.r.stopped.Load() {
				break
			}
			if p = t.replace(p); p == nil {
				break
			}
		}
	}
	if p != nil {
		t.r.closeProducer(p, closeLimit)
	}
	return i
}

func (t *transactions) nextIntent() (string, bool) {
	select {
	case line, ok := <-t.intents:
		return line, ok
	case <-t.r.stop:
		return "", false
	}
}

// transaction runs transaction `txn` from the first-th send; returns the next send's index.
func (t *transactions) transaction(p *producer, txn, first, count int64, intent string) int64 {
	beginUs := nowUs()
	t.fatal = false
	if err := p.BeginTxn(); err != nil { // nothing sent in it: no line; the producer is replaced
		fmt.Fprintf(os.Stderr, "BeginTxn failed: %s\n", describe(err))
		t.fatal = true
		return first
	}
	i := first
	var errs []string
	refused := false
	for i < first+count && !t.r.stopped.Load() {
		if !t.r.wait(t.limits, i, false) {
			break
		}
		// A transaction the client already holds in error refuses further sends (Sarama
		// fails them with ErrTransactionNotReady): the rest is not sent, and it is aborted.
		if status := p.TxnStatus(); status&sarama.ProducerTxnFlagInError != 0 {
			errs = append(errs, fmt.Sprintf("send: the transaction is in error (%s)", status))
			refused = true
			break
		}
		if !t.r.sendOne(p, i, int32(i%t.partitions)) {
			break
		}
		i++
		t.r.progress(i)
	}
	outcome := t.end(p, txn, intent, refused, &errs)
	// Every send's line before the transaction's (the harness journals them first).
	if !waitGroup(&p.pending, closeFatal) {
		fmt.Fprintf(os.Stderr, "transaction %d: sends still unreported after it ended\n", txn)
	}
	line := transactionEnd{
		Name: "transaction_end", Transaction: txn, FirstMsgID: t.r.idBase + first,
		Messages: i - first, Intent: intent, Outcome: outcome,
		BeginTsUs: beginUs, EndTsUs: nowUs(),
	}
	if len(errs) > 0 {
		text := strings.Join(errs, "; ")
		line.Error = &text
	}
	t.r.out.emitNow(line)
	if refused && !t.fatal { // a refusal that lasts must not spin transactions
		time.Sleep(refusedBackoff)
	}
	return i
}

// fatalError: the producer cannot go on (Sarama's fatal state, or an error the Java
// client's contract names fatal).
func fatalError(err error, status sarama.ProducerTxnStatusFlag) bool {
	if status&sarama.ProducerTxnFlagFatalError != 0 {
		return true
	}
	for _, kerr := range []sarama.KError{
		sarama.ErrProducerFenced, sarama.ErrInvalidProducerEpoch, sarama.ErrOutOfOrderSequenceNumber,
		sarama.ErrTransactionalIDAuthorizationFailed, sarama.ErrClusterAuthorizationFailed,
		sarama.ErrTopicAuthorizationFailed, sarama.ErrGroupAuthorizationFailed, sarama.ErrUnsupportedVersion,
	} {
		if errors.Is(err, kerr) {
			return true
		}
	}
	return false
}

// end ends the open transaction as `intent` says (aborts it whatever the intent when
// mustAbort): committed, aborted or unknown, the errors on the way added to errs; sets
// t.fatal when the producer must be replaced.
func (t *transactions) end(p *producer, txn int64, intent string, mustAbort bool, errs *[]string) string {
	commit := !mustAbort && intent == "commit"
	offered := t.group == "" // the offsets are in the transaction
	committing := false      // CommitTxn was called
	doubtful := false        // a commit timed out: it may have reached the coordinator
	answeredAbort := false   // an abort the answer to a timeout asked for
	t.reinit = false
attempts:
	for attempt := 0; attempt < endAttempts; attempt++ {
		doing := "abort"
		var err error
		if commit {
			doing = "commit"
			if !offered {
				offsets := map[string][]*sarama.PartitionOffsetMetadata{
					t.r.topic: {{Partition: 0, Offset: txn + 1}},
				}
				if err = p.AddOffsetsToTxn(offsets, t.group); err == nil {
					offered = true
				}
			}
			if err == nil {
				committing = true
				if err = p.CommitTxn(); err == nil {
					return "committed"
				}
			}
		} else if err = p.AbortTxn(); err == nil {
			if doubtful {
				return "unknown"
			}
			return "aborted"
		}
		*errs = append(*errs, doing+": "+describe(err))
		status := p.TxnStatus()
		switch {
		case fatalError(err, status):
			break attempts
		case status&sarama.ProducerTxnFlagInError == 0:
			// Sarama gave up retrying and the transaction is still pending: a timeout.
			doubtful = doubtful || (commit && committing)
			if t.r.stopped.Load() {
				break attempts
			}
			switch t.answerTimeout(commit, errs) {
			case "reinit":
				break attempts
			case "abort":
				commit = false
				answeredAbort = true
			}
		default: // an abortable error: abort
			if !commit {
				t.abortRefused(answeredAbort, errs)
				break attempts // the abort failed for good
			}
			commit = false
		}
	}
	t.fatal = true
	return "unknown"
}

// replace closes the failed producer and makes a fresh one with the same transactional.id
// (its InitProducerId fences the old one); nil when replaceLimit is used up or it
// cannot start. A replacement --on-timeout asked for uses up no attempt.
func (t *transactions) replace(old *producer) *producer {
	t.r.closeProducer(old, closeFatal)
	if !t.mayReplace() {
		return nil
	}
	p, err := t.start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "the producer could not be replaced: %v\n", err)
		return nil
	}
	return p
}
