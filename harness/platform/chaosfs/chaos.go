package main

import (
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// chaosFS is the state of one chaosfs mount: the backing dir, the faults, the tracked
// files, and the gate that keeps mutations and a crash apart.
//
// Every operation that changes the backing dir or what a crash would undo (a writeback
// pass, `sync`) holds gate shared, and checks `crashed` inside it; a crash holds it
// exclusively while it rolls back and sets `crashed`, so no write lands and nothing is
// written back between the rollback and the crashed state.
type chaosFS struct {
	backing string
	faults  Faults
	gate    sync.RWMutex
	tracker *Tracker
}

// newChaosFS is the state of a mount of `backing` whose files are written back once dirty
// for writebackS seconds (0: never), dated by `clock`.
func newChaosFS(backing string, writebackS int64, clock Clock) *chaosFS {
	c := &chaosFS{backing: backing, tracker: NewTracker(clock)}
	c.faults.writebackS.Store(writebackS)
	return c
}

// enter lets a mutating operation in: false once crashed (the caller answers EIO).
func (c *chaosFS) enter() bool {
	c.gate.RLock()
	if c.faults.crashed.Load() {
		c.gate.RUnlock()
		c.faults.failed.Add(1)
		return false
	}
	return true
}

// leave ends what enter began.
func (c *chaosFS) leave() { c.gate.RUnlock() }

// crashed is whether the file system is crashed (counted as a failed operation if so):
// for operations that change nothing and so need no gate.
func (c *chaosFS) crashed() bool {
	if c.faults.crashed.Load() {
		c.faults.failed.Add(1)
		return true
	}
	return false
}

// pause sleeps for a slow-disk delay of `ms` milliseconds (0: none); called before the gate
// is entered, so a slow disk never holds up a crash or a read.
func pause(ms int64) {
	if ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// writebackEvery is how often the writeback pass runs, so a file is written back between
// the writeback age and one second more after its first unsynced change (Linux checks
// every dirty_writeback_centisecs, 5 s by default).
const writebackEvery = time.Second

// writebackLoop runs a writeback pass every writebackEvery until stop is closed.
func (c *chaosFS) writebackLoop(stop <-chan struct{}) {
	tick := time.NewTicker(writebackEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			c.writeback()
		}
	}
}

// writeback is one writeback pass: every tracked file dirty for at least the writeback
// age counts as synced (see Tracker.WriteBack); it answers how many. Nothing is written
// back while the age is 0, nor once crashed (see whileLive).
func (c *chaosFS) writeback() (files int) {
	age := c.faults.writebackS.Load()
	if age == 0 {
		return 0
	}
	c.whileLive(func() {
		files, _ = c.tracker.WriteBack(time.Duration(age) * time.Second)
		c.faults.writtenBack.Add(int64(files))
	})
	return files
}

// syncAll is `sync`: every tracked file counts as synced now (see Tracker.SyncAll). It
// answers ok false once crashed: there is no machine left to sync.
func (c *chaosFS) syncAll() (files int, synced int64, ok bool) {
	ok = c.whileLive(func() { files, synced = c.tracker.SyncAll() })
	return files, synced, ok
}

// whileLive runs fn holding the gate shared unless crashed, and answers whether it ran:
// for chaosfs's own changes to what a crash would undo (a writeback pass, `sync`), which so
// happen wholly before a crash or not at all. They are no file operation, so unlike enter
// it counts no failed one.
func (c *chaosFS) whileLive(fn func()) bool {
	c.gate.RLock()
	defer c.gate.RUnlock()
	if c.faults.crashed.Load() {
		return false
	}
	fn()
	return true
}

// crash rolls back every tracked file (torn: tearing each one's last write), then
// fails every later operation. It then asks the kernel to drop the rolled-back files'
// cached pages, so reads reach chaosfs (and fail) instead of the pre-crash cache.
func (c *chaosFS) crash(torn bool) CrashReport {
	c.gate.Lock()
	report, inodes := c.tracker.RollbackAll(torn, c.backing)
	report.WritebackS = c.faults.writebackS.Load()
	c.faults.crashed.Store(true)
	c.gate.Unlock()
	// Best effort and in the background: dropping an mmapped page may make the kernel write
	// it back first, which this file system now refuses.
	go func() {
		for _, inode := range inodes {
			inode.NotifyContent(0, 0)
		}
	}()
	return report
}

// target is how a mutation reaches one backing file.
type target struct {
	key  fileKey
	size int64 // the backing file's size when the target was taken
	src  source
}

// write writes p at off through the tracker (write-through: the backing file gets it at
// once); with the disk full, a write past the end fails with ENOSPC, one inside succeeds.
func (c *chaosFS) write(h *handle, p []byte, off int64) (uint32, syscall.Errno) {
	if c.faults.diskFull.Load() {
		t, errno := h.target()
		if errno != 0 {
			return 0, errno
		}
		if off+int64(len(p)) > t.size {
			return 0, c.faults.fail(syscall.ENOSPC)
		}
	}
	n, err := c.tracker.Write(h.key, h.source(), p, off)
	c.faults.writes.Add(1)
	if err != nil {
		return uint32(n), fs.ToErrno(err)
	}
	if h.dsync {
		// O_DSYNC/O_SYNC: each write is durable when it returns, as an fdatasync.
		if err := unix.Fdatasync(h.fd); err != nil {
			return uint32(n), fs.ToErrno(err)
		}
		c.tracker.Synced(h.key)
	}
	return uint32(n), 0
}

// fsync makes the handle's file durable: the backing fsync, then the file is untracked.
// With fsync-error on it fails with EIO and the file stays unsynced.
func (c *chaosFS) fsync(h *handle, flags uint32) syscall.Errno {
	if c.faults.fsyncError.Load() {
		return c.faults.fail(syscall.EIO)
	}
	sync := unix.Fsync
	if flags&fsyncDatasync != 0 {
		sync = unix.Fdatasync
	}
	if err := sync(h.fd); err != nil {
		return fs.ToErrno(err)
	}
	c.tracker.Synced(h.key)
	c.faults.fsyncs.Add(1)
	return 0
}

// fsyncDatasync is FUSE_FSYNC_FDATASYNC, the FSYNC flag of fdatasync(2).
const fsyncDatasync = 1

// truncate sets a file's size; growing fails with ENOSPC while the disk is full.
func (c *chaosFS) truncate(t target, size int64) syscall.Errno {
	if c.faults.diskFull.Load() && size > t.size {
		return c.faults.fail(syscall.ENOSPC)
	}
	return fs.ToErrno(c.tracker.Truncate(t.key, t.src, size))
}

// allocate is fallocate(2) on a tracked file. Allocating changes no content; punching a
// hole or zeroing a range does, so its pre-image is saved first. Collapsing or inserting a
// range shifts data, which a pre-image cannot undo: refused (Kafka never asks).
func (c *chaosFS) allocate(h *handle, off, length uint64, mode uint32) syscall.Errno {
	const contentSafe = unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_UNSHARE_RANGE
	const zeroing = unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_ZERO_RANGE
	preserve := int64(0)
	switch {
	case mode&^contentSafe == 0:
	case mode&^zeroing == 0:
		preserve = int64(length)
	default:
		return syscall.EOPNOTSUPP
	}
	if c.faults.diskFull.Load() {
		return c.faults.fail(syscall.ENOSPC)
	}
	err := c.tracker.Modify(h.key, h.source(), int64(off), preserve, func(fd int) error {
		return unix.Fallocate(fd, mode, int64(off), int64(length))
	})
	return fs.ToErrno(err)
}

// statTarget is the target of a backing path (for mutations that come without a handle).
func statTarget(path string, inode *fs.Inode) (target, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return target{}, fs.ToErrno(err)
	}
	return target{key: keyOf(&st), size: st.Size, src: source{path: path, inode: inode}}, 0
}

// exists is whether a backing path names anything (a dangling symlink included).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
