// kafka-chaos's franz-go client program: one executable for both roles of the harness's
// client-program contract, on github.com/twmb/franz-go (kgo) at the version it was built
// against.
//
//	franzgo produce <the Java recorder's arguments>   (produce.go, transactions.go)
//	franzgo consume <the Java member's arguments>     (consume.go)
//
// stdout carries one JSON object a line (the verifiable-client protocol as the harness's
// Java programs speak it); stderr is the program's log. Settings come from a Java
// properties file with Java's names, mapped to kgo options in config.go.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const franzModule = "github.com/twmb/franz-go"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franzgo produce|consume --name value ...")
		os.Exit(2)
	}
	args, err := parseArgs(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "produce":
		os.Exit(produce(args))
	case "consume":
		os.Exit(consume(args))
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q (produce or consume)\n", os.Args[1])
		os.Exit(2)
	}
}

// args are the program's `--name value` pairs.
type args map[string]string

func parseArgs(argv []string) (args, error) {
	a := args{}
	if len(argv)%2 != 0 {
		return nil, fmt.Errorf("arguments come in pairs (--name value), got %d words", len(argv))
	}
	for i := 0; i < len(argv); i += 2 {
		if !strings.HasPrefix(argv[i], "--") {
			return nil, fmt.Errorf("expected --name, got %q", argv[i])
		}
		a[argv[i]] = argv[i+1]
	}
	return a, nil
}

// get is the argument's value, or fallback; a missing argument without fallback is fatal.
func (a args) get(name, fallback string) string {
	if v, ok := a[name]; ok {
		return v
	}
	if fallback == "" {
		fatalf(2, "missing argument %s", name)
	}
	return fallback
}

func fatalf(code int, format string, v ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", v...)
	os.Exit(code)
}

// out writes stdout lines under one lock; a flusher hands them over every 100 ms.
type out struct {
	mu     sync.Mutex
	w      *bufio.Writer
	closed bool // after shutdown_complete nothing more is printed
}

func newOut(flushEvery time.Duration) *out {
	o := &out{w: bufio.NewWriterSize(os.Stdout, 1<<16)}
	if flushEvery > 0 {
		go func() {
			for range time.Tick(flushEvery) {
				o.mu.Lock()
				o.w.Flush()
				o.mu.Unlock()
			}
		}()
	}
	return o
}

// line prints one JSON object (a map or a struct); flush hands it over at once.
func (o *out) line(v any, flush bool) {
	text, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot encode a line:", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.w.Write(text)
	o.w.WriteByte('\n')
	if flush {
		o.w.Flush()
	}
}

// last prints its lines and closes: later lines (late promises) are dropped.
func (o *out) last(vs ...any) {
	for _, v := range vs {
		o.line(v, false)
	}
	o.mu.Lock()
	o.w.Flush()
	o.closed = true
	o.mu.Unlock()
}

func event(name string) map[string]any { return map[string]any{"name": name} }

func nowUs() int64 { return time.Now().UnixMicro() }

// franzVersion is the franz-go release the program was built with ("1.22.3").
func franzVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == franzModule {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				return strings.TrimPrefix(dep.Version, "v")
			}
		}
	}
	return "unknown"
}

// errName is the client's own name for an error: the Kafka error's name for a broker's
// protocol error (NOT_ENOUGH_REPLICAS), kgo's exported error variable where it is one, the
// context's, else the Go type.
func errName(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke) && err == error(ke):
		return ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "kgo.ErrRecordTimeout"
	case errors.Is(err, kgo.ErrRecordRetries):
		return "kgo.ErrRecordRetries"
	case errors.Is(err, kgo.ErrAborting):
		return "kgo.ErrAborting"
	case errors.Is(err, kgo.ErrClientClosed):
		return "kgo.ErrClientClosed"
	case errors.Is(err, kgo.ErrMaxBuffered):
		return "kgo.ErrMaxBuffered"
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	case errors.As(err, &ke):
		return fmt.Sprintf("%T(%s)", err, ke.Message)
	}
	return fmt.Sprintf("%T", err)
}

// brokerCode is the Kafka protocol error code when err IS a broker's protocol error (not one
// wrapped inside a client error such as a record timeout's last error).
func brokerCode(err error) (int16, bool) {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Code, true
	}
	return 0, false
}

// isTimeout: the error is the client giving up waiting (a deadline, a retriable broker error
// that outlived the client's retries, a network failure), the analogue of Java's
// TimeoutException: the operation may or may not have happened.
func isTimeout(err error) bool {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return true
	case errors.As(err, &ke):
		return ke.Retriable || ke.Code == kerr.UnknownServerError.Code || ke.Code == kerr.ConcurrentTransactions.Code
	case errors.As(err, &ne), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return true
	}
	return strings.Contains(err.Error(), "EOF")
}

// describe is an error as a transaction's error text names it.
func describe(err error) string { return errName(err) + ": " + err.Error() }
