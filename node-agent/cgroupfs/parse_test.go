package cgroupfs

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

// parseUint takes a one-number cgroup file as the kernel writes it and
// refuses anything else.
func TestParseUint(t *testing.T) {
	for in, want := range map[string]uint64{"0\n": 0, "1024\n": 1024, " 7 \n": 7, "18446744073709551615\n": math.MaxUint64} {
		if got, err := parseUint([]byte(in)); err != nil || got != want {
			t.Errorf("parseUint(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]error{"": strconv.ErrSyntax, "\n": strconv.ErrSyntax, "-1\n": strconv.ErrSyntax, "1 2\n": strconv.ErrSyntax, "max\n": strconv.ErrSyntax, "18446744073709551616\n": strconv.ErrRange} {
		if got, err := parseUint([]byte(in)); !errors.Is(err, want) {
			t.Errorf("parseUint(%q) = %d, %v; want %v", in, got, err, want)
		}
	}
}
