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

// record is one tracked file: the tracker's descriptor and the file's journal.
type record struct {
	file    *os.File
	journal *Journal
	inode   *fs.Inode
}

// Tracker holds the journals of the files mutated since their last sync. Its methods are
// safe for concurrent use; each mutation runs under its lock so the pre-image and the
// write are one step (the backing writes are short: no fsync is done under it).
type Tracker struct {
	mu    sync.Mutex
	files map[fileKey]*record
}

// NewTracker is a tracker with no file tracked.
func NewTracker() *Tracker { return &Tracker{files: map[fileKey]*record{}} }

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

// Track makes a just-created file tracked (empty, synced size 0), so a crash before its
// first fsync leaves it empty.
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
	r, err := t.get(key, src)
	if err != nil {
		return 0, err
	}
	return r.journal.Write(p, off)
}

// Truncate sets the file's size, saving the synced bytes a shrink cuts off.
func (t *Tracker) Truncate(key fileKey, src source, size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.get(key, src)
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
	r, err := t.get(key, src)
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

// CrashReport is the reply to `crash`: every file rolled back, and the unsynced tail bytes
// dropped in all (the restored pre-images are counted per file).
type CrashReport struct {
	OK           bool         `json:"ok"`
	Torn         bool         `json:"torn"`
	Files        []FileReport `json:"files"`
	DroppedBytes int64        `json:"dropped_bytes"`
	Error        string       `json:"error,omitempty"`
}

// RollbackAll rolls every tracked file back to its last sync (torn: keeping part of its
// tail) and forgets them all. Files unlinked since are skipped: nobody can see them. Paths
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
