package controllers

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	const p = 10 * time.Second
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	th := newThrottle[string](p)
	for _, c := range []struct {
		what  string
		key   string
		now   float64
		after time.Duration
	}{
		{"a first event: at once", "a", 0, 0},
		{"another key is its own", "b", 0.5, 0},
		{"within the period: at its end", "a", 1, 9 * time.Second},
		{"more within it: the same one, asked for again", "a", 5, 5 * time.Second},
		{"just before the scheduled one", "a", 9.9, 100 * time.Millisecond},
		{"after the scheduled one, within its period: at the end of that", "a", 12, 8 * time.Second},
		{"quiet for a period since: at once", "a", 40, 0},
		{"exactly a period after: at once", "a", 50, 0},
	} {
		if after := th.next(c.key, at(c.now)); after != c.after {
			t.Errorf("%s (%s at %gs): after %s, want %s", c.what, c.key, c.now, after, c.after)
		}
	}
	// Under a steady flood, reconciles are a period apart: one per period
	// (the queue holds a key once, so the same time asked for twice is one
	// reconcile).
	th = newThrottle[string](p)
	var runs []time.Time
	for ms := 0; ms < 60_000; ms += 7 {
		now := at(float64(ms) / 1000)
		if run := now.Add(th.next("k", now)); len(runs) == 0 || !run.Equal(runs[len(runs)-1]) {
			runs = append(runs, run)
		}
	}
	for i := 1; i < len(runs); i++ {
		if gap := runs[i].Sub(runs[i-1]); gap < p {
			t.Fatalf("reconciles %s apart under a flood, want at least %s", gap, p)
		}
	}
	if len(runs) != 7 { // at 0, 10, …, 60 s: the last takes in the minute's last events
		t.Errorf("%d reconciles in a minute's flood, want 7", len(runs))
	}
	// Keys quiet for a period are forgotten once there are many.
	for i := range 2000 {
		th.next(string(rune(i)), at(100))
	}
	th.next("late", at(200))
	if len(th.slot) != 1 {
		t.Errorf("%d keys kept after all but one went quiet, want 1", len(th.slot))
	}
}
