//go:build unix

package blob

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLockModes: shared holders coexist; an exclusive one waits for them
// (and times out with ErrLockTimeout); shared ones wait for it.
func TestLockModes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	r1, err := s.Lock(ctx, Shared, soon())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Lock(ctx, Shared, soon())
	if err != nil {
		t.Fatalf("a second shared holder: %v", err)
	}
	if _, err := s.Lock(ctx, Exclusive, soon()); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("exclusive while shared is held: %v, want ErrLockTimeout", err)
	}
	r1()
	r2()
	rx, err := s.Lock(ctx, Exclusive, soon())
	if err != nil {
		t.Fatalf("exclusive once free: %v", err)
	}
	if _, err := s.Lock(ctx, Shared, soon()); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("shared while exclusive is held: %v, want ErrLockTimeout", err)
	}
	rx()
	if r, err := s.Lock(ctx, Shared, soon()); err != nil {
		t.Fatalf("shared once free: %v", err)
	} else {
		r()
	}
}
