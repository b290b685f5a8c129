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

// oracle is the test's own model of one file: what the application wrote (current), what
// the file held at its last fsync (synced), and the last write since that ended past the
// synced size (lastOff, lastLen; lastLen 0: none), kept without the journal's logic.
type oracle struct {
	current []byte
	synced  []byte
	lastOff int
	lastLen int
}

func (o *oracle) write(p []byte, off int) {
	if end := off + len(p); end > len(o.current) {
		o.current = append(o.current, make([]byte, end-len(o.current))...)
	}
	copy(o.current[off:], p)
	if len(p) > 0 && off+len(p) > len(o.synced) {
		o.lastOff, o.lastLen = off, len(p)
	}
}

func (o *oracle) truncate(size int) {
	if size <= len(o.current) {
		o.current = o.current[:size]
	} else {
		o.current = append(o.current, make([]byte, size-len(o.current))...)
	}
}

func (o *oracle) fsync() {
	o.synced = bytes.Clone(o.current)
	o.lastOff, o.lastLen = 0, 0
}

// tornCut is the documented torn contract, computed from the oracle alone: the cut falls in
// the middle of the part of the last write past the synced size (never below the synced
// size, never past the current one), one byte less when that middle is past the write's
// start and on a 512-byte sector boundary; at the synced size when there is no such write.
func (o *oracle) tornCut() int {
	synced := len(o.synced)
	if o.lastLen == 0 {
		return synced
	}
	start := o.lastOff
	if start < synced {
		start = synced
	}
	cut := start + (o.lastOff+o.lastLen-start)/2
	if cut > len(o.current) {
		cut = len(o.current)
	}
	if cut < synced {
		cut = synced
	}
	if cut > start && cut%512 == 0 {
		cut--
	}
	return cut
}

// tornContent is what a torn crash leaves: the synced bytes, then what the application
// wrote past them up to the cut.
func (o *oracle) tornContent() []byte {
	out := bytes.Clone(o.synced)
	if cut := o.tornCut(); cut > len(o.synced) {
		out = append(out, o.current[len(o.synced):cut]...)
	}
	return out
}

// sectorMultiples are write lengths whose middle is a sector boundary when they start on
// one (1024, 2048), lengths around sector multiples, and 2 or 3 bytes, whose middle is one
// when they start a byte before it.
var sectorMultiples = []int{2, 3, 511, 512, 1023, 1024, 1025, 2048, 3072}

// sectorAligned draws a multiple of 512 up to limit.
func sectorAligned(limit int) *rapid.Generator[int] {
	return rapid.Map(rapid.IntRange(0, limit/512), func(n int) int { return n * 512 })
}

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
	case 0, 1, 2, 3: // write anywhere, often inside the synced part, often at a sector
		off := rapid.OneOf(rapid.IntRange(0, limit), sectorAligned(limit)).Draw(t, "off")
		length := rapid.OneOf(rapid.IntRange(0, 2000), rapid.SampledFrom(sectorMultiples)).Draw(t, "length")
		p := rapid.SliceOfN(rapid.Byte(), length, length).Draw(t, "data")
		if n, err := s.tracked(t).Write(p, int64(off)); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
		s.model.write(p, off)
	case 4, 5: // append, often a whole number of sectors (so its middle may be a sector boundary)
		length := rapid.OneOf(rapid.IntRange(1, 1500), rapid.SampledFrom(sectorMultiples)).Draw(t, "length")
		p := rapid.SliceOfN(rapid.Byte(), length, length).Draw(t, "append")
		off := len(s.model.current)
		if _, err := s.tracked(t).Write(p, int64(off)); err != nil {
			t.Fatalf("append: %v", err)
		}
		s.model.write(p, off)
	case 6, 7: // shrink or grow, often to a sector boundary
		size := rapid.OneOf(rapid.IntRange(0, limit), sectorAligned(limit)).Draw(t, "size")
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
		length := rapid.OneOf(rapid.IntRange(0, 5000), sectorAligned(5000)).Draw(t, "length")
		initial = rapid.SliceOfN(rapid.Byte(), length, length).Draw(t, "initial")
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

func TestTornRollbackTearsTheLastWrite(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSession(t)
		s.run(t)
		want := s.model.tornContent()
		if s.journal != nil {
			out, err := s.journal.Rollback(true)
			if err != nil {
				t.Fatalf("torn rollback: %v", err)
			}
			if out.Synced != int64(len(s.model.synced)) || out.Before != int64(len(s.model.current)) ||
				out.After != int64(len(want)) {
				t.Fatalf("outcome %+v, want synced %d, before %d, after %d",
					out, len(s.model.synced), len(s.model.current), len(want))
			}
		}
		if !bytes.Equal(s.file.data, want) {
			t.Fatalf("after torn rollback: %d bytes, want %d", len(s.file.data), len(want))
		}
		// The cut is inside the last write unless clamped: past the start of its unsynced
		// part (when it has 4 bytes or more there and the file kept them) and before its end.
		if m := s.model; m.lastLen > 0 {
			start, end := max(m.lastOff, len(m.synced)), m.lastOff+m.lastLen
			if cut := len(want); end-start >= 4 && len(m.current) >= end && (cut <= start || cut >= end) {
				t.Fatalf("cut at %d, not inside the last write's unsynced part [%d, %d)", cut, start, end)
			}
		}
	})
}

// TestTornCrashTearsTheLastOfEqualAppends is Kafka's log: one record batch per write, all
// of the same size, over a synced prefix that is itself a number of batches. Half the
// unsynced tail would fall on a batch boundary whenever an even number of batches was
// unsynced; the cut falls inside the last batch instead, never on a write or sector boundary.
func TestTornCrashTearsTheLastOfEqualAppends(t *testing.T) {
	for _, batch := range []int{61, 100, 512, 1000, 1024, 4096, 16384} {
		for _, syncedBatches := range []int{0, 1, 2, 7} {
			for appended := 1; appended <= 8; appended++ {
				initial := bytes.Repeat([]byte{'s'}, syncedBatches*batch)
				f := &memFile{data: bytes.Clone(initial)}
				j, err := Track(f)
				if err != nil {
					t.Fatal(err)
				}
				var tail []byte
				for i := range appended {
					p := bytes.Repeat([]byte{byte('a' + i)}, batch)
					if _, err := j.Write(p, j.Size()); err != nil {
						t.Fatal(err)
					}
					tail = append(tail, p...)
				}
				out, err := j.Rollback(true)
				if err != nil {
					t.Fatal(err)
				}
				last := int64(len(initial) + len(tail) - batch)
				name := fmt.Sprintf("%d synced + %d appended batches of %d bytes", syncedBatches, appended, batch)
				switch {
				case out.After <= last || out.After >= last+int64(batch):
					t.Errorf("%s: cut at %d, not inside the last batch [%d, %d)", name, out.After, last, last+int64(batch))
				case (out.After-int64(len(initial)))%int64(batch) == 0 || out.After%sectorSize == 0:
					t.Errorf("%s: cut at %d, on a write or sector boundary", name, out.After)
				case !bytes.Equal(f.data, append(initial, tail[:out.After-int64(len(initial))]...)):
					t.Errorf("%s: the file does not hold what was written up to the cut", name)
				}
			}
		}
	}
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

func TestTornCut(t *testing.T) {
	cases := []struct {
		name           string
		synced, before int64
		last           span
		want           int64
	}{
		{"no write past the synced size", 100, 5000, span{}, 100},
		{"an append keeps its first half", 100, 1100, span{100, 1000}, 600},
		{"what came before the last write stays", 0, 3000, span{2000, 1000}, 2500},
		{"a write from inside the synced part tears only its unsynced part", 1000, 1400, span{800, 600}, 1200},
		{"a middle on a sector boundary is one byte less", 0, 2048, span{1024, 1024}, 1535},
		{"a 1-byte write is lost whole", 1023, 1024, span{1023, 1}, 1023},
		{"a 1-byte write on a sector boundary is lost whole", 1024, 1025, span{1024, 1}, 1024},
		{"a 2-byte write whose middle is a sector boundary is lost whole", 0, 513, span{511, 2}, 511},
		{"a 3-byte write is cut after its first byte", 0, 4, span{1, 3}, 2},
		{"a later extending truncate is lost", 0, 10000, span{0, 1000}, 500},
		{"a later shrink clamps the cut", 0, 300, span{0, 1000}, 300},
		{"a shrink to a sector boundary inside the write", 0, 512, span{0, 2000}, 511},
		{"a shrink to a sector boundary before the write", 0, 1024, span{2000, 1000}, 1024},
		{"a shrink below the synced size", 1000, 400, span{1000, 1000}, 1000},
	}
	for _, c := range cases {
		if got := TornCut(c.synced, c.before, c.last); got != c.want {
			t.Errorf("%s: TornCut(%d, %d, %+v) = %d, want %d", c.name, c.synced, c.before, c.last, got, c.want)
		}
	}
}
