// Package cost is the exact money arithmetic of kubefair (DESIGN.md §Cost):
// prices and totals are integers, never floats, and cumulative CPU counters
// from the node agents are consumed exactly once per agent boot.
package cost

import (
	"fmt"
	"math/big"
	"strings"
)

// NanosecondsPerHour converts a CPU counter in nanoseconds to CPU-hours.
const NanosecondsPerHour = 3600 * 1_000_000_000

// MicrosPerUnit is the number of micro-units in one unit of currency.
const MicrosPerUnit = 1_000_000

// ParsePrice turns a decimal price per CPU-hour ("0.045", "12", "3.5") into
// micro-units of its currency. It accepts what the CRD accepts: up to 12
// integer digits and up to 6 fraction digits, no sign, no exponent.
func ParsePrice(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || (hasDot && (frac == "" || len(frac) > 6)) {
		return 0, fmt.Errorf("price %q: want a non-negative decimal with at most 12 integer and 6 fraction digits", s)
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("price %q: unexpected character %q", s, c)
			}
		}
	}
	frac += strings.Repeat("0", 6-len(frac))
	var micros int64
	for _, c := range whole + frac {
		micros = micros*10 + int64(c-'0')
	}
	return micros, nil
}

// Total is an exact running total of money: Micros whole micro-units plus
// Remainder/NanosecondsPerHour of a micro-unit that has not yet added up to
// a whole one. Keeping the remainder means rounding never loses money,
// however small each window is.
type Total struct {
	Micros    int64
	Remainder int64
}

// Add accrues cpuNanoseconds of CPU at priceMicros per CPU-hour. The product
// is computed in arbitrary precision, so large counters cannot overflow.
func (t Total) Add(cpuNanoseconds, priceMicros int64) (Total, error) {
	if cpuNanoseconds < 0 || priceMicros < 0 {
		return t, fmt.Errorf("cost: negative input (cpu %dns, price %d micros)", cpuNanoseconds, priceMicros)
	}
	num := new(big.Int).Mul(big.NewInt(cpuNanoseconds), big.NewInt(priceMicros))
	num.Add(num, big.NewInt(t.Remainder))
	quo, rem := new(big.Int).QuoRem(num, big.NewInt(NanosecondsPerHour), new(big.Int))
	quo.Add(quo, big.NewInt(t.Micros))
	if !quo.IsInt64() {
		return t, fmt.Errorf("cost: total exceeds %d micro-units", int64(^uint64(0)>>1))
	}
	return Total{Micros: quo.Int64(), Remainder: rem.Int64()}, nil
}

// FormatMicros renders micro-units as a decimal with six fraction digits,
// e.g. 1234567 → "1.234567".
func FormatMicros(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	return fmt.Sprintf("%s%d.%06d", sign, micros/MicrosPerUnit, micros%MicrosPerUnit)
}

// FormatCPUSeconds renders a nanosecond counter as CPU-seconds with three
// fraction digits, truncated, e.g. 1500000000 → "1.500".
func FormatCPUSeconds(ns int64) string {
	return fmt.Sprintf("%d.%03d", ns/1_000_000_000, ns%1_000_000_000/1_000_000)
}

// Counter is the last cumulative CPU counter consumed from one agent boot.
type Counter struct {
	BootID         string
	CPUNanoseconds int64
}

// MaxCounters is how many agent boots are remembered per node: enough for
// reports of the previous boots that arrive late, few enough to keep the
// status small.
const MaxCounters = 4

// Consume takes a report's cumulative counter for one boot and returns the
// CPU nanoseconds not yet accrued, with the updated list of counters
// (most recent boot last). A counter that did not grow (a repeated or an
// out-of-order report) yields 0. A boot id never seen starts from zero, as a
// restarted agent's counters do.
func Consume(counters []Counter, bootID string, cpuNanoseconds int64) (int64, []Counter) {
	out := make([]Counter, 0, len(counters)+1)
	var delta int64
	found := false
	for _, c := range counters {
		if c.BootID != bootID {
			out = append(out, c)
			continue
		}
		found = true
		if cpuNanoseconds > c.CPUNanoseconds {
			delta = cpuNanoseconds - c.CPUNanoseconds
			c.CPUNanoseconds = cpuNanoseconds
		}
		out = append(out, c)
	}
	if !found {
		if cpuNanoseconds > 0 {
			delta = cpuNanoseconds
		}
		out = append(out, Counter{BootID: bootID, CPUNanoseconds: max(cpuNanoseconds, 0)})
		if len(out) > MaxCounters {
			out = out[len(out)-MaxCounters:]
		}
	}
	return delta, out
}
