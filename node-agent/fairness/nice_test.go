package fairness

import "testing"

func TestNearestNice(t *testing.T) {
	for _, tc := range []struct {
		weight float64
		nice   int
	}{
		{1024, 0}, {88761, -20}, {1e9, -20}, {15, 19}, {1, 19}, {0, 19},
		{512, 3}, // between 526 (nice 3) and 423 (nice 4): 526 is nearer on a log scale
		{128, 9}, // 1024/8: 137 (nice 9) is 7 % away, 110 (nice 10) 16 %
	} {
		got, _ := NearestNice(tc.weight)
		if got != tc.nice {
			t.Errorf("NearestNice(%v) = %d, want %d", tc.weight, got, tc.nice)
		}
	}
}

func TestNiceShareErrorPoints(t *testing.T) {
	// PFS, a 1-thread and an 8-thread process: exact thread weights 1024 and
	// 8×128 give 50/50; nice rounds 128 to 137, so the 8-thread process gets
	// 8×137/(1024+8×137) = 51.7 %.
	exact := []float64{1024, 1024}
	_, w := NearestNice(128)
	rounded := []float64{1024, 8 * w}
	if got := NiceShareErrorPoints(exact, rounded); got < 1.6 || got > 1.8 {
		t.Fatalf("error = %.2f points, want 1.7", got)
	}
	if NiceShareErrorPoints(exact, exact) != 0 {
		t.Fatal("no rounding, no error")
	}
}
