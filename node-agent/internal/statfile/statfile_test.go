package statfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadKeepsFilesOpenUntilSweep(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var f Files
	read := func(p string) string {
		t.Helper()
		var got string
		if err := f.Read(p, func(d []byte) error { got = string(d); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	read(a)
	read(b)
	var joined string
	if err := f.ReadJoined(func(d []byte) error { joined = string(d); return nil }, dir, "/", "b"); err != nil || joined != "1\n" || f.Len() != 2 {
		t.Fatalf("ReadJoined(dir, /, b) = %q, %v with %d files open; want b's content from its open file, 2 open", joined, err, f.Len())
	}
	if err := os.WriteFile(a, []byte("22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(a); got != "22\n" || f.Len() != 2 {
		t.Fatalf("re-read %q with %d files open; want the new content, 2 open", got, f.Len())
	}
	f.Sweep() // both were read since the start
	read(a)
	f.Sweep() // b was not
	if f.Len() != 1 {
		t.Fatalf("%d files open after b went unread, want 1", f.Len())
	}
	if err := f.Read(filepath.Join(dir, "missing"), func([]byte) error { return nil }); !Gone(err) {
		t.Fatalf("reading a missing file: %v, want a gone error", err)
	}
}

// A thread's schedstat on the real /proc reads again through the kept fd.
func TestProcSchedstat(t *testing.T) {
	var f Files
	p := "/proc/self/schedstat"
	for i := 0; i < 3; i++ {
		if err := f.Read(p, func(d []byte) error {
			if len(d) == 0 {
				t.Fatal("empty schedstat")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A writable file is written whole at offset 0 through its kept fd (cut
// at the new end when Truncate), and a gone one is not created.
func TestWriteJoined(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w")
	if err := os.WriteFile(p, []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := Files{Writable: true, Truncate: true}
	for _, v := range []string{"50", "700"} {
		if err := f.WriteJoined([]byte(v), dir, "/w"); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != v || f.Len() != 1 {
			t.Fatalf("after writing %s the file holds %q with %d open, want %[1]s, 1 open", v, got, f.Len())
		}
	}
	if err := f.WriteJoined([]byte("1"), dir, "/missing"); !Gone(err) {
		t.Fatalf("writing a missing file: %v, want a gone error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("the missing file was created: %v", err)
	}
	var ro Files
	if err := ro.WriteJoined([]byte("1"), dir, "/w"); err == nil {
		t.Error("a read-only set wrote")
	}
}
