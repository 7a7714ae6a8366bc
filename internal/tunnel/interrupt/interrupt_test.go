package interrupt

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestEverySignalEndsTheContext(t *testing.T) {
	for _, sig := range Signals {
		ctx, stop := NotifyContext(context.Background())
		if err := syscall.Kill(syscall.Getpid(), sig.(syscall.Signal)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("%v did not end the context", sig)
		}
		stop()
	}
}
