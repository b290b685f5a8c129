// kafka-chaos's Sarama client program: the client-program contract (docs/clients.md) on
// github.com/IBM/sarama, built by the harness at any Sarama release.
//
//	sarama produce <the Java recorder's arguments>   (produce.go, transactions.go)
//	sarama consume <the Java member's arguments>     (consume.go)
//
// stdout carries one JSON object a line (the verifiable-client protocol and the harness's
// extensions); stderr is the log (Sarama's own logger included), which the harness keeps in
// the run directory.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const saramaModule = "github.com/IBM/sarama"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama produce|consume --name value ...")
		os.Exit(2)
	}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	switch os.Args[1] {
	case "produce":
		os.Exit(runProduce(os.Args[2:]))
	case "consume":
		os.Exit(runConsume(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q: produce or consume\n", os.Args[1])
		os.Exit(2)
	}
}

// args are the program's `--name value` pairs.
type args map[string]string

func parseArgs(argv []string) (args, error) {
	a := args{}
	if len(argv)%2 != 0 {
		return nil, fmt.Errorf("arguments come in pairs, got %d words", len(argv))
	}
	for i := 0; i+1 < len(argv); i += 2 {
		a[argv[i]] = argv[i+1]
	}
	return a, nil
}

// get is the argument's value, or fallback; a missing argument without a fallback panics
// through mustGet's caller as a usage error.
func (a args) get(name, fallback string) string {
	if v, ok := a[name]; ok {
		return v
	}
	return fallback
}

func (a args) need(name string) (string, error) {
	v, ok := a[name]
	if !ok {
		return "", fmt.Errorf("missing argument %s", name)
	}
	return v, nil
}

// out is stdout, one JSON object a line, written under a lock and flushed every 100 ms by
// a background goroutine (and at once where a line must not wait).
type output struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newOutput() *output {
	o := &output{w: bufio.NewWriterSize(os.Stdout, 1<<16)}
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			o.flush()
		}
	}()
	return o
}

func (o *output) emit(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot encode a line: %v\n", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(data)
	_ = o.w.WriteByte('\n')
}

func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.w.Flush()
}

// emitNow writes a line and flushes it.
func (o *output) emitNow(v any) {
	o.emit(v)
	o.flush()
}

type named struct {
	Name string `json:"name"`
}

// saramaVersion is the Sarama release this binary was built with, from its build info.
func saramaVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == saramaModule {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}

// brokerList is a bootstrap-server argument (host:port,host:port,...) as Sarama's addresses.
func brokerList(bootstrap string) []string {
	var brokers []string
	for _, b := range strings.Split(bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}

func nowUs() int64 {
	return time.Now().UnixMicro()
}
