package main

import "fmt"

// sectorSize is the unit a disk writes atomically; a torn write is never cut on its boundary.
const sectorSize = 512

// File is all a Journal needs of a file: positional reads and writes, truncation and size.
// The FUSE layer passes a backing *os.File (through osFile); the property tests an
// in-memory file.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
	Size() (int64, error)
}

// preimage is the content a byte range held before its first overwrite since the last sync.
type preimage struct {
	off  int64
	data []byte
}

// span names a byte range: a saved one (a second overwrite of the very same range saves
// nothing), or the last write past the synced size.
type span struct{ off, length int64 }

// Journal records what a crash must undo in one file since its last sync: the size the file
// had then (synced), the pre-images of the synced bytes overwritten since, and the last write
// since that ended past the synced size (the one a torn crash tears). Every mutation of the
// file must go through it while it exists (the FUSE layer guarantees this), so its cached
// size stays exact. A sync (fsync, `sync`, writeback) drops the journal, and all it records
// with it: the next mutation tracks the file afresh. A Journal is not safe for concurrent use.
type Journal struct {
	file       File
	synced     int64
	size       int64
	images     []preimage
	saved      map[span]struct{}
	imageBytes int64
	last       span // the last write that ended past synced; length 0: none since the sync
}

// Outcome is what a rollback did to one file.
type Outcome struct {
	Synced   int64 // the size at the last sync
	Before   int64 // the size when the rollback began
	After    int64 // the size it left
	Restored int64 // pre-image bytes written back
}

// Track starts a journal for a file about to be mutated: whatever it holds now counts as
// synced (files nobody mutated are durable). A file the caller has just created is empty,
// so its synced size is 0.
func Track(f File) (*Journal, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	return &Journal{file: f, synced: size, size: size, saved: map[span]struct{}{}}, nil
}

// SyncedSize is the file's size at its last sync (or when tracking began).
func (j *Journal) SyncedSize() int64 { return j.synced }

// Size is the file's current size.
func (j *Journal) Size() int64 { return j.size }

// Preimages is how many pre-images the journal holds (for tests and the memory bound).
func (j *Journal) Preimages() int { return len(j.images) }

// Unsynced is what a crash would drop: the bytes past the synced size plus the pre-images.
func (j *Journal) Unsynced() int64 {
	return max(0, j.size-j.synced) + j.imageBytes
}

// Write writes p at off after saving the synced bytes it overwrites; appends past the
// synced size need no pre-image, so Kafka's appends cost nothing extra. A write that ends
// past the synced size becomes the last write (its written part), which a torn crash tears.
func (j *Journal) Write(p []byte, off int64) (int, error) {
	if err := j.Preserve(off, int64(len(p))); err != nil {
		return 0, err
	}
	n, err := j.file.WriteAt(p, off)
	if n > 0 {
		end := off + int64(n)
		j.size = max(j.size, end)
		if end > j.synced {
			j.last = span{off, int64(n)}
		}
	}
	return n, err
}

// Truncate sets the file's size, first saving the synced bytes a shrink cuts off.
func (j *Journal) Truncate(size int64) error {
	if size < j.size {
		if err := j.Preserve(size, j.size-size); err != nil {
			return err
		}
	}
	if err := j.file.Truncate(size); err != nil {
		return err
	}
	j.size = size
	return nil
}

// Preserve saves the pre-image of the synced bytes in [off, off+length) that still exist,
// unless that exact range was saved since the last sync (the earliest save of a byte holds
// its synced value, so a later identical one adds nothing). Bytes of [0, synced) that a
// shrink removed were saved by that shrink. Callers that change content by other means
// (fallocate's punch-hole) call it before, and Refresh after.
func (j *Journal) Preserve(off, length int64) error {
	lo := max(off, 0)
	hi := min(off+length, j.synced, j.size)
	if lo >= hi {
		return nil
	}
	key := span{lo, hi - lo}
	if _, done := j.saved[key]; done {
		return nil
	}
	data := make([]byte, hi-lo)
	if n, err := j.file.ReadAt(data, lo); n < len(data) {
		return fmt.Errorf("saving the pre-image of [%d, %d): read %d bytes: %w", lo, hi, n, err)
	}
	j.images = append(j.images, preimage{off: lo, data: data})
	j.saved[key] = struct{}{}
	j.imageBytes += int64(len(data))
	return nil
}

// Refresh re-reads the file's size after a mutation the journal did not perform itself.
func (j *Journal) Refresh() error {
	size, err := j.file.Size()
	if err == nil {
		j.size = size
	}
	return err
}

// Rollback makes the file hold what it held at its last sync: the pre-images are written
// back newest first (so each byte ends with its oldest, synced value), then the file is cut
// to its synced size. A torn rollback cuts it at TornCut instead: the power went in the middle
// of the last write past the synced size, after everything before it had reached the disk.
// The journal must not be used afterwards.
func (j *Journal) Rollback(torn bool) (Outcome, error) {
	before, err := j.file.Size()
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Synced: j.synced, Before: before, After: j.synced}
	for i := len(j.images) - 1; i >= 0; i-- {
		img := j.images[i]
		if _, err := j.file.WriteAt(img.data, img.off); err != nil {
			return out, fmt.Errorf("restoring %d bytes at %d: %w", len(img.data), img.off, err)
		}
		out.Restored += int64(len(img.data))
	}
	if torn {
		out.After = TornCut(j.synced, before, j.last)
	}
	if err := j.file.Truncate(out.After); err != nil {
		return out, err
	}
	j.images, j.saved, j.imageBytes, j.size, j.last = nil, nil, 0, out.After, span{}
	return out, nil
}

// TornCut is the size a torn crash leaves a file that had `synced` bytes at its last sync
// and `before` bytes at the crash, when `last` is its last write since the sync that ended
// past `synced` (length 0: none). That write was in flight when the power went: the part of
// it past the synced size, from start = max(last.off, synced) to its end, keeps its first
// half, so the file is cut at start + (end-start)/2, clamped to [synced, before] (synced
// wins when the file shrank below it); a cut past start on a multiple of the sector size is
// one byte less, so a torn write never ends on a sector boundary. The unsynced tail before
// the last write stays (it was written back), the rest of that write and anything after it
// (a later extending truncate) is lost. Without such a write (only synced bytes were
// overwritten, or the file grew by extending truncates alone) the file is cut to its synced
// size, as by a plain crash.
//
// So in an append-only file the cut falls strictly inside the last append when that has 4
// bytes or more, and when it has 2 or 3 unless its middle is a sector boundary (then, as an
// append of 1 byte, it is lost whole).
func TornCut(synced, before int64, last span) int64 {
	if last.length <= 0 {
		return synced
	}
	start, end := max(last.off, synced), last.off+last.length
	cut := max(synced, min(start+(end-start)/2, before))
	if cut > start && cut%sectorSize == 0 {
		cut--
	}
	return cut
}
