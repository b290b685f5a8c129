package main

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file of the mount. It wraps the loopback's handle rather than
// embedding it: the loopback's also offers its descriptor for kernel passthrough
// (FilePassthroughFder), which would send reads and writes straight to the backing file,
// past the tracker. Without it every WRITE and FSYNC comes here.
type handle struct {
	c     *chaosFS
	inner *fs.LoopbackFile
	fd    int     // the loopback's descriptor of the backing file, owned by inner
	key   fileKey // the backing file's device and inode
	inode *fs.Inode
	dsync bool // opened O_DSYNC or O_SYNC: each write is durable on return
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileWritever  = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileStatxer   = (*handle)(nil)
	_ fs.FileLseeker   = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// newHandle wraps a loopback handle, learning its backing file's identity once (one fstat
// per open, none per write).
func newHandle(c *chaosFS, lf *fs.LoopbackFile, flags uint32, inode *fs.Inode) (*handle, syscall.Errno) {
	fd, ok := lf.PassthroughFd()
	if !ok {
		return nil, syscall.EBADF
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	return &handle{
		c: c, inner: lf, fd: fd, key: keyOf(&st), inode: inode,
		dsync: flags&unix.O_DSYNC != 0, // O_SYNC includes the O_DSYNC bit
	}, 0
}

// source is how the tracker opens this handle's file for itself.
func (h *handle) source() source { return source{fd: h.fd, inode: h.inode} }

// target is the handle's file with its current size.
func (h *handle) target() (target, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(h.fd, &st); err != nil {
		return target{}, fs.ToErrno(err)
	}
	return target{key: h.key, size: st.Size, src: h.source()}, 0
}

// Read reads the backing file.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.inner.Read(ctx, dest, off)
}

// Write writes through the tracker.
func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.c.write(h, data, off)
}

// Writev joins the pieces of a split WRITE and writes them through the tracker (go-fuse
// would otherwise retry a split WRITE as Write, passing the gate, and its delay, twice).
func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if len(data) == 1 {
		return h.c.write(h, data[0], off)
	}
	var joined []byte
	for _, piece := range data {
		joined = append(joined, piece...)
	}
	return h.c.write(h, joined, off)
}

// Fsync syncs the file (fsync or fdatasync alike): see chaosFS.fsync.
func (h *handle) Fsync(_ context.Context, flags uint32) syscall.Errno {
	return h.c.fsync(h, flags)
}

// Allocate is fallocate(2): see chaosFS.allocate.
func (h *handle) Allocate(_ context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.c.allocate(h, off, size, mode)
}

// Flush is the loopback's (close(2) of a descriptor; it syncs nothing).
func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.inner.Flush(ctx) }

// Release closes the loopback's descriptor; the tracker keeps its own.
func (h *handle) Release(ctx context.Context) syscall.Errno { return h.inner.Release(ctx) }

// Getattr is the loopback's.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.inner.Getattr(ctx, out)
}

// Statx is the loopback's.
func (h *handle) Statx(ctx context.Context, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return h.inner.Statx(ctx, flags, mask, out)
}

// Lseek is the loopback's (SEEK_DATA and SEEK_HOLE).
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.inner.Lseek(ctx, off, whence)
}
