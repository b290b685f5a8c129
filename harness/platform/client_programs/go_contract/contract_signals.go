package main

// How the harness ends a role: a signal asks it to finish, the end of stdin halts it.

import (
	"bufio"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// onTerminate calls stop when SIGTERM or SIGINT comes: the harness ends a role so, and the
// role then finishes as the contract says (the producer reports its sends, the member leaves
// its group).
func onTerminate(stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		stop()
	}()
}

// watchStdin halts the program (exit 3) when stdin ends: the harness is gone, and the member
// goes as a killed one would.
func watchStdin() {
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	os.Exit(3)
}
