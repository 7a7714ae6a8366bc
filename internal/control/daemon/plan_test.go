package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/sys/procs"
)

// lockedBuffer is a bytes.Buffer for a logger written from the daemon's
// goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDaemonLogsPlan: at start the daemon logs, at Info, one line with the
// CPUs, the threads running Go code, the crypto workers, the inline-crypto
// threshold and why.
func TestDaemonLogsPlan(t *testing.T) {
	needRoot(t)
	withSocketDir(t)
	old := engineFunc
	engineFunc = newFakeEngine
	t.Cleanup(func() { engineFunc = old })
	var buf lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- Run(ctx, Config{Interface: uniqueIf(), Foreground: true, Ready: func() { close(ready) },
			Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	}()
	select {
	case <-ready:
	case err := <-res:
		t.Fatalf("Run ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}
	cancel()
	waitResult(t, res, "cancel")
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `msg="data path plan"`) {
			if line != "" {
				t.Errorf("the plan logged twice:\n%s", buf.String())
			}
			line = l
		}
	}
	p := procs.Current()
	for _, want := range []string{"level=INFO", fmt.Sprintf("cpus=%d", p.CPUs), fmt.Sprintf("gomaxprocs=%d", p.GOMAXPROCS),
		fmt.Sprintf("crypto_workers=%d", p.CryptoWorkers), fmt.Sprintf("inline_crypto_batch=%d", p.InlineCrypto), "why=", "threads: "} {
		if !strings.Contains(line, want) {
			t.Errorf("plan line %q lacks %q; the log:\n%s", line, want, buf.String())
		}
	}
}

// TestBadInlineEnvRefused: a bad WIRELANE_INLINE_CRYPTO stops the daemon
// before it starts, naming the variable.
func TestBadInlineEnvRefused(t *testing.T) {
	oldProcs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(oldProcs)
		t.Setenv(procs.EnvInline, "")
		procs.Apply() // forget the complaint
		runtime.GOMAXPROCS(oldProcs)
	})
	t.Setenv(procs.EnvInline, "lots")
	procs.Apply()
	var c Config
	if err := c.applyEnv(); err == nil || !strings.Contains(err.Error(), procs.EnvInline) {
		t.Errorf("applyEnv with %s=lots: %v", procs.EnvInline, err)
	}
}
