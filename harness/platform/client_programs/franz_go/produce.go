package main

// The producer role: the workload's sends (KafkaChaosProducer.java's contract), each send's
// outcome a line, paced, stopped by the count, the duration or SIGTERM.

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is the state the plain and transactional sends share.
type producer struct {
	workload
	out          *output
	a            args
	acksZero     bool // acks=0: kgo's offsets are made up, report none
	stopped      atomic.Bool
	stop         chan struct{} // closed on SIGTERM
	outstanding  sync.WaitGroup
	recordCtx    context.Context // cancelled once close-s has run out
	cancelRecs   context.CancelFunc
	lastProgress time.Time
}

func produce(a args) int {
	p := &producer{
		out:          newOutput(flushEvery),
		a:            a,
		workload:     workload{topic: a.required("--topic"), keyPrefix: a["--key-prefix"]},
		stop:         make(chan struct{}),
		lastProgress: time.Now(),
	}
	var err error
	if p.keys, err = strconv.ParseInt(a.get("--keys", "16"), 10, 64); err != nil || p.keys < 1 {
		fatalf(2, "--keys must be a positive whole number")
	}
	if p.idBase, err = strconv.ParseInt(a.get("--id-base", "0"), 10, 64); err != nil {
		fatalf(2, "--id-base must be a whole number")
	}
	if p.messageBytes, err = strconv.Atoi(a.get("--message-bytes", "100")); err != nil {
		fatalf(2, "--message-bytes must be a whole number")
	}
	closeS, err := strconv.ParseFloat(a.get("--close-s", "30"), 64)
	if err != nil {
		fatalf(2, "--close-s must be a number")
	}
	props, err := readProperties(a.required("--producer.config"))
	if err != nil {
		fatalf(2, "cannot read --producer.config: %v", err)
	}
	settings, err := producerOptions(props)
	if err != nil {
		fatalf(2, "cannot honour the producer settings: %v", err)
	}
	_, transactional := a["--transaction-size"]
	if transactional && settings.txnID == "" {
		fatalf(2, "--transaction-size needs transactional.id in --producer.config")
	}
	p.acksZero = settings.acks == "0"
	opts := append([]kgo.Opt{kgo.SeedBrokers(splitList(a.required("--bootstrap-server"))...)}, settings.opts...)
	if transactional {
		opts = append(opts, txnOpts(a)...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fatalf(2, "franz-go refuses the settings: %v", err)
	}
	p.recordCtx, p.cancelRecs = context.WithCancel(context.Background())
	onTerminate(func() {
		p.stopped.Store(true)
		close(p.stop)
	})

	p.out.emit(event("startup_complete"))
	eff := producerEffective(cl, settings)
	if transactional {
		if v := transactionVersion(cl, settings.maxBlock); v != "" {
			eff["transaction.version"] = v
		}
	}
	p.out.emitNow(map[string]any{"name": "effective_config", "config": eff, "idempotent": settings.idempotent})

	var sent int64
	if transactional {
		t := newTransactions(p, cl, opts, settings)
		sent, err = t.run()
		cl = t.cl
		if err != nil { // as Java's initTransactions throwing: no shutdown_complete, exit 1
			p.out.last(progressLine(sent))
			fmt.Fprintln(os.Stderr, err)
			closeWithin(cl, 5*time.Second)
			return 1
		}
	} else {
		sent = p.send(cl)
	}
	p.close(cl, time.Duration(closeS*float64(time.Second)))
	p.out.last(progressLine(sent), event("shutdown_complete"))
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, part := range splitComma(s) {
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

func splitComma(s string) []string {
	var parts []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return parts
}

// limits are the workload's bounds: max messages (-1 none), its end, the rate (<=0 none).
func (p *producer) limits() (int64, time.Time, float64) {
	maxMessages, err := strconv.ParseInt(p.a.get("--max-messages", "-1"), 10, 64)
	if err != nil {
		fatalf(2, "--max-messages must be a whole number")
	}
	duration, err := strconv.ParseFloat(p.a.get("--duration-s", "-1"), 64)
	if err != nil {
		fatalf(2, "--duration-s must be a number")
	}
	rate, err := strconv.ParseFloat(p.a.get("--throughput", "-1"), 64)
	if err != nil {
		fatalf(2, "--throughput must be a number")
	}
	end := time.Now().Add(time.Duration(math.MaxInt64))
	if duration > 0 {
		end = time.Now().Add(time.Duration(duration * float64(time.Second)))
	}
	return maxMessages, end, rate
}

// pace waits until message i is due (start + i/rate); false when stopped or past `end`.
func (p *producer) pace(start time.Time, i int64, rate float64, end time.Time) bool {
	for {
		if p.stopped.Load() || !time.Now().Before(end) {
			return false
		}
		if rate <= 0 {
			return true
		}
		wait := time.Until(start.Add(time.Duration(float64(i) * float64(time.Second) / rate)))
		if wait <= 0 {
			return true
		}
		select {
		case <-time.After(min(wait, 50*time.Millisecond)):
		case <-p.stop:
		}
	}
}

// send sends until the count, the duration or a stop; returns how many were handed over.
func (p *producer) send(cl *kgo.Client) int64 {
	maxMessages, end, rate := p.limits()
	start := time.Now()
	var i int64
	for maxMessages < 0 || i < maxMessages {
		if !p.pace(start, i, rate, end) {
			break
		}
		p.sendOne(cl, -1, i, nil)
		i++
		p.progress(i)
	}
	return i
}

// sendOne hands message i to the client (to `partition`, or where the default partitioner
// puts it when -1); its outcome is printed by the promise, and given to `done` if not nil.
func (p *producer) sendOne(cl *kgo.Client, partition int32, i int64, done func(error)) {
	head := p.head(i)[:headBytes]
	record := &kgo.Record{Topic: p.topic, Key: p.key(i), Value: p.value(head)}
	if partition >= 0 {
		record.Partition = partition
	}
	sentAt := time.Now()
	p.outstanding.Add(1)
	cl.Produce(p.recordCtx, record, func(r *kgo.Record, err error) {
		defer p.outstanding.Done()
		p.report(head, sentAt, r, err)
		if done != nil {
			done(err)
		}
	})
}

func (p *producer) report(head string, sentAt time.Time, r *kgo.Record, err error) {
	line := map[string]any{
		"topic":      p.topic,
		"value":      head,
		"latency_us": time.Since(sentAt).Microseconds(),
	}
	if err == nil {
		line["name"] = "producer_send_success"
		line["partition"] = r.Partition
		line["offset"] = r.Offset
		if p.acksZero {
			line["offset"] = -1 // no response: kgo numbers the batch from 0 itself
		}
	} else {
		line["name"] = "producer_send_error"
		line["exception"] = errName(err)
		line["message"] = err.Error()
		if code, ok := brokerCode(err); ok {
			line["error_code"] = code
		}
	}
	p.out.emit(line)
}

// progress prints the sends so far, at most every 200 ms.
func (p *producer) progress(sent int64) {
	if time.Since(p.lastProgress) >= progressEvery {
		p.lastProgress = time.Now()
		p.out.emitNow(progressLine(sent))
	}
}

// close waits up to closeS for every send's outcome, then closes the client (which fails
// what it still holds: those outcomes are printed while the lines are still open).
func (p *producer) close(cl *kgo.Client, closeS time.Duration) {
	if cl == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		p.outstanding.Wait()
		close(done)
	}()
	flushCtx, cancel := context.WithTimeout(context.Background(), closeS)
	defer cancel()
	go cl.Flush(flushCtx) // with linger, makes the last batches go now
	select {
	case <-done:
	case <-flushCtx.Done():
		fmt.Fprintf(os.Stderr, "close-s (%s) ran out with sends unreported; closing the client\n", closeS)
		p.cancelRecs()
	}
	closed := make(chan struct{})
	go func() {
		cl.Close()
		close(closed)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		fmt.Fprintln(os.Stderr, "sends still unreported 5 s after closing: left unreported")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		fmt.Fprintln(os.Stderr, "the client did not close within 5 s")
	}
}
