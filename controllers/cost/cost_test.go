package cost

import (
	"math/big"
	"testing"
	"time"
)

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "0.045", want: 45_000},
		{in: "12", want: 12_000_000},
		{in: "3.5", want: 3_500_000},
		{in: "0.000001", want: 1},
		{in: "999999.999999", want: MaxPriceMicros},
		{in: "1000000", bad: true},
		{in: "999999999999.999999", bad: true}, // the old CRD's limit, which overflowed totals
		{in: "", bad: true},
		{in: ".5", bad: true},
		{in: "1.", bad: true},
		{in: "-1", bad: true},
		{in: "1e3", bad: true},
		{in: "0.0000001", bad: true},
	} {
		got, err := ParsePrice(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParsePrice(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePrice(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if back, _ := ParsePrice(FormatPrice(got)); back != got {
			t.Errorf("FormatPrice(%d) = %q reads back as %d", got, FormatPrice(got), back)
		}
	}
	if FormatPrice(45_000) != "0.045" || FormatPrice(12_000_000) != "12" || FormatPrice(0) != "0" {
		t.Errorf("FormatPrice: %q %q %q", FormatPrice(45_000), FormatPrice(12_000_000), FormatPrice(0))
	}
}

func TestCostIsRoundedOnceAndExact(t *testing.T) {
	// One CPU-hour at 0.045/h is exactly 0.045, however it was measured.
	if got := Cost(big.NewInt(NanosecondsPerHour), 45_000); got.Int64() != 45_000 {
		t.Fatalf("one CPU-hour at 0.045 = %s micros", got)
	}
	// 1 s at 0.01/h = 2.777… micro-units: rounded down to 2.
	if got := Cost(big.NewInt(1_000_000_000), 10_000); got.Int64() != 2 {
		t.Fatalf("1 s at 0.01/h = %s micros", got)
	}
	// The largest price for 100000 CPUs over a year: the product needs
	// 125 bits and the result 76; nothing overflows.
	year := new(big.Int).Mul(big.NewInt(100_000*365*24), big.NewInt(NanosecondsPerHour))
	want := new(big.Int).Mul(big.NewInt(100_000*365*24), big.NewInt(MaxPriceMicros))
	if got := Cost(year, MaxPriceMicros); got.Cmp(want) != 0 {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got := FormatMicros(want); got != "875999999999124.000000" {
		t.Fatalf("FormatMicros(%s) = %s", want, got)
	}
}

func TestFixedDecimals(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		text string
	}{{0, "0.000000000"}, {1, "0.000000001"}, {1_500_000_000, "1.500000000"}, {-2_000_000_001, "-2.000000001"}} {
		if got := FormatSeconds(big.NewInt(tc.ns)); got != tc.text {
			t.Errorf("FormatSeconds(%d) = %q, want %q", tc.ns, got, tc.text)
		}
		if back, err := ParseSeconds(tc.text); err != nil || back.Int64() != tc.ns {
			t.Errorf("ParseSeconds(%q) = %v, %v", tc.text, back, err)
		}
	}
	if got := FormatMicros(big.NewInt(45)); got != "0.000045" {
		t.Errorf("FormatMicros(45) = %q", got)
	}
	if v, err := ParseMicros("1.5"); err != nil || v.Int64() != 1_500_000 {
		t.Errorf("ParseMicros(1.5) = %v, %v", v, err)
	}
	for _, bad := range []string{"", "x", "1.0000001", "."} {
		if _, err := ParseMicros(bad); err == nil {
			t.Errorf("ParseMicros(%q) accepted", bad)
		}
	}
}

func TestSpread(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	prices := []Price{{Micros: 100, Since: at(-100)}, {Micros: 200, Since: at(4)}, {Micros: 300, Since: at(7)}}
	for _, tc := range []struct {
		name     string
		ns       int64
		from, to time.Time
		want     []Segment
	}{
		{"within one price", 10, at(0), at(3), []Segment{{at(0), at(3), 100, 10}}},
		{"across two changes", 10, at(0), at(10), []Segment{{at(0), at(4), 100, 4}, {at(4), at(7), 200, 3}, {at(7), at(10), 300, 3}}},
		{"rounding goes to the last part", 7, at(0), at(10), []Segment{{at(0), at(4), 100, 2}, {at(4), at(7), 200, 2}, {at(7), at(10), 300, 3}}},
		{"before the first price", 5, at(-300), at(-200), []Segment{{at(-300), at(-200), 100, 5}}},
		{"after the last change", 5, at(20), at(30), []Segment{{at(20), at(30), 300, 5}}},
		{"an empty window", 5, at(5), at(5), []Segment{{at(5), at(5), 200, 5}}},
	} {
		got := Spread(tc.ns, tc.from, tc.to, prices)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		var sum int64
		for i := range got {
			sum += got[i].Nanoseconds
			if got[i] != tc.want[i] {
				t.Errorf("%s: segment %d = %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
		if sum != tc.ns {
			t.Errorf("%s: parts add up to %d, not %d", tc.name, sum, tc.ns)
		}
	}
}
