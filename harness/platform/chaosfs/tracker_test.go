package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// backingFile creates a file with content in a temporary backing dir and answers its
// target, as the FUSE layer would take it from a path.
func backingFile(t *testing.T, dir, name string, content []byte) target {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	tg, errno := statTarget(path, nil)
	if errno != 0 {
		t.Fatal(errno)
	}
	return tg
}

func readBacking(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRollbackReachesARenamedFile(t *testing.T) {
	dir := t.TempDir()
	tg := backingFile(t, dir, "segment.log", []byte("synced"))
	tr := NewTracker(time.Now)
	if _, err := tr.Write(tg.key, tg.src, []byte("unsynced tail"), 6); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(tg.key, tg.src, []byte("S"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "segment.log"), filepath.Join(dir, "segment.log.deleted")); err != nil {
		t.Fatal(err)
	}
	report, _ := tr.RollbackAll(false, dir)
	if got := readBacking(t, filepath.Join(dir, "segment.log.deleted")); string(got) != "synced" {
		t.Fatalf("renamed file holds %q after the crash", got)
	}
	want := FileReport{Path: "segment.log.deleted", SyncedSize: 6, SizeBefore: 19, SizeAfter: 6, RestoredBytes: 1}
	if !report.OK || len(report.Files) != 1 || report.Files[0] != want || report.DroppedBytes != 13 {
		t.Fatalf("report %+v", report)
	}
	if files, _ := tr.Stats(); files != 0 {
		t.Fatalf("%d files still tracked after the crash", files)
	}
}

func TestUnlinkedFilesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	tg := backingFile(t, dir, "gone", []byte("x"))
	tr := NewTracker(time.Now)
	if _, err := tr.Write(tg.key, tg.src, []byte("more"), 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	report, _ := tr.RollbackAll(true, dir)
	if !report.OK || len(report.Files) != 0 {
		t.Fatalf("report %+v", report)
	}
}

func TestSyncedFilesAreUntouched(t *testing.T) {
	dir := t.TempDir()
	tg := backingFile(t, dir, "synced", []byte("old"))
	tr := NewTracker(time.Now)
	if err := tr.Truncate(tg.key, tg.src, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(tg.key, tg.src, []byte("new content"), 0); err != nil {
		t.Fatal(err)
	}
	if files, unsynced := tr.Stats(); files != 1 || unsynced != (11-3)+3 { // the tail past the synced 3 bytes, and their pre-image
		t.Fatalf("stats %d files, %d bytes; want 1, 11", files, unsynced)
	}
	tr.Synced(tg.key)
	report, _ := tr.RollbackAll(false, dir)
	if len(report.Files) != 0 || string(readBacking(t, filepath.Join(dir, "synced"))) != "new content" {
		t.Fatalf("a synced file was rolled back: %+v", report)
	}
}

func TestCreatedFilesEmptyOnCrash(t *testing.T) {
	dir := t.TempDir()
	tg := backingFile(t, dir, "new", nil)
	tr := NewTracker(time.Now)
	if err := tr.Track(tg.key, tg.src); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(tg.key, tg.src, bytes.Repeat([]byte{'a'}, 3000), 0); err != nil {
		t.Fatal(err)
	}
	report, _ := tr.RollbackAll(false, dir)
	if got := readBacking(t, filepath.Join(dir, "new")); len(got) != 0 || report.Files[0].SizeAfter != 0 {
		t.Fatalf("created file holds %d bytes after a crash: %+v", len(got), report)
	}
}

func TestTornCrashTearsEachFilesLastWrite(t *testing.T) {
	dir := t.TempDir()
	created := backingFile(t, dir, "created", nil)
	grown := backingFile(t, dir, "grown", []byte("synced"))
	patched := backingFile(t, dir, "patched", []byte("0123456789"))
	tr := NewTracker(time.Now)
	if err := tr.Track(created.key, created.src); err != nil {
		t.Fatal(err)
	}
	write(t, tr, created, strings.Repeat("a", 2000), 0)
	write(t, tr, created, strings.Repeat("b", 1000), 2000)
	write(t, tr, grown, " written", 6)
	tr.Synced(grown.key) // its write is durable: no write past its synced size since
	if err := tr.Truncate(grown.key, grown.src, 4096); err != nil {
		t.Fatal(err)
	}
	write(t, tr, patched, "ab", 4) // inside the synced part: restored, nothing to tear
	report, _ := tr.RollbackAll(true, dir)
	// created: its last write torn; grown: grown by a truncate alone, lost whole.
	want := map[string]string{
		"created": strings.Repeat("a", 2000) + strings.Repeat("b", 500),
		"grown":   "synced written",
		"patched": "0123456789",
	}
	for name := range want {
		if got := readBacking(t, filepath.Join(dir, name)); string(got) != want[name] {
			t.Errorf("%s holds %d bytes after a torn crash, want %d", name, len(got), len(want[name]))
		}
	}
	sizes := []int64{}
	for _, f := range report.Files {
		sizes = append(sizes, f.SizeAfter)
	}
	if !report.OK || !report.Torn || fmt.Sprint(sizes) != "[2500 14 10]" {
		t.Fatalf("report %+v", report)
	}
}

func TestModifyPreservesPunchedHoles(t *testing.T) {
	dir := t.TempDir()
	tg := backingFile(t, dir, "holes", bytes.Repeat([]byte{'d'}, 8192))
	tr := NewTracker(time.Now)
	punch := func(fd int) error {
		return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096)
	}
	if err := tr.Modify(tg.key, tg.src, 0, 4096, punch); err != nil {
		t.Fatalf("punching a hole: %v", err)
	}
	if got := readBacking(t, filepath.Join(dir, "holes")); got[0] != 0 {
		t.Fatal("the hole was not punched")
	}
	tr.RollbackAll(false, dir)
	if got := readBacking(t, filepath.Join(dir, "holes")); !bytes.Equal(got, bytes.Repeat([]byte{'d'}, 8192)) {
		t.Fatal("the punched range was not restored")
	}
}
