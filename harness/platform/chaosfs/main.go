// Command chaosfs is a FUSE passthrough file system that sits under a Kafka broker's log
// directory and injects disk faults: lost unsynced writes on a crash (whole or torn),
// failing fsync, a full disk, a slow disk. A control socket switches the faults.
//
//	chaosfs serve --backing DIR --mount DIR --control SOCKET [--writeback-s S]
//	chaosfs ctl --control SOCKET COMMAND [ARGS...]
//
// Writes go through to the backing dir at once; what a crash must undo (the size each
// file had when it last became durable and the pre-images of the durable bytes overwritten
// since) is kept in memory beside it, and applied by `crash`.
//
// A file's content becomes durable as on Linux: by fsync or fdatasync (or each write of an
// O_SYNC or O_DSYNC handle); by `ctl sync`, sync(2) for every file; or by writeback: a pass
// every second writes back (counts synced) each file whose first unsynced change is at
// least the writeback age old (--writeback-s, default 30 s as Linux's
// dirty_expire_centisecs; `set writeback-s` at run time; 0: never). So a crash drops the
// unsynced writes of the files whose first unsynced change is younger than the writeback
// age (or up to a second older), and with an age of 0 every write not fsynced. Nothing is written back once crashed.
//
// `crash torn` is a power loss in the middle of a write: in each file, the write in flight
// is the last one since the file's last sync that ended past its synced size, and every
// write before it reached the disk. So the unsynced tail before that write stays, the write
// keeps the first half of its unsynced part (one byte less when that half would end on a
// 512-byte sector boundary), and the rest of it and anything after it (a later extending
// truncate) is lost; overwritten synced bytes get their synced values back. A file with no
// such write (grown by extending truncates alone, or not grown) is rolled back as by a plain
// crash. A write here is a WRITE request: the kernel sends a write(2) as one, but splits it
// into pieces of at most 128 KiB, and (as recent Linux does, 6.18 among them) at the end of
// its first page when it starts inside a page the kernel has not cached whole; then its
// last piece is the one cut in its middle, still inside the write(2). Kafka appends one
// record batch per write(2), so the cut falls inside its last batch: a torn batch for its
// recovery to find.
//
// Limitations: metadata operations (create, rename, unlink, mkdir) are durable at once, and
// directory fsync has no effect; a crash only rolls back file contents. Writeback goes by
// age alone and takes a whole file at once: Linux also writes back early (memory pressure,
// dirty_background_ratio) and may have written part of a file's pages when the power goes,
// so a real crash can keep more than chaosfs does. A file's writeback clock starts at its
// first content change, not at its creation as Linux's may. Writes that sit in the
// kernel's page cache over the mount (mmapped pages) reach chaosfs, and start its clock,
// only when the kernel writes them back. Pre-images are kept in memory. Data already in the
// kernel's page cache of files that were not rolled back may still be read after a crash;
// every request that reaches chaosfs fails.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usageText = `usage:
  chaosfs serve --backing DIR --mount DIR --control SOCKET [--writeback-s S]
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
