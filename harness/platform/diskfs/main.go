// Command chaosfs is a FUSE passthrough file system that sits under a Kafka broker's log
// directory and injects disk faults: lost unsynced writes on a crash (whole or torn),
// failing fsync, a full disk, a slow disk. A control socket switches the faults.
//
//	chaosfs serve --backing DIR --mount DIR --control SOCKET
//	chaosfs ctl --control SOCKET COMMAND [ARGS...]
//
// Writes go through to the backing dir at once; what a crash must undo (the size each
// file had at its last fsync and the pre-images of the synced bytes overwritten since) is
// kept in memory beside it, and applied by `crash`.
//
// Limitations: metadata operations (create, rename, unlink, mkdir) are durable at once, and
// directory fsync has no effect; a crash only rolls back file contents. Pre-images are kept
// in memory. Data already in the kernel's page cache of files that were not rolled back may
// still be read after a crash; every request that reaches chaosfs fails.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usageText = `usage:
  chaosfs serve --backing DIR --mount DIR --control SOCKET
  chaosfs ctl --control SOCKET COMMAND [ARGS...]
commands: ` + accepted + "\n"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command line: the exit code of the subcommand (2 for a usage error).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveMain(args[1:], stdout, stderr)
	case "ctl":
		return ctlMain(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	fmt.Fprintf(stderr, "chaosfs: unknown subcommand %q\n%s", args[0], usageText)
	return 2
}

// ctlMain sends one command and prints its reply: 0 when the reply is ok, 1 when not, 2
// for a usage error or an unreachable socket.
func ctlMain(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("ctl", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("control", "", "the control socket of a running chaosfs serve")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *socket == "" || flags.NArg() == 0 {
		fmt.Fprint(stderr, "chaosfs ctl: --control SOCKET and a command are required\n"+usageText)
		return 2
	}
	reply, err := sendCommand(*socket, strings.Join(flags.Args(), " "))
	if err != nil {
		fmt.Fprintf(stderr, "chaosfs ctl: cannot reach %s: %v (is chaosfs serve running?)\n", *socket, err)
		return 2
	}
	fmt.Fprintln(stdout, reply)
	if !replyOK(reply) {
		return 1
	}
	return 0
}
