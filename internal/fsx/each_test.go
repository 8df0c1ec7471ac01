package fsx

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestEachRunsEveryIndexOnce(t *testing.T) {
	for _, par := range []int{0, 1, 3, 16, 1000} {
		const n = 500
		var seen [n]atomic.Int32
		if err := Each(n, par, func(i int) error { seen[i].Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("par %d: index %d ran %d times", par, i, c)
			}
		}
	}
	if err := Each(0, 4, func(int) error { t.Error("ran with n = 0"); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestEachStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran []int
	err := Each(10, 1, func(i int) error {
		ran = append(ran, i)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || len(ran) != 4 {
		t.Fatalf("one at a time: err %v, ran %v; want boom after 0..3", err, ran)
	}
	// In parallel, calls already started finish, but once the failure is
	// seen no new index starts: far fewer than n run.
	var mu sync.Mutex
	count := 0
	err = Each(100000, 4, func(i int) error {
		mu.Lock()
		count++
		mu.Unlock()
		if i == 0 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || count == 100000 {
		t.Fatalf("in parallel: err %v, %d of 100000 ran", err, count)
	}
}
