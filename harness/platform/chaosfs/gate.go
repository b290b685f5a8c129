package main

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// gate wraps the node file system's raw protocol handler, so that each FUSE request meets
// the fault state in one place: once crashed every request fails with EIO (only those that
// free kernel state, FORGET and RELEASE, still pass); every request that changes the
// backing dir holds the chaosFS gate shared; the slow-disk delays are slept before it is
// taken; directory changes fail with ENOSPC while the disk is full.
type gate struct {
	fuse.RawFileSystem
	c *chaosFS
}

var errIO = fuse.Status(syscall.EIO)

// status is the FUSE status of an errno.
func status(errno syscall.Errno) fuse.Status { return fuse.Status(errno) }

// full answers ENOSPC (counted) while the disk is full, else OK: for requests that would
// allocate a new directory entry or inode.
func (g *gate) full() fuse.Status {
	if g.c.faults.diskFull.Load() {
		return status(g.c.faults.fail(syscall.ENOSPC))
	}
	return fuse.OK
}

// Requests that change nothing: refused once crashed.

func (g *gate) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Lookup(cancel, h, name, out)
}

func (g *gate) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.GetAttr(cancel, in, out)
}

func (g *gate) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if g.c.crashed() {
		return nil, errIO
	}
	return g.RawFileSystem.Readlink(cancel, h)
}

func (g *gate) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Access(cancel, in)
}

func (g *gate) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if g.c.crashed() {
		return 0, errIO
	}
	return g.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (g *gate) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if g.c.crashed() {
		return 0, errIO
	}
	return g.RawFileSystem.ListXAttr(cancel, h, dest)
}

// Open changes nothing: the kernel sends O_TRUNC as a separate SETATTR.
func (g *gate) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Flags&syscall.O_TRUNC != 0 {
		if !g.c.enter() {
			return errIO
		}
		defer g.c.leave()
	} else if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Open(cancel, in, out)
}

func (g *gate) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if g.c.crashed() {
		return nil, errIO
	}
	return g.RawFileSystem.Read(cancel, in, buf)
}

func (g *gate) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Lseek(cancel, in, out)
}

func (g *gate) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.GetLk(cancel, in, out)
}

func (g *gate) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.SetLk(cancel, in)
}

func (g *gate) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.SetLkw(cancel, in)
}

func (g *gate) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (g *gate) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Flush(cancel, in)
}

func (g *gate) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.OpenDir(cancel, in, out)
}

func (g *gate) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.ReadDir(cancel, in, out)
}

func (g *gate) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.ReadDirPlus(cancel, in, out)
}

// FsyncDir has no effect on the fault model: directory changes are durable at once.
func (g *gate) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.FsyncDir(cancel, in)
}

func (g *gate) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.StatFs(cancel, h, out)
}

func (g *gate) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if g.c.crashed() {
		return errIO
	}
	return g.RawFileSystem.Statx(cancel, in, out)
}

// Requests that change the backing dir: inside the gate.

func (g *gate) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.SetAttr(cancel, in, out)
}

func (g *gate) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	if st := g.full(); !st.Ok() {
		return st
	}
	return g.RawFileSystem.Mknod(cancel, in, name, out)
}

func (g *gate) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	if st := g.full(); !st.Ok() {
		return st
	}
	return g.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (g *gate) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Unlink(cancel, h, name)
}

func (g *gate) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Rmdir(cancel, h, name)
}

func (g *gate) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (g *gate) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	if st := g.full(); !st.Ok() {
		return st
	}
	return g.RawFileSystem.Link(cancel, in, name, out)
}

func (g *gate) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	if st := g.full(); !st.Ok() {
		return st
	}
	return g.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (g *gate) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (g *gate) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

// Create: the node decides about ENOSPC, as only it knows whether the name is new.
func (g *gate) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Create(cancel, in, name, out)
}

func (g *gate) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	if st := g.full(); !st.Ok() {
		return st
	}
	return g.RawFileSystem.Tmpfile(cancel, in, out)
}

// Write sleeps the write delay first, outside the gate.
func (g *gate) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	pause(g.c.faults.writeDelayMS.Load())
	if !g.c.enter() {
		return 0, errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Write(cancel, in, data)
}

// Writev is how go-fuse delivers every WRITE; it sleeps the write delay first.
func (g *gate) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	pause(g.c.faults.writeDelayMS.Load())
	if !g.c.enter() {
		return 0, errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Writev(cancel, in, data)
}

func (g *gate) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if !g.c.enter() {
		return 0, errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.CopyFileRange(cancel, in)
}

// Fsync sleeps the fsync delay first, outside the gate.
func (g *gate) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	pause(g.c.faults.fsyncDelayMS.Load())
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Fsync(cancel, in)
}

func (g *gate) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if !g.c.enter() {
		return errIO
	}
	defer g.c.leave()
	return g.RawFileSystem.Fallocate(cancel, in)
}
