package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	good := map[string]command{
		"status":                {verb: "status"},
		"  heal ":               {verb: "heal"},
		"crash":                 {verb: "crash"},
		"crash torn":            {verb: "crash", torn: true},
		"set fsync-error on":    {verb: "set", knob: "fsync-error", on: true},
		"set disk-full off":     {verb: "set", knob: "disk-full"},
		"set write-delay 200":   {verb: "set", knob: "write-delay", ms: 200},
		"set fsync-delay 60000": {verb: "set", knob: "fsync-delay", ms: 60000},
		"sync":                  {verb: "sync"},
		"set writeback-s 0":     {verb: "set", knob: "writeback-s"},
		"set writeback-s 3600":  {verb: "set", knob: "writeback-s", seconds: 3600},
	}
	for line, want := range good {
		if got, err := parseCommand(line); err != nil || got != want {
			t.Errorf("parseCommand(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	bad := []string{
		"", "explode", "crash now", "status please", "set", "set disk-full", "set disk-full yes",
		"set write-delay -1", "set write-delay 60001", "set write-delay 2s", "set colour red",
		"sync now", "set writeback-s -1", "set writeback-s 3601", "set writeback-s 30s",
	}
	for _, line := range bad {
		_, err := parseCommand(line)
		if err == nil || !strings.Contains(err.Error(), "accepted:") {
			t.Errorf("parseCommand(%q): %v; want an error naming the accepted forms", line, err)
		}
	}
}

// reply executes a line and decodes its reply as generic JSON.
func reply(t *testing.T, c *chaosFS, line string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(c.execute(line))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExecuteSetsAndHeals(t *testing.T) {
	c := newChaosFS(t.TempDir(), 0, time.Now)
	for _, line := range []string{"set fsync-error on", "set disk-full on", "set write-delay 5", "set fsync-delay 7"} {
		if r := reply(t, c, line); r["ok"] != true {
			t.Fatalf("%s: %v", line, r)
		}
	}
	want := Mode{FsyncError: true, DiskFull: true, WriteDelayMS: 5, FsyncDelayMS: 7}
	if got := c.faults.Mode(); got != want {
		t.Fatalf("mode %+v, want %+v", got, want)
	}
	r := reply(t, c, "heal")
	if mode := r["mode"].(map[string]any); r["ok"] != true || mode["disk_full"] != false || mode["write_delay_ms"] != 0.0 {
		t.Fatalf("heal: %v", r)
	}
	if r := reply(t, c, "bogus"); r["ok"] != false || !strings.Contains(r["error"].(string), "crash torn") {
		t.Fatalf("bogus: %v", r)
	}
}

func TestStatusAndCrash(t *testing.T) {
	dir := t.TempDir()
	c := newChaosFS(dir, 0, time.Now)
	tg := backingFile(t, dir, "f", []byte("0123456789"))
	if _, err := c.tracker.Write(tg.key, tg.src, []byte("ab"), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.tracker.Write(tg.key, tg.src, []byte("tail"), 10); err != nil {
		t.Fatal(err)
	}
	r := reply(t, c, "status")
	if r["tracked_files"] != 1.0 || r["unsynced_bytes"] != 6.0 {
		t.Fatalf("status: %v", r)
	}
	r = reply(t, c, "crash")
	files := r["files"].([]any)
	if r["ok"] != true || len(files) != 1 || r["dropped_bytes"] != 4.0 || !c.faults.crashed.Load() {
		t.Fatalf("crash: %v", r)
	}
	if got := readBacking(t, filepath.Join(dir, "f")); string(got) != "0123456789" {
		t.Fatalf("after the crash: %q", got)
	}
	if c.enter() {
		t.Fatal("a mutation entered the gate after the crash")
	}
	if r := reply(t, c, "heal"); r["mode"].(map[string]any)["crashed"] != true {
		t.Fatalf("heal un-crashed the file system: %v", r)
	}
}

func TestCtlExitCodes(t *testing.T) {
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no.sock")
	if code := run([]string{"ctl", "--control", missing, "status"}, &out, &errOut); code != 2 {
		t.Fatalf("unreachable socket: exit %d", code)
	}
	if !strings.Contains(errOut.String(), "cannot reach") {
		t.Fatalf("stderr %q", errOut.String())
	}
	if code := run([]string{"ctl", "--control", missing}, &out, &errOut); code != 2 {
		t.Fatalf("no command: exit %d", code)
	}
	if code := run(nil, &out, &errOut); code != 2 {
		t.Fatalf("no subcommand: exit %d", code)
	}
}

func TestControlSocketRoundTrip(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "ctl.sock")
	l, err := listenControl(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := newChaosFS(dir, 0, time.Now)
	go c.serveControl(l)
	if _, err := listenControl(socket); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a live socket was taken over: %v", err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"ctl", "--control", socket, "set", "disk-full", "on"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if !c.faults.diskFull.Load() || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("reply %q", out.String())
	}
	out.Reset()
	if code := run([]string{"ctl", "--control", socket, "set", "disk-full", "maybe"}, &out, &errOut); code != 1 {
		t.Fatalf("bad argument: exit %d", code)
	}
}
