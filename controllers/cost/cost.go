// Package cost is the exact money arithmetic of kubefair (docs/controller.md
// §Billing): prices are integers in millionths of a currency unit, CPU time
// is integer nanoseconds, products and sums are arbitrary-precision
// integers (math/big), so nothing overflows and nothing is a float.
package cost

import (
	"fmt"
	"math/big"
	"strings"
	"time"
)

// NanosecondsPerHour converts a CPU counter in nanoseconds to CPU-hours.
const NanosecondsPerHour = 3600 * 1_000_000_000

// MicrosPerUnit is the number of micro-units in one unit of currency.
const MicrosPerUnit = 1_000_000

// MaxPriceMicros is the highest price per CPU-hour the CRD accepts,
// 999999.999999, in micro-units.
const MaxPriceMicros = 999_999_999_999

// ParsePrice turns a decimal price per CPU-hour ("0.045", "12", "3.5") into
// micro-units of its currency. It accepts what the CRD accepts: up to 6
// integer digits and up to 6 fraction digits, no sign, no exponent.
func ParsePrice(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 6 || (hasDot && (frac == "" || len(frac) > 6)) {
		return 0, fmt.Errorf("price %q: want a decimal from 0 to 999999.999999 with at most 6 fraction digits", s)
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

// FormatPrice is the canonical form of a price: "0.045", "12", "3.5".
func FormatPrice(micros int64) string {
	s := fmt.Sprintf("%d.%06d", micros/MicrosPerUnit, micros%MicrosPerUnit)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// Cost is ns of CPU at priceMicros per CPU-hour, in micro-units, rounded
// down: ⌊ns × price / 3.6e12⌋.
func Cost(ns *big.Int, priceMicros int64) *big.Int {
	num := new(big.Int).Mul(ns, big.NewInt(priceMicros))
	return num.Quo(num, big.NewInt(NanosecondsPerHour))
}

// FormatMicros renders micro-units as a decimal with six fraction digits,
// e.g. 1234567 → "1.234567".
func FormatMicros(micros *big.Int) string { return formatFixed(micros, 6) }

// ParseMicros reads FormatMicros's output back.
func ParseMicros(s string) (*big.Int, error) { return parseFixed(s, 6) }

// FormatSeconds renders nanoseconds as exact seconds, e.g. 1500000000 →
// "1.500000000".
func FormatSeconds(ns *big.Int) string { return formatFixed(ns, 9) }

// ParseSeconds reads FormatSeconds's output back as nanoseconds.
func ParseSeconds(s string) (*big.Int, error) { return parseFixed(s, 9) }

func formatFixed(v *big.Int, digits int) string {
	sign := ""
	a := new(big.Int).Set(v)
	if a.Sign() < 0 {
		sign = "-"
		a.Neg(a)
	}
	s := a.String()
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	return sign + s[:len(s)-digits] + "." + s[len(s)-digits:]
}

func parseFixed(s string, digits int) (*big.Int, error) {
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if whole == "" || len(frac) > digits {
		return nil, fmt.Errorf("%q: want a decimal with at most %d fraction digits", s, digits)
	}
	v, ok := new(big.Int).SetString(whole+frac+strings.Repeat("0", digits-len(frac)), 10)
	if !ok {
		return nil, fmt.Errorf("%q: not a decimal", s)
	}
	if strings.HasPrefix(s, "-") {
		v.Neg(v)
	}
	return v, nil
}

// Price is a price per CPU-hour, in micro-units, in force from Since.
type Price struct {
	Micros int64
	Since  time.Time
}

// Segment is the CPU of one window used while one price was in force.
type Segment struct {
	From, To    time.Time
	Micros      int64
	Nanoseconds int64
}

// Spread splits ns of CPU, used over the window [from, to], across the
// prices in force during it, in proportion to time (the agent measures a
// window as a whole). prices are oldest first; before the first one's
// Since, the first price applies. The parts add up to ns exactly: each is
// rounded down and the last takes what is left.
func Spread(ns int64, from, to time.Time, prices []Price) []Segment {
	if len(prices) == 0 {
		return nil
	}
	var segs []Segment
	for i, p := range prices {
		start, end := from, to
		if i > 0 && p.Since.After(start) {
			start = p.Since
		}
		if i+1 < len(prices) && prices[i+1].Since.Before(end) {
			end = prices[i+1].Since
		}
		if end.After(start) {
			segs = append(segs, Segment{From: start, To: end, Micros: p.Micros})
		}
	}
	if len(segs) == 0 { // an empty window: all at the price in force at its end
		return []Segment{{From: from, To: to, Micros: priceAt(prices, to), Nanoseconds: ns}}
	}
	total := big.NewInt(int64(to.Sub(from)))
	left := ns
	for i := range segs[:len(segs)-1] {
		part := new(big.Int).Mul(big.NewInt(ns), big.NewInt(int64(segs[i].To.Sub(segs[i].From))))
		segs[i].Nanoseconds = part.Quo(part, total).Int64()
		left -= segs[i].Nanoseconds
	}
	segs[len(segs)-1].Nanoseconds = left
	return segs
}

func priceAt(prices []Price, t time.Time) int64 {
	p := prices[0].Micros
	for _, q := range prices[1:] {
		if !q.Since.After(t) {
			p = q.Micros
		}
	}
	return p
}
