// Package testlog gives the OpenVPN packages' tests a *slog.Logger that
// writes to the test log and keeps its lines for assertions.
package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Buffer collects the lines of the logger New returns.
type Buffer struct {
	t     testing.TB
	mu    sync.Mutex // guards lines and done
	lines []string
	done  bool // the test has ended: lines are kept, no longer passed to t
}

// New returns a logger (text format, debug level) whose lines go to
// t.Log and to the returned Buffer.
func New(t testing.TB) (*slog.Logger, *Buffer) {
	b := &Buffer{t: t}
	t.Cleanup(func() {
		b.mu.Lock()
		b.done = true
		b.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// Write takes one formatted record from the handler.
func (b *Buffer) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if !b.done {
		b.t.Log(line)
	}
	return len(p), nil
}

// Has reports whether one line contains every one of subs.
func (b *Buffer) Has(subs ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, line := range b.lines {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(line, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// String returns every line, one a line.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// Logger returns a logger whose lines go to t.Log.
func Logger(t testing.TB) *slog.Logger {
	l, _ := New(t)
	return l
}
