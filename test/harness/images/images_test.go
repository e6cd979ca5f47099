package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestArchiveLayout: the tarball is what `ctr images import` reads —
// a manifest naming the ref, a config whose diff_id is the layer's digest,
// and a layer holding the binary, executable, at the entrypoint's path.
func TestArchiveLayout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	if err := Burner.WriteArchive(out, []byte("#!binary")); err != nil {
		t.Fatal(err)
	}
	files := untar(t, mustRead(t, out))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != Burner.Ref || len(m.Layers) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[m.Config], &config); err != nil {
		t.Fatal(err)
	}
	layer := files[m.Layers[0]]
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != "sha256:"+digest(layer) {
		t.Errorf("diff_ids %v, layer digest %s", config.RootFS.DiffIDs, digest(layer))
	}
	if len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/burner" {
		t.Errorf("entrypoint %v, want [/burner]", config.Config.Entrypoint)
	}
	if got := untar(t, layer)["burner"]; string(got) != "#!binary" {
		t.Errorf("layer holds %q at burner", got)
	}
	// The same binary gives the same archive, so images are cached by content.
	again := filepath.Join(t.TempDir(), "again.tar")
	if err := Burner.WriteArchive(again, []byte("#!binary")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, out), mustRead(t, again)) {
		t.Error("two builds of the same binary differ")
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func untar(t *testing.T, b []byte) map[string][]byte {
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, _ := io.ReadAll(tr)
			if h.Name == "burner" && h.Mode&0o111 == 0 {
				t.Errorf("burner is not executable: %o", h.Mode)
			}
			out[h.Name] = data
		}
	}
}
