package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct{ now time.Time }

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (f *fakeClock) Now() time.Time { return f.now }

func (f *fakeClock) advance(d time.Duration) { f.now = f.now.Add(d) }

const age = 30 * time.Second

// write writes p at off into the backing file tg through the tracker.
func write(t *testing.T, tr *Tracker, tg target, p string, off int64) {
	t.Helper()
	if _, err := tr.Write(tg.key, tg.src, []byte(p), off); err != nil {
		t.Fatal(err)
	}
}

// crashContents rolls every tracked file back and answers each named file's content.
func crashContents(t *testing.T, tr *Tracker, dir string, names ...string) map[string]string {
	t.Helper()
	if report, _ := tr.RollbackAll(false, dir); !report.OK {
		t.Fatalf("rollback: %+v", report)
	}
	got := map[string]string{}
	for _, name := range names {
		got[name] = string(readBacking(t, filepath.Join(dir, name)))
	}
	return got
}

func TestWritebackTakesOnlyFilesDirtyForTheAge(t *testing.T) {
	dir, clock := t.TempDir(), newFakeClock()
	tr := NewTracker(clock.Now)
	old := backingFile(t, dir, "old", []byte("synced"))
	exact := backingFile(t, dir, "exact", []byte("synced"))
	young := backingFile(t, dir, "young", []byte("synced"))
	write(t, tr, old, " old tail", 6)
	write(t, tr, old, "S", 0) // a pre-image: it is dropped by the writeback too
	clock.advance(5 * time.Second)
	write(t, tr, exact, " exact tail", 6)
	clock.advance(20 * time.Second)
	write(t, tr, young, " young tail", 6)
	write(t, tr, old, "!", 15) // a later change does not move the first one's clock
	clock.advance(age - 20*time.Second)

	if files, synced := tr.WriteBack(age); files != 2 || synced != 11+11 {
		t.Fatalf("written back %d files, %d bytes; want old and exact, 22 bytes", files, synced)
	}
	if files, unsynced := tr.Stats(); files != 1 || unsynced != 11 {
		t.Fatalf("still tracked: %d files, %d bytes; want young's 11", files, unsynced)
	}
	got := crashContents(t, tr, dir, "old", "exact", "young")
	want := map[string]string{"old": "Synced old tail!", "exact": "synced exact tail", "young": "synced"}
	for name := range want {
		if got[name] != want[name] {
			t.Errorf("%s holds %q after the crash, want %q", name, got[name], want[name])
		}
	}
}

func TestRedirtiedFileGetsANewClock(t *testing.T) {
	dir, clock := t.TempDir(), newFakeClock()
	tr := NewTracker(clock.Now)
	tg := backingFile(t, dir, "f", nil)
	write(t, tr, tg, "first", 0)
	clock.advance(age)
	if files, _ := tr.WriteBack(age); files != 1 {
		t.Fatalf("written back %d files, want 1", files)
	}
	clock.advance(10 * age) // clean meanwhile: its next change starts a new clock
	write(t, tr, tg, "FIRST second", 0)
	clock.advance(age - time.Nanosecond)
	if files, _ := tr.WriteBack(age); files != 0 {
		t.Fatalf("a file re-dirtied %v ago was written back", age-time.Nanosecond)
	}
	if got := crashContents(t, tr, dir, "f"); got["f"] != "first" {
		t.Fatalf("after the crash: %q, want what was written back", got["f"])
	}
}

func TestCreatedFileIsDirtyFromItsFirstWrite(t *testing.T) {
	dir, clock := t.TempDir(), newFakeClock()
	tr := NewTracker(clock.Now)
	tg := backingFile(t, dir, "new", nil)
	if err := tr.Track(tg.key, tg.src); err != nil {
		t.Fatal(err)
	}
	clock.advance(age)
	if files, _ := tr.WriteBack(age); files != 0 {
		t.Fatal("a created, unwritten file was written back: its first write would be durable early")
	}
	write(t, tr, tg, "data", 0)
	clock.advance(age / 2)
	if got := crashContents(t, tr, dir, "new"); got["new"] != "" {
		t.Fatalf("after the crash: %q, want empty", got["new"])
	}
}

func TestSyncAllMakesEverythingDurable(t *testing.T) {
	dir := t.TempDir()
	tr := NewTracker(newFakeClock().Now)
	a := backingFile(t, dir, "a", []byte("0123456789"))
	b := backingFile(t, dir, "b", nil)
	write(t, tr, a, "xy", 2)
	if err := tr.Truncate(a.key, a.src, 8); err != nil {
		t.Fatal(err)
	}
	write(t, tr, b, strings.Repeat("b", 700), 0)
	_, unsynced := tr.Stats()
	if files, synced := tr.SyncAll(); files != 2 || synced != unsynced {
		t.Fatalf("synced %d files, %d bytes; want 2, %d", files, synced, unsynced)
	}
	if files, unsynced := tr.Stats(); files != 0 || unsynced != 0 {
		t.Fatalf("after sync: %d files, %d bytes tracked", files, unsynced)
	}
	write(t, tr, b, "after", 700) // after the sync: lost
	got := crashContents(t, tr, dir, "a", "b")
	if got["a"] != "01xy4567" || got["b"] != strings.Repeat("b", 700) {
		t.Fatalf("after the crash: %q", got)
	}
}

func TestWritebackPassAndCommands(t *testing.T) {
	dir, clock := t.TempDir(), newFakeClock()
	c := newChaosFS(dir, 0, clock.Now)
	tg := backingFile(t, dir, "f", []byte("synced"))
	write(t, c.tracker, tg, " lost", 6)
	clock.advance(time.Hour)
	if c.writeback() != 0 {
		t.Fatal("written back with the writeback age 0")
	}
	r := reply(t, c, "set writeback-s 5")
	if r["ok"] != true || r["mode"].(map[string]any)["writeback_s"] != 5.0 {
		t.Fatalf("set writeback-s: %v", r)
	}
	if c.writeback() != 1 {
		t.Fatal("a file dirty for an hour was not written back")
	}
	write(t, c.tracker, tg, " kept?", 11)
	clock.advance(4 * time.Second)
	c.writeback()
	r = reply(t, c, "status")
	if r["written_back"] != 1.0 || r["tracked_files"] != 1.0 || r["mode"].(map[string]any)["writeback_s"] != 5.0 {
		t.Fatalf("status: %v", r)
	}
	r = reply(t, c, "crash")
	if r["writeback_s"] != 5.0 || r["dropped_bytes"] != 6.0 {
		t.Fatalf("crash: %v", r)
	}
	if got := readBacking(t, filepath.Join(dir, "f")); !bytes.Equal(got, []byte("synced lost")) {
		t.Fatalf("after the crash: %q", got)
	}
	write(t, c.tracker, tg, "X", 0) // as if a write had slipped in: no pass may take it now
	clock.advance(time.Hour)
	if c.writeback() != 0 || c.faults.writtenBack.Load() != 1 || c.faults.failed.Load() != 0 {
		t.Fatal("a writeback pass ran after the crash, or counted a failed operation")
	}
	if r := reply(t, c, "sync"); r["ok"] != false || !strings.Contains(r["error"].(string), "crashed") {
		t.Fatalf("sync after the crash: %v", r)
	}
}

func TestSyncCommand(t *testing.T) {
	dir := t.TempDir()
	c := newChaosFS(dir, 0, time.Now)
	tg := backingFile(t, dir, "f", []byte("0123456789"))
	write(t, c.tracker, tg, "ab", 4)
	write(t, c.tracker, tg, "tail", 10)
	r := reply(t, c, "sync")
	if r["ok"] != true || r["synced_files"] != 1.0 || r["synced_bytes"] != 6.0 {
		t.Fatalf("sync: %v", r)
	}
	if r := reply(t, c, "crash"); len(r["files"].([]any)) != 0 || r["writeback_s"] != 0.0 {
		t.Fatalf("crash after sync: %v", r)
	}
	if got := readBacking(t, filepath.Join(dir, "f")); string(got) != "0123ab6789tail" {
		t.Fatalf("after the crash: %q", got)
	}
}

func TestParseServe(t *testing.T) {
	base := []string{"--backing", "b", "--mount", "m", "--control", "c"}
	var errOut bytes.Buffer
	cfg, ok := parseServe(base, &errOut)
	want := serveConfig{backing: "b", mount: "m", control: "c", writebackS: defaultWritebackS}
	if !ok || cfg != want || defaultWritebackS != 30 {
		t.Fatalf("defaults: %+v, %v", cfg, ok)
	}
	if cfg, ok := parseServe(append(base, "--writeback-s", "0"), &errOut); !ok || cfg.writebackS != 0 {
		t.Fatalf("--writeback-s 0: %+v, %v", cfg, ok)
	}
	for _, bad := range []string{"-1", "3601", "soon"} {
		errOut.Reset()
		if _, ok := parseServe(append(base, "--writeback-s", bad), &errOut); ok || errOut.Len() == 0 {
			t.Errorf("--writeback-s %s was accepted", bad)
		}
	}
	if _, ok := parseServe(base[:4], &errOut); ok {
		t.Error("serve without --control was accepted")
	}
}
