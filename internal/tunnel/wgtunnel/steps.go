package wgtunnel

import (
	"context"
	"errors"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
)

// step is one stage of bringing a tunnel up. Its change, if it makes one,
// pushes its inverse on the undo stack before it returns.
type step struct {
	name string
	run  func(ctx context.Context) error
}

// runSteps runs steps in order. When one fails, or ctx is done before the
// next one starts, every inverse recorded so far runs, newest first, and
// the cause comes back joined with any inverse that failed
// (errors.Join(cause, undoErr)); note is told how many changes are
// undone. When all succeed the stack is discarded: the changes stay.
func runSteps(ctx context.Context, undo *netcfg.Undo, note func(n int), steps []step) (err error) {
	defer func() {
		if err == nil {
			undo.Discard()
			return
		}
		if n := undo.Len(); n > 0 && note != nil {
			note(n)
		}
		if rerr := undo.Rollback(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.run(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}
