package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// maxDelayMS bounds the slow-disk delays: a minute per operation is already a hung disk.
const maxDelayMS = 60_000

// maxWritebackS bounds the writeback age: an hour is already "never" for a chaos run.
const maxWritebackS = 3600

// accepted lists the control commands, for error replies and usage.
const accepted = `accepted: "status", "sync", "crash", "crash torn", "set fsync-error on|off", ` +
	`"set disk-full on|off", "set write-delay MS", "set fsync-delay MS" (MS 0..60000), ` +
	`"set writeback-s S" (S 0..3600, 0: never), "heal"`

// Faults is the injected fault state, the writeback age and the counters, read by every
// operation without a lock (atomics), written by the control socket.
type Faults struct {
	fsyncError   atomic.Bool
	diskFull     atomic.Bool
	writeDelayMS atomic.Int64
	fsyncDelayMS atomic.Int64
	crashed      atomic.Bool
	writebackS   atomic.Int64 // a file dirty this long is written back; 0: never

	writes      atomic.Int64 // WRITE requests performed
	fsyncs      atomic.Int64 // file FSYNCs that succeeded (and marked the file synced)
	failed      atomic.Int64 // operations failed by an injected fault (EIO, ENOSPC)
	writtenBack atomic.Int64 // files the writeback passes marked synced
}

// Mode is the fault state as the control socket reports it.
type Mode struct {
	FsyncError   bool  `json:"fsync_error"`
	DiskFull     bool  `json:"disk_full"`
	WriteDelayMS int64 `json:"write_delay_ms"`
	FsyncDelayMS int64 `json:"fsync_delay_ms"`
	Crashed      bool  `json:"crashed"`
	WritebackS   int64 `json:"writeback_s"`
}

// Mode is a snapshot of the fault state.
func (f *Faults) Mode() Mode {
	return Mode{
		FsyncError: f.fsyncError.Load(), DiskFull: f.diskFull.Load(),
		WriteDelayMS: f.writeDelayMS.Load(), FsyncDelayMS: f.fsyncDelayMS.Load(),
		Crashed: f.crashed.Load(), WritebackS: f.writebackS.Load(),
	}
}

// fail counts an operation failed by an injected fault and answers its errno.
func (f *Faults) fail(errno syscall.Errno) syscall.Errno {
	f.failed.Add(1)
	return errno
}

// command is one parsed control line.
type command struct {
	verb    string // status, sync, crash, set, heal
	torn    bool   // crash torn
	knob    string // set: fsync-error, disk-full, write-delay, fsync-delay, writeback-s
	on      bool   // set fsync-error|disk-full
	ms      int64  // set write-delay|fsync-delay
	seconds int64  // set writeback-s
}

// parseCommand parses a control line; the error names the problem and the accepted forms.
func parseCommand(line string) (command, error) {
	words := strings.Fields(line)
	if len(words) == 0 {
		return command{}, fmt.Errorf("empty command; %s", accepted)
	}
	switch cmd := (command{verb: words[0]}); {
	case len(words) == 1 && (cmd.verb == "status" || cmd.verb == "sync" || cmd.verb == "heal" ||
		cmd.verb == "crash"):
		return cmd, nil
	case len(words) == 2 && cmd.verb == "crash" && words[1] == "torn":
		cmd.torn = true
		return cmd, nil
	case len(words) == 3 && cmd.verb == "set":
		return parseSet(words[1], words[2])
	}
	return command{}, fmt.Errorf("unknown command %q; %s", line, accepted)
}

// parseSet parses the knob and value of a `set` command.
func parseSet(knob, value string) (command, error) {
	cmd := command{verb: "set", knob: knob}
	switch knob {
	case "fsync-error", "disk-full":
		if value != "on" && value != "off" {
			return command{}, fmt.Errorf("set %s takes on or off, not %q; %s", knob, value, accepted)
		}
		cmd.on = value == "on"
	case "write-delay", "fsync-delay":
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms < 0 || ms > maxDelayMS {
			return command{}, fmt.Errorf("set %s takes milliseconds 0..%d, not %q; %s",
				knob, maxDelayMS, value, accepted)
		}
		cmd.ms = ms
	case "writeback-s":
		seconds, err := strconv.ParseInt(value, 10, 64)
		if err != nil || seconds < 0 || seconds > maxWritebackS {
			return command{}, fmt.Errorf("set writeback-s takes seconds 0..%d, not %q; %s",
				maxWritebackS, value, accepted)
		}
		cmd.seconds = seconds
	default:
		return command{}, fmt.Errorf("unknown setting %q; %s", knob, accepted)
	}
	return cmd, nil
}

// modeReply answers set and heal.
type modeReply struct {
	OK   bool `json:"ok"`
	Mode Mode `json:"mode"`
}

// statusReply answers status.
type statusReply struct {
	OK            bool  `json:"ok"`
	Mode          Mode  `json:"mode"`
	TrackedFiles  int   `json:"tracked_files"`
	UnsyncedBytes int64 `json:"unsynced_bytes"`
	Writes        int64 `json:"writes"`
	Fsyncs        int64 `json:"fsyncs"`
	FailedOps     int64 `json:"failed_ops"`
	WrittenBack   int64 `json:"written_back"`
}

// syncReply answers sync: the files that became durable and their unsynced bytes.
type syncReply struct {
	OK          bool  `json:"ok"`
	SyncedFiles int   `json:"synced_files"`
	SyncedBytes int64 `json:"synced_bytes"`
}

// errorReply answers a command that could not be carried out.
type errorReply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// execute carries out one control line and answers its reply (marshalled as one line).
func (c *chaosFS) execute(line string) any {
	cmd, err := parseCommand(line)
	if err != nil {
		return errorReply{Error: err.Error()}
	}
	f := &c.faults
	switch cmd.verb {
	case "status":
		files, unsynced := c.tracker.Stats()
		return statusReply{
			OK: true, Mode: f.Mode(), TrackedFiles: files, UnsyncedBytes: unsynced,
			Writes: f.writes.Load(), Fsyncs: f.fsyncs.Load(), FailedOps: f.failed.Load(),
			WrittenBack: f.writtenBack.Load(),
		}
	case "sync":
		files, synced, ok := c.syncAll()
		if !ok {
			return errorReply{Error: "crashed: there is nothing left to sync"}
		}
		return syncReply{OK: true, SyncedFiles: files, SyncedBytes: synced}
	case "crash":
		return c.crash(cmd.torn)
	case "heal": // the faults only: the writeback age is no fault
		f.fsyncError.Store(false)
		f.diskFull.Store(false)
		f.writeDelayMS.Store(0)
		f.fsyncDelayMS.Store(0)
	default:
		c.set(cmd)
	}
	return modeReply{OK: true, Mode: f.Mode()}
}

// set applies a parsed `set` command.
func (c *chaosFS) set(cmd command) {
	f := &c.faults
	switch cmd.knob {
	case "fsync-error":
		f.fsyncError.Store(cmd.on)
	case "disk-full":
		f.diskFull.Store(cmd.on)
	case "write-delay":
		f.writeDelayMS.Store(cmd.ms)
	case "fsync-delay":
		f.fsyncDelayMS.Store(cmd.ms)
	case "writeback-s":
		f.writebackS.Store(cmd.seconds)
	}
}

// serveControl answers control connections until the listener is closed: each line read
// is one command, each answered by one line of JSON.
func (c *chaosFS) serveControl(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go c.serveConn(conn)
	}
}

// serveConn answers the commands of one connection until it closes.
func (c *chaosFS) serveConn(conn net.Conn) {
	defer conn.Close()
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		reply, err := json.Marshal(c.execute(lines.Text()))
		if err != nil {
			reply = []byte(`{"ok":false,"error":"cannot encode the reply"}`)
		}
		if _, err := conn.Write(append(reply, '\n')); err != nil {
			return
		}
	}
}

// ctlTimeout bounds a control exchange; a crash that rolls back much data takes a while.
const ctlTimeout = 5 * time.Minute

// sendCommand sends one command line to the control socket and answers the reply line.
func sendCommand(socket, line string) (string, error) {
	conn, err := net.DialTimeout("unix", socket, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ctlTimeout)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintln(conn, line); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no reply from %s: %w", socket, err)
	}
	return strings.TrimRight(reply, "\n"), nil
}

// replyOK is whether a reply line says "ok": true.
func replyOK(reply string) bool {
	var r struct {
		OK bool `json:"ok"`
	}
	return json.Unmarshal([]byte(reply), &r) == nil && r.OK
}
