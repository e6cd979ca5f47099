package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "state")) // created by the first Save
	var v map[string]int
	if found, err := d.Load("a.json", &v); found || err != nil {
		t.Fatalf("a missing file: found %v, %v", found, err)
	}
	if err := d.Save("a.json", map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if found, err := d.Load("a.json", &v); !found || err != nil || v["x"] != 1 {
		t.Fatalf("after saving: found %v, %v, %v", found, v, err)
	}
	if _, err := os.Stat(filepath.Join(string(d), "a.json.tmp")); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left behind: %v", err)
	}
	if err := os.WriteFile(filepath.Join(string(d), "b.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load("b.json", &v); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a corrupt file: %v, want an error saying so", err)
	}
	if err := Dir("").Save("a.json", 1); err != nil {
		t.Errorf("no directory: Save %v, want nothing kept and no error", err)
	}
	if found, err := Dir("").Load("a.json", &v); found || err != nil {
		t.Errorf("no directory: Load found %v, %v", found, err)
	}
}
