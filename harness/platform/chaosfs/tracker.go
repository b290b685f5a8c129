package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// fileKey names a backing file by device and inode, so its state survives renames.
type fileKey struct{ dev, ino uint64 }

func keyOf(st *unix.Stat_t) fileKey { return fileKey{dev: uint64(st.Dev), ino: st.Ino} }

// osFile is a backing file as a journal's File.
type osFile struct{ *os.File }

// Size is the file's size from fstat.
func (f osFile) Size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// source says how to reach a file that is not tracked yet: by the descriptor of an open
// handle (reopened through /proc, which follows renames), else by its backing path.
type source struct {
	fd    int
	path  string
	inode *fs.Inode // the kernel's view of it, whose cache a crash drops; nil if unknown
}

// open opens the file read-write for the tracker's own descriptor, which lets a rollback
// reach the file after a rename and read the pre-images whatever the handle's mode.
func (s source) open() (*os.File, error) {
	p := s.path
	if p == "" {
		p = "/proc/self/fd/" + strconv.Itoa(s.fd)
	}
	return os.OpenFile(p, os.O_RDWR|unix.O_CLOEXEC, 0)
}

// record is one tracked file: the tracker's descriptor, the file's journal, and when it
// became dirty.
type record struct {
	file    *os.File
	journal *Journal
	inode   *fs.Inode
	// dirty is the time of the file's first unsynced change since it was last synced or
	// written back (zero: none yet, as for a file that was only created): the writeback
	// age is counted from it, as Linux counts an inode's dirtied_when.
	dirty time.Time
}

// Clock answers the current time. The tracker reads it at a file's first unsynced change
// and at each writeback pass, and only compares its answers with one another, so tests can
// pass a fake clock and advance it instead of sleeping. time.Now is the real one. A
// writeback pass reads it outside the tracker's lock, so it must be safe for concurrent
// use (as time.Now is; a test's fake clock is advanced by the test's one goroutine).
type Clock func() time.Time

// Tracker holds the journals of the files mutated since their last sync. Its methods are
// safe for concurrent use; each mutation runs under its lock so the pre-image and the
// write are one step (the backing writes are short: no fsync is done under it).
type Tracker struct {
	mu    sync.Mutex
	files map[fileKey]*record
	clock Clock
}

// NewTracker is a tracker with no file tracked, dating dirty files by `clock`.
func NewTracker(clock Clock) *Tracker {
	return &Tracker{files: map[fileKey]*record{}, clock: clock}
}

// get is the record of key, tracking the file from `src` at this, its first mutation since
// its last sync: its current content counts as synced. The caller holds t.mu.
func (t *Tracker) get(key fileKey, src source) (*record, error) {
	if r, ok := t.files[key]; ok {
		if r.inode == nil {
			r.inode = src.inode
		}
		return r, nil
	}
	f, err := src.open()
	if err != nil {
		return nil, err
	}
	j, err := Track(osFile{f})
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &record{file: f, journal: j, inode: src.inode}
	t.files[key] = r
	return r, nil
}

// dirtied is the record of key as get answers it, dated dirty now unless it was dirty
// already: for every mutation of the file's content or size. The caller holds t.mu.
func (t *Tracker) dirtied(key fileKey, src source) (*record, error) {
	r, err := t.get(key, src)
	if err == nil && r.dirty.IsZero() {
		r.dirty = t.clock()
	}
	return r, err
}

// Track makes a just-created file tracked (empty, synced size 0), so a crash before its
// first fsync leaves it empty. It is not dirty until its first write: its creation is
// durable at once (see the package comment) and its empty content has nothing to lose.
func (t *Tracker) Track(key fileKey, src source) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.get(key, src)
	return err
}

// Write writes p at off into the file, saving the pre-image of synced bytes it overwrites.
func (t *Tracker) Write(key fileKey, src source, p []byte, off int64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.dirtied(key, src)
	if err != nil {
		return 0, err
	}
	return r.journal.Write(p, off)
}

// Truncate sets the file's size, saving the synced bytes a shrink cuts off.
func (t *Tracker) Truncate(key fileKey, src source, size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.dirtied(key, src)
	if err != nil {
		return err
	}
	return r.journal.Truncate(size)
}

// Modify runs op on the tracker's descriptor of the file after saving the pre-image of
// [off, off+length) (length 0: op changes no content), then re-reads the file's size: for
// mutations the journal cannot perform itself (fallocate).
func (t *Tracker) Modify(key fileKey, src source, off, length int64, op func(fd int) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.dirtied(key, src)
	if err != nil {
		return err
	}
	if err := r.journal.Preserve(off, length); err != nil {
		return err
	}
	opErr := op(int(r.file.Fd()))
	return errors.Join(opErr, r.journal.Refresh())
}

// Synced forgets the file after a successful fsync: what it holds now is durable.
func (t *Tracker) Synced(key fileKey) { t.Forget(key) }

// Forget stops tracking the file and closes the tracker's descriptor: after a sync, or
// when its last name is removed (nobody can see it after a crash, and its journal would
// hold memory and keep the inode alive).
func (t *Tracker) Forget(key fileKey) {
	t.mu.Lock()
	r, ok := t.files[key]
	delete(t.files, key)
	t.mu.Unlock()
	if ok {
		r.file.Close()
	}
}

// SyncAll is sync(2) for the tracked files: each counts as synced now (what it holds is
// durable, its pre-images are dropped) and is untracked. It answers how many files that
// was and the bytes that became durable (as Stats counts them). Nothing of the backing
// dir is synced: durability here is the tracker's alone.
func (t *Tracker) SyncAll() (files int, synced int64) {
	return t.release(func(*record) bool { return true })
}

// WriteBack is one pass of the kernel's writeback: every file dirty for at least `age` by
// the tracker's clock counts as synced and is untracked (its next change starts a new
// clock). It answers how many files that was and the bytes that became durable. Like
// Linux it writes back whole files (inodes), never part of one.
func (t *Tracker) WriteBack(age time.Duration) (files int, synced int64) {
	now := t.clock()
	return t.release(func(r *record) bool {
		return !r.dirty.IsZero() && now.Sub(r.dirty) >= age
	})
}

// release untracks every file for which `durable` holds, as a sync of each would, and
// answers their count and unsynced bytes. The descriptors are closed after the lock.
func (t *Tracker) release(durable func(*record) bool) (files int, synced int64) {
	var done []*record
	t.mu.Lock()
	for key, r := range t.files {
		if durable(r) {
			synced += r.journal.Unsynced()
			done = append(done, r)
			delete(t.files, key)
		}
	}
	t.mu.Unlock()
	for _, r := range done {
		r.file.Close()
	}
	return len(done), synced
}

// Stats is the number of tracked files and the bytes a crash would drop now.
func (t *Tracker) Stats() (files int, unsynced int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.files {
		unsynced += r.journal.Unsynced()
	}
	return len(t.files), unsynced
}

// FileReport is what a crash did to one file.
type FileReport struct {
	Path          string `json:"path"`
	SyncedSize    int64  `json:"synced_size"`
	SizeBefore    int64  `json:"size_before"`
	SizeAfter     int64  `json:"size_after"`
	RestoredBytes int64  `json:"restored_bytes"`
}

// CrashReport is the reply to `crash`: every file rolled back, the unsynced tail bytes
// dropped in all (the restored pre-images are counted per file), and the writeback age that
// was in force, which says how old the dropped writes can have been.
type CrashReport struct {
	OK           bool         `json:"ok"`
	Torn         bool         `json:"torn"`
	WritebackS   int64        `json:"writeback_s"` // the writeback age in force (0: none)
	Files        []FileReport `json:"files"`
	DroppedBytes int64        `json:"dropped_bytes"`
	Error        string       `json:"error,omitempty"`
}

// RollbackAll rolls every tracked file back to its last sync (torn: keeping its unsynced
// tail up to the middle of its last write, see TornCut) and forgets them all. Files unlinked since are skipped: nobody can see them. Paths
// are relative to `root` (the backing dir). It also answers the kernel inodes whose cache
// should be dropped. The caller must exclude every other mutation meanwhile.
func (t *Tracker) RollbackAll(torn bool, root string) (CrashReport, []*fs.Inode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	report := CrashReport{OK: true, Torn: torn, Files: []FileReport{}}
	var inodes []*fs.Inode
	var errs []error
	for key, r := range t.files {
		delete(t.files, key)
		fr, skipped, err := rollback(r, torn, root)
		r.file.Close()
		if err != nil {
			errs = append(errs, err)
		}
		if skipped {
			continue
		}
		report.Files = append(report.Files, fr)
		report.DroppedBytes += max(0, fr.SizeBefore-fr.SizeAfter)
		if r.inode != nil {
			inodes = append(inodes, r.inode)
		}
	}
	sort.Slice(report.Files, func(i, j int) bool { return report.Files[i].Path < report.Files[j].Path })
	if err := errors.Join(errs...); err != nil {
		report.OK, report.Error = false, err.Error()
	}
	return report, inodes
}

// rollback rolls one tracked file back; skipped when it is unlinked.
func rollback(r *record, torn bool, root string) (FileReport, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(r.file.Fd()), &st); err != nil {
		return FileReport{}, true, err
	}
	if st.Nlink == 0 {
		return FileReport{}, true, nil
	}
	path := relativePath(int(r.file.Fd()), root)
	out, err := r.journal.Rollback(torn)
	if err != nil {
		err = fmt.Errorf("rolling back %q: %w", path, err)
	}
	return FileReport{
		Path: path, SyncedSize: out.Synced, SizeBefore: out.Before, SizeAfter: out.After,
		RestoredBytes: out.Restored,
	}, false, err
}

// relativePath is the file's current path relative to root, as the kernel names the open
// descriptor (renames included); "" when it is not under root.
func relativePath(fd int, root string) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(root, strings.TrimSuffix(p, " (deleted)"))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return rel
}
