package main

// stdout: one JSON object a line, the verifiable-client protocol as the harness's Java
// programs speak it, with the harness's extensions; stderr is the program's log.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// flushEvery is how often a busy role's lines are handed over: one write(2) a period rather
// than one a send.
const flushEvery = 100 * time.Millisecond

// output writes stdout lines under one lock, so lines printed by the client's goroutines
// never mix.
type output struct {
	mu     sync.Mutex
	w      *bufio.Writer
	closed bool // after last nothing more is printed (a late send's outcome is dropped)
}

// newOutput buffers stdout; with flushEvery > 0 a goroutine hands the lines over that often,
// else only emitNow and last do.
func newOutput(flushEvery time.Duration) *output {
	o := &output{w: bufio.NewWriterSize(os.Stdout, 1<<16)}
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

// emit prints one line (a map or a struct), handed over by the next flush.
func (o *output) emit(v any) { o.line(v, false) }

// emitNow prints one line and hands it over at once: a line the harness waits for.
func (o *output) emitNow(v any) { o.line(v, true) }

func (o *output) line(v any, flush bool) {
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

// last prints its lines, hands them over and closes: later lines (late promises) are dropped.
func (o *output) last(vs ...any) {
	for _, v := range vs {
		o.emit(v)
	}
	o.mu.Lock()
	o.w.Flush()
	o.closed = true
	o.mu.Unlock()
}

// event is a line that is only its name: startup_complete, shutdown_complete.
func event(name string) map[string]any { return map[string]any{"name": name} }

// progressLine is how many sends were handed to the client so far.
func progressLine(sent int64) map[string]any {
	return map[string]any{"name": "progress", "sent": sent}
}

// holdingLine is a member's assignment change (partitions_assigned, partitions_revoked,
// partitions_lost): the partitions it holds after it, sorted, and when.
func holdingLine(name string, held []int32) map[string]any {
	return map[string]any{"name": name, "partitions": held, "ts_us": nowUs()}
}

func nowUs() int64 { return time.Now().UnixMicro() }

// millis is a duration as a Java setting in milliseconds states it.
func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// moduleVersion is the release of module `path` the program was built with, from its build
// info ("1.22.3": no leading v; a replacement's own), "unknown" where it names none.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				return strings.TrimPrefix(dep.Version, "v")
			}
		}
	}
	return "unknown"
}
