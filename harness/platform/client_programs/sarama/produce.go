package main

// The producer role: the workload's sends through a Sarama AsyncProducer (Return.Successes
// and Return.Errors on), every outcome reported as a producer_send_success or
// producer_send_error line. Plain sends go where Sarama's default partitioner (a hash of the
// key) puts them; with --transaction-size they go in transactions (transactions.go).

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

const (
	maxPause     = 50 * time.Millisecond // the longest sleep between checks for a stop
	clientStarts = 30                    // attempts to reach the cluster at start, 1 s apart
	closeGrace   = time.Second           // for the producer's own close once the wait is over
)

// recorder is the producer role's state shared by plain sends and transactions.
type recorder struct {
	workload
	out      *output
	acksZero bool // acks=0: the broker returns no offset

	stop     chan struct{} // closed at SIGTERM
	stopped  atomic.Bool
	lastProg time.Time
}

// producer is one AsyncProducer, its client, and the reports of its sends.
type producer struct {
	sarama.AsyncProducer
	client  sarama.Client
	pending sync.WaitGroup // sends handed over whose outcome is not printed yet
	readers sync.WaitGroup // the two goroutines printing outcomes, until the channels close
}

// sendMeta travels with each message to its outcome.
type sendMeta struct {
	head   string
	sentAt time.Time
}

type sendSuccess struct {
	Name      string `json:"name"`
	Topic     string `json:"topic"`
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	LatencyUs int64  `json:"latency_us"`
}

type sendError struct {
	Name      string `json:"name"`
	Topic     string `json:"topic"`
	Value     string `json:"value"`
	LatencyUs int64  `json:"latency_us"`
	Exception string `json:"exception"`
	Message   string `json:"message"`
	ErrorCode *int16 `json:"error_code,omitempty"`
}

type effectiveConfig struct {
	Name       string            `json:"name"`
	Config     map[string]string `json:"config"`
	Idempotent *bool             `json:"idempotent"`
}

func runProduce(argv []string) int {
	a, err := parseArgs(argv, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	code, err := produce(a)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
	return code
}

func intArg(a args, name, fallback string) (int64, error) {
	text := a.get(name, fallback)
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a whole number", name, text)
	}
	return n, nil
}

func floatArg(a args, name, fallback string) (float64, error) {
	text := a.get(name, fallback)
	n, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a number", name, text)
	}
	return n, nil
}

func produce(a args) (int, error) {
	bootstrap, err := a.need("--bootstrap-server")
	if err != nil {
		return 2, err
	}
	topic, err := a.need("--topic")
	if err != nil {
		return 2, err
	}
	configPath, err := a.need("--producer.config")
	if err != nil {
		return 2, err
	}
	props, err := readProperties(configPath)
	if err != nil {
		return 2, err
	}
	_, transactional := a["--transaction-size"]
	setup, err := newProducerSetup(props, transactional)
	if err != nil {
		return 2, err
	}
	r := &recorder{out: newOutput(flushEvery), workload: workload{topic: topic, keyPrefix: a.get("--key-prefix", "")}, stop: make(chan struct{})}
	r.acksZero = setup.cfg.Producer.RequiredAcks == sarama.NoResponse
	if r.keys, err = intArg(a, "--keys", "16"); err != nil {
		return 2, err
	}
	if r.keys < 1 {
		return 2, fmt.Errorf("--keys must be >= 1")
	}
	if r.idBase, err = intArg(a, "--id-base", "0"); err != nil {
		return 2, err
	}
	bytes, err := intArg(a, "--message-bytes", "100")
	if err != nil {
		return 2, err
	}
	r.messageBytes = int(bytes)
	closeS, err := floatArg(a, "--close-s", "30")
	if err != nil {
		return 2, err
	}
	limits, err := readLimits(a)
	if err != nil {
		return 2, err
	}
	onTerminate(func() {
		r.stopped.Store(true)
		close(r.stop)
	})

	brokers := brokerList(bootstrap)
	var sent int64
	if transactional {
		t, err := newTransactions(r, a, setup, brokers, limits)
		if err != nil {
			return 2, err
		}
		p, err := t.start()
		if err != nil {
			return 1, fmt.Errorf("the transactional producer could not start: %w", err)
		}
		r.started(setup)
		sent = t.run(p, time.Duration(closeS*float64(time.Second)))
	} else {
		p, err := startProducer(setup.cfg, brokers, r)
		if err != nil {
			return 1, fmt.Errorf("the producer could not start: %w", err)
		}
		r.started(setup)
		sent = r.sendPlain(p, limits)
		r.closeProducer(p, time.Duration(closeS*float64(time.Second)))
	}
	r.out.emit(progressLine(sent))
	r.out.emitNow(event("shutdown_complete"))
	return 0, nil
}

func (r *recorder) started(setup *producerSetup) {
	idempotent := setup.idempotent
	r.out.emit(event("startup_complete"))
	r.out.emitNow(effectiveConfig{"effective_config", setup.effective, &idempotent})
}

// limits are where the workload stops: a count, a duration, a rate to pace the sends by.
type limits struct {
	max   int64 // -1: none
	end   time.Time
	start time.Time
	rate  float64 // <= 0: unthrottled
}

func readLimits(a args) (limits, error) {
	var l limits
	var err error
	if l.max, err = intArg(a, "--max-messages", "-1"); err != nil {
		return l, err
	}
	duration, err := floatArg(a, "--duration-s", "-1")
	if err != nil {
		return l, err
	}
	if l.rate, err = floatArg(a, "--throughput", "-1"); err != nil {
		return l, err
	}
	l.start = time.Now()
	if duration > 0 {
		l.end = l.start.Add(time.Duration(duration * float64(time.Second)))
	}
	return l, nil
}

// more says whether the i-th send may go (count, duration and stop).
func (r *recorder) more(l limits, i int64) bool {
	if r.stopped.Load() || (l.max >= 0 && i >= l.max) {
		return false
	}
	return l.end.IsZero() || time.Now().Before(l.end)
}

// wait sleeps until the i-th send is due by the rate, in short steps; false if a stop came
// (or, with untilEnd, the workload's end) first.
func (r *recorder) wait(l limits, i int64, untilEnd bool) bool {
	if l.rate <= 0 {
		return true
	}
	due := l.start.Add(time.Duration(float64(i) / l.rate * float64(time.Second)))
	for {
		now := time.Now()
		if !now.Before(due) {
			return true
		}
		if r.stopped.Load() || (untilEnd && !r.more(l, i)) {
			return false
		}
		pause := due.Sub(now)
		if pause > maxPause {
			pause = maxPause
		}
		select {
		case <-time.After(pause):
		case <-r.stop:
			return false
		}
	}
}

// newClient reaches the cluster, retrying for a while (a Java producer's constructor never
// fails on connectivity; Sarama's client fetches metadata at once).
func newClient(cfg *sarama.Config, brokers []string, stop <-chan struct{}) (sarama.Client, error) {
	var err error
	for attempt := 1; attempt <= clientStarts; attempt++ {
		var client sarama.Client
		if client, err = sarama.NewClient(brokers, cfg); err == nil {
			return client, nil
		}
		fmt.Fprintf(os.Stderr, "reaching the cluster (attempt %d): %v\n", attempt, err)
		select {
		case <-stop:
			return nil, err
		case <-time.After(time.Second):
		}
	}
	return nil, err
}

// startProducer makes a client and an AsyncProducer on it (a transactional one initialises
// its producer id here: InitProducerId), and starts reporting its outcomes.
func startProducer(cfg *sarama.Config, brokers []string, r *recorder) (*producer, error) {
	client, err := newClient(cfg, brokers, r.stop)
	if err != nil {
		return nil, err
	}
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	p := &producer{AsyncProducer: ap, client: client}
	p.readers.Add(2)
	go func() {
		defer p.readers.Done()
		for msg := range ap.Successes() {
			r.reportSuccess(msg)
			p.pending.Done()
		}
	}()
	go func() {
		defer p.readers.Done()
		for perr := range ap.Errors() {
			r.reportError(perr)
			p.pending.Done()
		}
	}()
	return p, nil
}

// sendOne hands message i to the producer (to `partition` when >= 0); false when a stop came
// first (the message was never handed over, so it has no outcome).
func (r *recorder) sendOne(p *producer, i int64, partition int32) bool {
	head := r.head(i)
	msg := &sarama.ProducerMessage{
		Topic:    r.topic,
		Key:      sarama.ByteEncoder(r.key(i)),
		Value:    sarama.ByteEncoder(r.value(head)),
		Metadata: sendMeta{head[:headBytes], time.Now()},
	}
	if partition >= 0 {
		msg.Partition = partition
	}
	p.pending.Add(1)
	select {
	case p.Input() <- msg:
		return true
	case <-r.stop:
		p.pending.Done()
		return false
	}
}

// progress prints how many sends were handed over, at most every progressEvery.
func (r *recorder) progress(sent int64) {
	if now := time.Now(); now.Sub(r.lastProg) >= progressEvery {
		r.lastProg = now
		r.out.emitNow(progressLine(sent))
	}
}

func (r *recorder) reportSuccess(msg *sarama.ProducerMessage) {
	meta, _ := msg.Metadata.(sendMeta)
	offset := msg.Offset
	if r.acksZero {
		offset = -1 // no answer from the broker: no offset (the Java client says -1 too)
	}
	r.out.emit(sendSuccess{
		"producer_send_success", r.topic, meta.head, msg.Partition, offset,
		time.Since(meta.sentAt).Microseconds(),
	})
}

func (r *recorder) reportError(perr *sarama.ProducerError) {
	var meta sendMeta
	if perr.Msg != nil {
		meta, _ = perr.Msg.Metadata.(sendMeta)
	}
	line := sendError{
		Name: "producer_send_error", Topic: r.topic, Value: meta.head,
		LatencyUs: time.Since(meta.sentAt).Microseconds(),
		Exception: errorName(perr.Err), Message: fmt.Sprint(perr.Err),
	}
	if code, ok := kafkaCode(perr.Err); ok {
		line.ErrorCode = &code
	}
	r.out.emit(line)
}

// sendPlain sends until the count, the duration or a stop; returns the sends handed over.
func (r *recorder) sendPlain(p *producer, l limits) int64 {
	var i int64
	for r.more(l, i) {
		if !r.wait(l, i, true) || !r.more(l, i) || !r.sendOne(p, i, -1) {
			break
		}
		i++
		r.progress(i)
	}
	return i
}

// waitGroup waits up to `limit` for `wg`; false if it is still not done.
func waitGroup(wg *sync.WaitGroup, limit time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// closeProducer waits up to `limit` for the outcomes of the sends in flight, then closes
// the producer and its client. Sarama has no flush: its Close fails the messages it is still
// retrying with ErrShuttingDown, so the sends are given their time before it (as the Java
// client's close(timeout) gives them).
func (r *recorder) closeProducer(p *producer, limit time.Duration) {
	deadline := time.Now().Add(limit)
	if !waitGroup(&p.pending, limit) {
		fmt.Fprintf(os.Stderr, "sends still unreported after %s: closing the producer\n", limit)
	}
	p.AsyncClose()
	left := time.Until(deadline)
	if left < closeGrace {
		left = closeGrace
	}
	if !waitGroup(&p.readers, left) {
		fmt.Fprintf(os.Stderr, "the producer has not closed: its unreported sends stay unreported\n")
		return // the client is left as it is: the process ends
	}
	if err := p.client.Close(); err != nil && !errors.Is(err, sarama.ErrClosedClient) {
		fmt.Fprintf(os.Stderr, "closing the client: %v\n", err)
	}
}
