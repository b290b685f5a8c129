package main

// The transactional producer's plan (TransactionalSends.java's contract): its arguments and
// the answers to a commit or abort that timed out or failed, which no library decides; each
// program makes the calls and tells what came of them.

import (
	"errors"
	"fmt"
	"os"
	"time"
)

const (
	endAttempts    = 6                     // commit or abort calls for one transaction
	initAttempts   = 3                     // producer id initialisations after timeouts
	replaceLimit   = 5                     // fatal errors survived by a fresh client
	refusedBackoff = 20 * time.Millisecond // after a transaction a refused send aborted
	closeFatal     = 5 * time.Second       // for closing a client after a fatal error
)

// txnPlan is the plan's arguments and what the transactions so far left behind.
type txnPlan struct {
	size       int64  // --transaction-size: the sends of one transaction
	partitions int64  // --partitions: send i goes to partition i % partitions
	group      string // --offsets-group: the group each transaction commits an offset for
	onTimeout  string // --on-timeout: retry, abort or reinit
	fatal      bool   // the last transaction left the client unusable
	reinit     bool   // ... because the answer to a timeout asked for a new client
	replaced   int    // clients replaced after fatal errors (a reinit is free)
}

// onTimeoutArg is --on-timeout (retry when not given), refused unless retry, abort or reinit.
func onTimeoutArg(a args) (string, error) {
	answer := a.get("--on-timeout", "retry")
	switch answer {
	case "retry", "abort", "reinit":
		return answer, nil
	}
	return answer, errors.New("--on-timeout must be retry, abort or reinit")
}

// count is how many sends the next transaction holds, sent sends after the first:
// --transaction-size, fewer when --max-messages (maxMessages >= 0) comes first.
func (t *txnPlan) count(maxMessages, sent int64) int64 {
	if maxMessages >= 0 {
		return min(t.size, maxMessages-sent)
	}
	return t.size
}

// answerTimeout is the answer to a commit (commit) or an abort that timed out, as
// --on-timeout says: retry, abort, or reinit (t.reinit: a new client). An abort that timed
// out under `abort` can only be answered by a new client. Any answer but retry goes in the
// transaction's error text.
func (t *txnPlan) answerTimeout(commit bool, errs *[]string) string {
	answer := t.onTimeout
	if answer == "abort" && !commit {
		answer = "reinit"
	}
	if answer != "retry" {
		*errs = append(*errs, "on timeout: "+answer)
	}
	if answer == "reinit" {
		t.reinit = true
	}
	return answer
}

// abortRefused: the abort failed for good. When it was the answer to a timeout
// (answeredAbort), that answer goes on with a new client, which uses up no attempt.
func (t *txnPlan) abortRefused(answeredAbort bool, errs *[]string) {
	if answeredAbort {
		*errs = append(*errs, "on timeout: reinit")
		t.reinit = true
	}
}

// mayReplace counts a replacement of the client after a fatal error (one a reinit asked for
// is free); false, said on stderr, once more than replaceLimit were needed.
func (t *txnPlan) mayReplace() bool {
	if !t.reinit {
		t.replaced++
	}
	t.reinit = false
	if t.replaced > replaceLimit {
		fmt.Fprintln(os.Stderr, "too many fatal errors, stopping the workload")
		return false
	}
	return true
}
