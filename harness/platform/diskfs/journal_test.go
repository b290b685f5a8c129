package main

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"pgregory.net/rapid"
)

// memFile is an in-memory File: what the journal sees of a backing file.
type memFile struct{ data []byte }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) Truncate(size int64) error {
	if size <= int64(len(m.data)) {
		m.data = m.data[:size]
	} else {
		m.data = append(m.data, make([]byte, size-int64(len(m.data)))...)
	}
	return nil
}

func (m *memFile) Size() (int64, error) { return int64(len(m.data)), nil }

// oracle is the test's own model of one file: what the application wrote (current) and
// what the file held at its last fsync (synced), kept without the journal's logic.
type oracle struct {
	current []byte
	synced  []byte
}

func (o *oracle) write(p []byte, off int) {
	if end := off + len(p); end > len(o.current) {
		o.current = append(o.current, make([]byte, end-len(o.current))...)
	}
	copy(o.current[off:], p)
}

func (o *oracle) truncate(size int) {
	if size <= len(o.current) {
		o.current = o.current[:size]
	} else {
		o.current = append(o.current, make([]byte, size-len(o.current))...)
	}
}

func (o *oracle) fsync() { o.synced = bytes.Clone(o.current) }

// tornContent is the documented torn contract, computed from the oracle alone: the synced
// bytes, then the first half of the unsynced tail (one byte less if that half is a whole
// number of 512-byte sectors); nothing of the tail if the file did not grow.
func (o *oracle) tornContent() []byte {
	tail := len(o.current) - len(o.synced)
	keep := 0
	if tail > 0 {
		keep = tail / 2
		if keep > 0 && keep%512 == 0 {
			keep--
		}
	}
	out := bytes.Clone(o.synced)
	return append(out, o.current[len(o.synced):len(o.synced)+keep]...)
}

// sectorMultiples are append lengths around the sector boundaries of a torn tail's half.
var sectorMultiples = []int{511, 512, 1023, 1024, 1025, 2048, 3072}

// session drives a journal the way the FUSE layer does: tracked at the first mutation,
// dropped at fsync, over one in-memory file, beside the oracle.
type session struct {
	file    *memFile
	journal *Journal
	model   oracle
}

func newSession(initial []byte) *session {
	return &session{
		file:  &memFile{data: bytes.Clone(initial)},
		model: oracle{current: bytes.Clone(initial), synced: bytes.Clone(initial)},
	}
}

func (s *session) tracked(t *rapid.T) *Journal {
	if s.journal == nil {
		j, err := Track(s.file)
		if err != nil {
			t.Fatalf("track: %v", err)
		}
		s.journal = j
	}
	return s.journal
}

// step runs one random operation on both the journal and the oracle.
func (s *session) step(t *rapid.T) {
	limit := len(s.model.current) + 1500
	switch rapid.IntRange(0, 9).Draw(t, "op") {
	case 0, 1, 2, 3, 4: // write anywhere, often inside the synced part
		off := rapid.IntRange(0, limit).Draw(t, "off")
		p := rapid.SliceOfN(rapid.Byte(), 0, 2000).Draw(t, "data")
		if n, err := s.tracked(t).Write(p, int64(off)); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
		s.model.write(p, off)
	case 5: // append, often a whole number of sectors (so a torn tail's half may be one)
		length := rapid.OneOf(rapid.IntRange(1, 1500), rapid.SampledFrom(sectorMultiples)).Draw(t, "length")
		p := rapid.SliceOfN(rapid.Byte(), length, length).Draw(t, "append")
		off := len(s.model.current)
		if _, err := s.tracked(t).Write(p, int64(off)); err != nil {
			t.Fatalf("append: %v", err)
		}
		s.model.write(p, off)
	case 6, 7: // shrink or grow
		size := rapid.IntRange(0, limit).Draw(t, "size")
		if err := s.tracked(t).Truncate(int64(size)); err != nil {
			t.Fatalf("truncate: %v", err)
		}
		s.model.truncate(size)
	default: // fsync: the file is durable as it is, and untracked
		s.journal = nil
		s.model.fsync()
	}
	if !bytes.Equal(s.file.data, s.model.current) {
		t.Fatalf("not write-through: the file differs from what was written")
	}
}

func (s *session) run(t *rapid.T) {
	steps := rapid.IntRange(0, 40).Draw(t, "steps")
	for range steps {
		s.step(t)
	}
}

func drawSession(t *rapid.T) *session {
	initial := []byte{}
	if rapid.Bool().Draw(t, "existed") {
		initial = rapid.SliceOfN(rapid.Byte(), 0, 5000).Draw(t, "initial")
	}
	return newSession(initial)
}

func TestRollbackRestoresTheLastFsync(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSession(t)
		s.run(t)
		if s.journal != nil {
			out, err := s.journal.Rollback(false)
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			if out.Synced != int64(len(s.model.synced)) || out.Before != int64(len(s.model.current)) ||
				out.After != out.Synced {
				t.Fatalf("outcome %+v for synced %d, current %d",
					out, len(s.model.synced), len(s.model.current))
			}
		}
		if !bytes.Equal(s.file.data, s.model.synced) {
			t.Fatalf("after rollback: %d bytes, want the %d synced", len(s.file.data), len(s.model.synced))
		}
	})
}

func TestTornRollbackKeepsHalfTheTail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSession(t)
		s.run(t)
		want := s.model.tornContent()
		if s.journal != nil {
			out, err := s.journal.Rollback(true)
			if err != nil {
				t.Fatalf("torn rollback: %v", err)
			}
			if out.After != int64(len(want)) {
				t.Fatalf("outcome %+v, want size %d", out, len(want))
			}
			if tear := out.After - out.Synced; tear > 0 && tear%512 == 0 {
				t.Fatalf("the tear of %d bytes ends on a sector boundary", tear)
			}
		}
		if !bytes.Equal(s.file.data, want) {
			t.Fatalf("after torn rollback: %d bytes, want %d", len(s.file.data), len(want))
		}
	})
}

func TestRepeatedOverwritesKeepOnePreimage(t *testing.T) {
	f := &memFile{data: bytes.Repeat([]byte{'s'}, 1<<20)}
	j, err := Track(f)
	if err != nil {
		t.Fatal(err)
	}
	page := bytes.Repeat([]byte{'x'}, 4096)
	for i := range 10_000 {
		page[0] = byte(i)
		if _, err := j.Write(page, 8192); err != nil {
			t.Fatal(err)
		}
	}
	if j.Preimages() != 1 || j.Unsynced() != 4096 {
		t.Fatalf("%d pre-images, %d unsynced bytes; want 1 and 4096", j.Preimages(), j.Unsynced())
	}
	if _, err := j.Rollback(false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.data, bytes.Repeat([]byte{'s'}, 1<<20)) {
		t.Fatal("the page was not restored")
	}
}

func TestAppendsNeedNoPreimage(t *testing.T) {
	f := &memFile{data: []byte("synced")}
	j, _ := Track(f)
	for i := range 1000 {
		if _, err := j.Write([]byte(fmt.Sprintf("record %d\n", i)), j.Size()); err != nil {
			t.Fatal(err)
		}
	}
	if j.Preimages() != 0 {
		t.Fatalf("%d pre-images for appends", j.Preimages())
	}
	if _, err := j.Rollback(false); err != nil || string(f.data) != "synced" {
		t.Fatalf("rollback of appends: %q, %v", f.data, err)
	}
}

func TestTearLength(t *testing.T) {
	cases := map[int64]int64{
		-5: 0, 0: 0, 1: 0, 2: 1, 3: 1, 1000: 500, 1024: 511, 1025: 511, 1026: 513, 2048: 1023, 4096: 2047,
	}
	for tail, want := range cases {
		if got := TearLength(tail); got != want {
			t.Errorf("TearLength(%d) = %d, want %d", tail, got, want)
		}
	}
}
