package main

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node whose file handles and size changes go through the tracker.
// Everything else (lookup, mkdir, rename, unlink, ...) is the loopback's own: those
// metadata operations are durable at once, as chaosfs does not model directory fsync.
type node struct {
	fs.LoopbackNode
	c *chaosFS
}

var (
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
)

// newNode is the LoopbackRoot's NewNode: every node of the mount is a chaosfs node.
func (c *chaosFS) newNode(root *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
	return &node{LoopbackNode: fs.LoopbackNode{RootData: root}, c: c}
}

// backingPath is the node's path in the backing dir.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// Open opens the backing file and wraps its handle. O_TRUNC never arrives here (chaosfs
// does not negotiate atomic O_TRUNC, so the kernel truncates through SETATTR); should it,
// the truncation goes through the tracker like any other.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.wrap(fh, flags)
	if errno == 0 && flags&syscall.O_TRUNC != 0 {
		errno = n.truncateHandle(h, 0)
	}
	if errno != 0 {
		fh.(fs.FileReleaser).Release(ctx)
		return nil, 0, errno
	}
	return h, 0, 0
}

// Create creates the backing file and tracks it as new (synced size 0), unless it existed
// already (the kernel's view was stale), which is an open. With the disk full, creating a
// file fails with ENOSPC.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	existed := exists(filepath.Join(n.backingPath(), name))
	if !existed && n.c.faults.diskFull.Load() {
		return nil, nil, 0, n.c.faults.fail(syscall.ENOSPC)
	}
	inode, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.wrapChild(fh, flags, inode)
	switch {
	case errno != 0:
	case !existed:
		errno = fs.ToErrno(n.c.tracker.Track(h.key, h.source()))
	case flags&syscall.O_TRUNC != 0:
		errno = n.truncateHandle(h, 0)
	}
	if errno != 0 {
		fh.(fs.FileReleaser).Release(ctx)
		return nil, nil, 0, errno
	}
	return inode, h, 0, 0
}

// Tmpfile creates an unnamed backing file (O_TMPFILE) and wraps its handle; the gate has
// refused it already if the disk is full.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	inode, fh, _, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.wrapChild(fh, flags, inode)
	if errno != 0 {
		fh.(fs.FileReleaser).Release(ctx)
		return nil, nil, 0, errno
	}
	return inode, h, 0, 0
}

// Setattr applies a size change through the tracker (the truncation's pre-image saved,
// ENOSPC for growth while the disk is full), then the rest (mode, owner, times) as the
// loopback does.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*handle)
	if size, ok := in.GetSize(); ok {
		t, errno := n.target(h)
		if errno == 0 {
			errno = n.c.truncate(t, int64(size))
		}
		if errno != 0 {
			return errno
		}
		rest := *in
		rest.Valid &^= fuse.FATTR_SIZE
		in = &rest
	}
	if h != nil {
		f = h.inner
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// CopyFileRange answers ENOSYS, so the kernel copies through READ and WRITE, which the
// tracker sees (the loopback's copy would write behind its back).
func (n *node) CopyFileRange(context.Context, fs.FileHandle, uint64, *fs.Inode, fs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Statfs is the backing file system's, with no free block while the disk is full.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	errno := n.LoopbackNode.Statfs(ctx, out)
	if errno == 0 && n.c.faults.diskFull.Load() {
		out.Bfree, out.Bavail = 0, 0
	}
	return errno
}

// Unlink removes a name; the tracker forgets the file if that was its last name.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	gone, last := lastName(filepath.Join(n.backingPath(), name))
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 && last {
		n.c.tracker.Forget(gone)
	}
	return errno
}

// Rename renames as the loopback does; a file it replaces is forgotten by the tracker if
// that was its last name (an exchange replaces nothing).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var gone fileKey
	var last bool
	if dir, ok := newParent.(*node); ok && flags&unix.RENAME_EXCHANGE == 0 {
		gone, last = lastName(filepath.Join(dir.backingPath(), newName))
	}
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 && last {
		n.c.tracker.Forget(gone)
	}
	return errno
}

// lastName is the key of the regular file at path, and whether path is its only name.
func lastName(path string) (fileKey, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileKey{}, false
	}
	return keyOf(&st), st.Nlink == 1
}

// target is how a size change reaches the file: through the handle it came with, else by
// the node's backing path.
func (n *node) target(h *handle) (target, syscall.Errno) {
	if h != nil {
		return h.target()
	}
	return statTarget(n.backingPath(), n.EmbeddedInode())
}

// truncateHandle truncates the handle's file to size through the tracker.
func (n *node) truncateHandle(h *handle, size int64) syscall.Errno {
	t, errno := h.target()
	if errno != 0 {
		return errno
	}
	return n.c.truncate(t, size)
}

// wrap wraps a handle of this node's file.
func (n *node) wrap(fh fs.FileHandle, flags uint32) (*handle, syscall.Errno) {
	return n.wrapChild(fh, flags, n.EmbeddedInode())
}

// wrapChild wraps a loopback handle of the file `inode` (a new child of this node, or the
// node itself) in a chaosfs handle.
func (n *node) wrapChild(fh fs.FileHandle, flags uint32, inode *fs.Inode) (*handle, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, syscall.EIO
	}
	return newHandle(n.c, lf, flags, inode)
}
