package procs

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// TestModelTable is the table of docs/benchmarks.md ("Threads and inline
// crypto on larger hosts"): the model's outputs at 1, 2, 4, 16 and 64
// CPUs. Two CPUs must stay what the A/Bs there support: one thread, every
// batch inline.
func TestModelTable(t *testing.T) {
	for _, c := range []struct {
		cpus, threads, workers, inline int
	}{
		{1, 1, 1, MaxBatch},
		{2, 1, 1, MaxBatch},
		{3, 2, 2, MaxBatch},
		{4, 2, 2, MaxBatch},
		{8, 4, 4, 27},
		{16, 7, 7, 22},
		{64, 27, 27, 19},
	} {
		p := Model(c.cpus)
		if p.CPUs != c.cpus || p.GOMAXPROCS != c.threads || p.CryptoWorkers != c.workers || p.InlineCrypto != c.inline {
			t.Errorf("Model(%d) = %+v; want %d threads, %d workers, inline %d", c.cpus, p, c.threads, c.workers, c.inline)
		}
	}
}

// TestModelShape checks the model's properties at every size up to 1024
// CPUs: threads within 1..cpus and never fewer for more CPUs, the
// threshold within 1..MaxBatch and never larger for more threads.
func TestModelShape(t *testing.T) {
	prevT, prevI := 0, MaxBatch
	for c := 1; c <= 1024; c++ {
		p := Model(c)
		if p.GOMAXPROCS < 1 || p.GOMAXPROCS > c || p.GOMAXPROCS < prevT {
			t.Fatalf("Model(%d).GOMAXPROCS = %d (previous %d)", c, p.GOMAXPROCS, prevT)
		}
		if p.InlineCrypto < 1 || p.InlineCrypto > MaxBatch || p.InlineCrypto > prevI {
			t.Fatalf("Model(%d).InlineCrypto = %d (previous %d)", c, p.InlineCrypto, prevI)
		}
		prevT, prevI = p.GOMAXPROCS, p.InlineCrypto
	}
	if Model(0).GOMAXPROCS != 1 || Model(-3).CPUs != 1 {
		t.Errorf("Model of no CPUs: %+v, want one", Model(0))
	}
}

func TestResolve(t *testing.T) {
	// The operator's GOMAXPROCS wins; workers and threshold follow it.
	p, err := Resolve(2, 2, "")
	if err != nil || p.GOMAXPROCS != 2 || p.CryptoWorkers != 2 || p.InlineCrypto != MaxBatch || p.ThreadsWhy != "GOMAXPROCS set" {
		t.Errorf("Resolve(2, 2, \"\") = %+v, %v", p, err)
	}
	p, err = Resolve(64, 64, "")
	if err != nil || p.GOMAXPROCS != 64 || p.CryptoWorkers != 64 || p.InlineCrypto != InlineCrypto(64) {
		t.Errorf("Resolve(64, 64, \"\") = %+v, %v", p, err)
	}
	p, err = Resolve(16, 0, "8")
	if err != nil || p.GOMAXPROCS != 7 || p.InlineCrypto != 8 || p.InlineWhy != "WIRELANE_INLINE_CRYPTO set" {
		t.Errorf("Resolve(16, 0, \"8\") = %+v, %v", p, err)
	}
	if p, err = Resolve(16, 0, "0"); err != nil || p.InlineCrypto != 0 {
		t.Errorf("Resolve(16, 0, \"0\") = %+v, %v", p, err)
	}
	for _, bad := range []string{"x", "-1", "129", "1e3", " 4"} {
		p, err := Resolve(16, 0, bad)
		if err == nil || !strings.Contains(err.Error(), EnvInline) {
			t.Errorf("Resolve(16, 0, %q): err = %v, want one naming %s", bad, err, EnvInline)
		}
		if p.InlineCrypto != Model(16).InlineCrypto {
			t.Errorf("Resolve(16, 0, %q) kept %d, want the model's %d", bad, p.InlineCrypto, Model(16).InlineCrypto)
		}
	}
}

func TestPlanString(t *testing.T) {
	got := Model(16).String()
	want := "cpus=16 gomaxprocs=7 (model) crypto_workers=7 inline_crypto_batch=22 (model)"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestApply(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		runtime.GOMAXPROCS(old)
		applied.Store(nil)
		envErr.Store(nil)
	})

	t.Setenv(Env, "")
	t.Setenv(EnvInline, "")
	runtime.GOMAXPROCS(2)
	if p := Apply(); p.GOMAXPROCS != 1 || runtime.GOMAXPROCS(0) != 1 || p.InlineCrypto != MaxBatch || Current() != p {
		t.Errorf("two CPUs, no GOMAXPROCS: Apply = %+v, runtime has %d; want 1 thread", p, runtime.GOMAXPROCS(0))
	}

	t.Setenv(Env, "2")
	runtime.GOMAXPROCS(2)
	if p := Apply(); p.GOMAXPROCS != 2 || runtime.GOMAXPROCS(0) != 2 || p.ThreadsWhy != "GOMAXPROCS set" {
		t.Errorf("GOMAXPROCS=2 set: Apply = %+v, runtime has %d; want 2 kept", p, runtime.GOMAXPROCS(0))
	}

	t.Setenv(Env, "")
	runtime.GOMAXPROCS(16)
	if p := Apply(); p.GOMAXPROCS != 7 || runtime.GOMAXPROCS(0) != 7 || p.CPUs != 16 {
		t.Errorf("sixteen CPUs: Apply = %+v, runtime has %d; want 7", p, runtime.GOMAXPROCS(0))
	}

	t.Setenv(EnvInline, "many")
	runtime.GOMAXPROCS(2)
	if p := Apply(); EnvError() == nil || p.InlineCrypto != MaxBatch {
		t.Errorf("bad %s: Apply = %+v, EnvError = %v; want an error and the model's threshold", EnvInline, p, EnvError())
	}
	t.Setenv(EnvInline, "5")
	if p := Apply(); EnvError() != nil || p.InlineCrypto != 5 {
		t.Errorf("%s=5: Apply = %+v, EnvError = %v", EnvInline, p, EnvError())
	}
}

// TestCurrentWithoutApply: a process that never calls Apply (a test, a
// program embedding the device) gets the model's workers and threshold
// for the threads it runs with.
func TestCurrentWithoutApply(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	applied.Store(nil)
	t.Setenv(EnvInline, "")
	runtime.GOMAXPROCS(2)
	if p := Current(); p.GOMAXPROCS != 2 || p.CryptoWorkers != 2 || p.InlineCrypto != MaxBatch || p.ThreadsWhy != "runtime" {
		t.Errorf("Current() with 2 threads = %+v", p)
	}
	runtime.GOMAXPROCS(8)
	if p := Current(); p.GOMAXPROCS != 8 || p.CryptoWorkers != 8 || p.InlineCrypto != InlineCrypto(8) {
		t.Errorf("Current() with 8 threads = %+v", p)
	}
}

// TestPlanLog: the plan is one Info line with every value and the reason.
func TestPlanLog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	Model(16).Log(l)
	Model(2).LogThreads(l)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %q, want two lines", buf.String())
	}
	for _, want := range []string{"level=INFO", `msg="data path plan"`, "cpus=16", "gomaxprocs=7", "crypto_workers=7", "inline_crypto_batch=22",
		"0.41 x 16 CPUs", "larger batches to 6 workers"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("WireGuard plan line %q lacks %q", lines[0], want)
		}
	}
	for _, want := range []string{"cpus=2", "gomaxprocs=1", "0.41 x 2 CPUs"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("OpenVPN plan line %q lacks %q", lines[1], want)
		}
	}
	if strings.Contains(lines[1], "crypto_workers") {
		t.Errorf("OpenVPN plan line %q names crypto workers it does not have", lines[1])
	}
	if w := Model(2).Why(); !strings.Contains(w, "every batch inline") {
		t.Errorf("Model(2).Why() = %q", w)
	}
	p, _ := Resolve(4, 3, "9")
	if w := p.Why(); !strings.Contains(w, "GOMAXPROCS set") || !strings.Contains(w, "WIRELANE_INLINE_CRYPTO set") {
		t.Errorf("operator's plan: Why() = %q", w)
	}
}

// FuzzResolve: any WIRELANE_INLINE_CRYPTO value and CPU count give a plan
// within its bounds, or an error naming the variable; never a panic.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "0", "22", "128", "129", "-1", "x", "1e2", "+5", "0x10", "99999999999999999999"} {
		f.Add(16, 0, s)
	}
	f.Add(2, 2, "")
	f.Add(-5, -1, "3")
	f.Fuzz(func(t *testing.T, cpus, threads int, inline string) {
		cpus %= 1 << 16 // a real machine's count; the model multiplies it
		threads %= 1 << 16
		p, err := Resolve(cpus, threads, inline)
		if err != nil && !strings.Contains(err.Error(), EnvInline) {
			t.Fatalf("error %v does not name %s", err, EnvInline)
		}
		if p.GOMAXPROCS < 1 || p.CryptoWorkers < 1 || p.InlineCrypto < 0 || p.InlineCrypto > MaxBatch || p.CPUs < 1 {
			t.Fatalf("Resolve(%d, %d, %q) = %+v", cpus, threads, inline, p)
		}
	})
}
