// kafka-chaos's franz-go client program: one executable for both roles of the harness's
// client-program contract, on github.com/twmb/franz-go (kgo) at the version it was built
// against.
//
//	franzgo produce <the Java recorder's arguments>   (produce.go, transactions.go)
//	franzgo consume <the Java member's arguments>     (consume.go)
//
// stdout carries one JSON object a line (the verifiable-client protocol as the harness's
// Java programs speak it); stderr is the program's log. Settings come from a Java
// properties file with Java's names, mapped to kgo options in config.go. The plumbing both Go
// programs share (the arguments, stdout, the values, the journals, the transactions' plan) is
// in ../go_contract, which the build copies beside these files.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const franzModule = "github.com/twmb/franz-go"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: franzgo produce|consume --name value ...")
		os.Exit(2)
	}
	args, err := parseArgs(os.Args[2:], true)
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

// required is an argument the role cannot run without: its absence ends the program (exit 2).
func (a args) required(name string) string {
	v, err := a.need(name)
	if err != nil {
		fatalf(2, "%v", err)
	}
	return v
}

func fatalf(code int, format string, v ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", v...)
	os.Exit(code)
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
