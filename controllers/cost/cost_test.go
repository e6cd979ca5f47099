package cost

import (
	"math"
	"testing"
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
		{in: "999999999999.999999", want: 999_999_999_999_999_999},
		{in: "", bad: true},
		{in: ".5", bad: true},
		{in: "1.", bad: true},
		{in: "-1", bad: true},
		{in: "1e3", bad: true},
		{in: "0.0000001", bad: true},
		{in: "1234567890123", bad: true},
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
	}
}

func TestAddIsExactAcrossManySmallWindows(t *testing.T) {
	// One CPU-hour at 0.045/h, accrued in 3600 one-second windows, is exactly
	// 0.045: the sub-micro parts are carried, not rounded away.
	var total Total
	var err error
	for i := 0; i < 3600; i++ {
		if total, err = total.Add(1_000_000_000, 45_000); err != nil {
			t.Fatal(err)
		}
	}
	if total.Micros != 45_000 || total.Remainder != 0 {
		t.Fatalf("total = %+v, want 45000 micros and no remainder", total)
	}
	// One nanosecond at 1/h is far below a micro-unit but is remembered.
	one, _ := Total{}.Add(1, 1_000_000)
	if one.Micros != 0 || one.Remainder != 1_000_000 {
		t.Fatalf("1ns at 1/h = %+v", one)
	}
}

func TestAddRoundsDownAndCarries(t *testing.T) {
	// 1 s at 0.01/h = 0.01/3600 = 2.777… micro-units: 2 whole, rest carried.
	got, _ := Total{}.Add(1_000_000_000, 10_000)
	if got.Micros != 2 || got.Remainder != 1_000_000_000*10_000-2*NanosecondsPerHour {
		t.Fatalf("got %+v", got)
	}
}

func TestAddLargeValuesDoNotOverflow(t *testing.T) {
	// A year of 100 CPUs (3.15e18 ns, near the int64 limit) at 1000/h:
	// the product needs 84 bits, the result is 8.76e14 micros.
	year := int64(365*24*3600) * 1_000_000_000 * 100
	got, err := Total{}.Add(year, 1000*MicrosPerUnit)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(365*24) * 100 * 1000 * MicrosPerUnit; got.Micros != want {
		t.Fatalf("got %d micros, want %d", got.Micros, want)
	}
	if _, err := (Total{Micros: math.MaxInt64 - 1}).Add(NanosecondsPerHour, 2); err == nil {
		t.Fatal("want an overflow error past MaxInt64 micro-units")
	}
	if _, err := (Total{}).Add(-1, 1); err == nil {
		t.Fatal("want an error for a negative counter delta")
	}
}

func TestFormat(t *testing.T) {
	if got := FormatMicros(1_234_567); got != "1.234567" {
		t.Errorf("FormatMicros = %q", got)
	}
	if got := FormatMicros(45); got != "0.000045" {
		t.Errorf("FormatMicros = %q", got)
	}
	if got := FormatCPUSeconds(1_500_000_000); got != "1.500" {
		t.Errorf("FormatCPUSeconds = %q", got)
	}
}

func TestConsume(t *testing.T) {
	var counters []Counter
	step := func(boot string, ns, wantDelta int64) {
		t.Helper()
		var d int64
		d, counters = Consume(counters, boot, ns)
		if d != wantDelta {
			t.Fatalf("Consume(%s, %d) = %d, want %d (counters %v)", boot, ns, d, wantDelta, counters)
		}
	}
	step("a", 10, 10)
	step("a", 10, 0) // the same report again
	step("a", 25, 15)
	step("a", 20, 0) // an older report arriving late
	step("b", 5, 5)  // the agent restarted: a new boot counts from zero
	step("a", 30, 5) // the last report of the old boot, late
	step("b", 5, 0)
	for _, boot := range []string{"c", "d", "e"} {
		step(boot, 1, 1)
	}
	if len(counters) != MaxCounters || counters[0].BootID != "b" {
		t.Fatalf("counters = %v, want the %d most recent boots", counters, MaxCounters)
	}
}
