package main

import (
	"bytes"
	"strings"
	"testing"
)

// The command prints every table, and the same bytes on every run.
func TestReportIsDeterministicAndComplete(t *testing.T) {
	var a, b bytes.Buffer
	report(&a)
	report(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two runs printed different output:\n%s\n---\n%s", a.String(), b.String())
	}
	for _, table := range []string{"S0 (seed 000 §3.4)", "table 5.3", "Fig. 4.1", "Load_imbal 158 < 335/2 = 167.5", "fig. 4.4", "SFS example 1", "SFS example 2"} {
		if !strings.Contains(a.String(), table) {
			t.Errorf("output lacks %q", table)
		}
	}
}
