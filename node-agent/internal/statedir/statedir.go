// Package statedir is the agent's state directory (--state-dir): what must
// survive a restart — kubelet's original weights, what the closed loops
// learnt — as small JSON files, each written whole or not at all.
package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Dir is a state directory; "" keeps nothing.
type Dir string

// Save writes v as the file name, atomically: a crash leaves the previous
// version.
func (d Dir) Save(name string, v any) error {
	if d == "" {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	path := filepath.Join(string(d), name)
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// Load reads the file name into v. found is false, with no error, when
// there is none (or no directory).
func (d Dir) Load(name string, v any) (found bool, err error) {
	if d == "" {
		return false, nil
	}
	path := filepath.Join(string(d), name)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return true, nil
}
