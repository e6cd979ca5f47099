// Package images builds the container images kubefair's tests and local
// clusters run — the controller, the agent, a CPU burner and a pause
// sandbox — from this repository's static binaries, with no registry and
// no image builder: each image is one layer holding its binaries, written
// as a docker-archive tarball that `ctr images import` and containerd's
// Import accept.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Image is one single-binary image.
type Image struct {
	// Ref is the image's name as pods spell it, e.g. "kubefair.local/burner:dev".
	Ref string
	// Package is the Go main package built into the image (./-relative to
	// the repository root), installed as /<base name of the package>.
	Package string
	// Entrypoint defaults to the binary.
	Entrypoint []string
	// CPrograms are static C programs built into the image beside the
	// binary: their sources, ./-relative, each installed as
	// /<base name without .c>.
	CPrograms []string
}

// Tag of every image built from the working tree.
const Tag = "dev"

// The images of kubefair's local clusters.
var (
	Controller = Image{Ref: "kubefair.local/kubefair-controller:" + Tag, Package: "./controllers/cmd/kubefair-controller"}
	Agent      = Image{Ref: "kubefair.local/kubefair-agent:" + Tag, Package: "./node-agent/cmd/kubefair-agent"}
	// The burner image also holds the spinner (at Spinner), whose
	// processes run nothing but their spinning threads.
	Burner = Image{Ref: "kubefair.local/burner:" + Tag, Package: "./test/harness/cmd/burner",
		CPrograms: []string{"./test/harness/cmd/spinner/spinner.c"}}
	Pause = Image{Ref: "kubefair.local/pause:" + Tag, Package: "./test/harness/cmd/pause"}
)

// Spinner is the spinner's path in the burner image.
const Spinner = "/spinner"

// Binary is the path of the image's binary inside it.
func (img Image) Binary() string { return "/" + filepath.Base(img.Package) }

// Build compiles the image's binaries (static, from repoRoot) and writes
// the image as a docker-archive tarball at out.
func (img Image) Build(repoRoot, out string) error {
	tmp, err := os.MkdirTemp("", "kubefair-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(img.Package))
	// No -trimpath: built as the tests are (make test sets CGO_ENABLED=0
	// for both), the binary reuses their compiled packages.
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", bin, img.Package)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for %s: %w\n%s", img.Package, img.Ref, err, b)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var extra []tarFile
	for _, src := range img.CPrograms {
		prog, err := CompileStatic(filepath.Join(repoRoot, src), tmp)
		if err != nil {
			return fmt.Errorf("%s for %s: %w", src, img.Ref, err)
		}
		b, err := os.ReadFile(prog)
		if err != nil {
			return err
		}
		extra = append(extra, tarFile{name: filepath.Base(prog), mode: 0o755, data: b})
	}
	return img.writeArchive(out, data, extra...)
}

// CompileStatic builds a static C program from source into dir and
// returns its path (dir/<base name without .c>).
func CompileStatic(source, dir string) (string, error) {
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(source), ".c"))
	cmd := exec.Command("gcc", "-static", "-O2", "-pthread", "-Wall", "-Werror", "-o", out, source, "-lm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling %s (gcc: hack/deps.sh installs it): %w\n%s", source, err, b)
	}
	return out, nil
}

// WriteArchive writes the image, with binary as its one file, as a
// docker-archive tarball: manifest.json, the config and one layer.
func (img Image) WriteArchive(out string, binary []byte) error {
	return img.writeArchive(out, binary)
}

func (img Image) writeArchive(out string, binary []byte, extra ...tarFile) error {
	layer, err := tarOf(append([]tarFile{
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: img.Binary()[1:], mode: 0o755, data: binary},
	}, extra...))
	if err != nil {
		return err
	}
	entry := img.Entrypoint
	if len(entry) == 0 {
		entry = []string{img.Binary()}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": entry, "Env": []string{"PATH=/"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + digest(layer)}},
	})
	if err != nil {
		return err
	}
	configName := digest(config) + ".json"
	layerName := digest(layer) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.Ref}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	archive, err := tarOf([]tarFile{
		{name: configName, mode: 0o644, data: config},
		{name: digest(layer) + "/", mode: 0o755, dir: true},
		{name: layerName, mode: 0o644, data: layer},
		{name: "manifest.json", mode: 0o644, data: manifest},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}

type tarFile struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// tarOf writes files into a tar with fixed times and owners, so the same
// binary always gives the same image digest.
func tarOf(files []tarFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
