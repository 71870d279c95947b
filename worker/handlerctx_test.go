package worker

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestHandlerContext checks that the lazily made handler context behaves as
// a context.WithCancelCause would, whichever of its methods is used first
// and whether it is cancelled before or after.
func TestHandlerContext(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	tests := []struct {
		name string
		// use is called before, and check after, the cancellation.
		use   func(t *testing.T, ctx context.Context) func(t *testing.T)
		early bool // cancel before use
	}{
		{"Err only", func(t *testing.T, ctx context.Context) func(*testing.T) {
			if ctx.Err() != nil {
				t.Fatal("Err before cancel")
			}
			return func(t *testing.T) {
				if !errors.Is(ctx.Err(), context.Canceled) {
					t.Fatalf("Err = %v", ctx.Err())
				}
			}
		}, false},
		{"Done then cancel", func(t *testing.T, ctx context.Context) func(*testing.T) {
			done := ctx.Done()
			select {
			case <-done:
				t.Fatal("Done closed before cancel")
			default:
			}
			return func(t *testing.T) {
				<-done
				if got := context.Cause(ctx); got != ErrLeaseLost {
					t.Fatalf("Cause = %v", got)
				}
			}
		}, false},
		{"cancel then Done", func(t *testing.T, ctx context.Context) func(*testing.T) {
			return func(t *testing.T) {
				<-ctx.Done()
				if got := context.Cause(ctx); got != ErrLeaseLost {
					t.Fatalf("Cause = %v", got)
				}
			}
		}, true},
		{"Cause without Done", func(t *testing.T, ctx context.Context) func(*testing.T) {
			if context.Cause(ctx) != nil {
				t.Fatal("Cause before cancel")
			}
			return func(t *testing.T) {
				if got := context.Cause(ctx); got != ErrLeaseLost {
					t.Fatalf("Cause = %v", got)
				}
			}
		}, false},
		{"child context", func(t *testing.T, ctx context.Context) func(*testing.T) {
			child, cancel := context.WithTimeout(ctx, time.Hour)
			t.Cleanup(cancel)
			return func(t *testing.T) {
				<-child.Done()
				if got := context.Cause(child); got != ErrLeaseLost {
					t.Fatalf("child Cause = %v", got)
				}
			}
		}, false},
		{"child of a cancelled context", func(t *testing.T, ctx context.Context) func(*testing.T) {
			return func(t *testing.T) {
				child, cancel := context.WithCancel(ctx)
				defer cancel()
				<-child.Done()
				if got := context.Cause(child); got != ErrLeaseLost {
					t.Fatalf("child Cause = %v", got)
				}
			}
		}, true},
		{"AfterFunc", func(t *testing.T, ctx context.Context) func(*testing.T) {
			ran := make(chan struct{})
			context.AfterFunc(ctx, func() { close(ran) })
			return func(t *testing.T) { <-ran }
		}, false},
		{"values of Run's context", func(t *testing.T, ctx context.Context) func(*testing.T) {
			if ctx.Value(ctxKey{}) != "v" {
				t.Fatal("value lost")
			}
			if _, ok := ctx.Deadline(); ok {
				t.Fatal("deadline")
			}
			return func(t *testing.T) {
				if ctx.Value(ctxKey{}) != "v" {
					t.Fatal("value lost after cancel")
				}
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &handlerCtx{parent: context.WithoutCancel(parent)}
			if tt.early {
				c.cancel(ErrLeaseLost)
			}
			check := tt.use(t, c)
			c.cancel(ErrLeaseLost)
			c.cancel(ErrShutdown) // only the first cause counts
			check(t)
		})
	}
}
