package procs

import (
	"runtime"
	"testing"
)

func TestChoose(t *testing.T) {
	for _, c := range []struct {
		current int
		set     bool
		want    int
	}{
		{1, false, 1},
		{2, false, 1},
		{2, true, 2}, // the operator's GOMAXPROCS wins
		{3, false, 3},
		{4, false, 4},
		{64, false, 64},
	} {
		if got := Choose(c.current, c.set); got != c.want {
			t.Errorf("Choose(%d, %v) = %d, want %d", c.current, c.set, got, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })

	t.Setenv(Env, "")
	runtime.GOMAXPROCS(2)
	if n := Apply(); n != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("two CPUs, no GOMAXPROCS: Apply = %d, runtime has %d; want 1", n, runtime.GOMAXPROCS(0))
	}

	t.Setenv(Env, "2")
	runtime.GOMAXPROCS(2)
	if n := Apply(); n != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("GOMAXPROCS=2 set: Apply = %d, runtime has %d; want 2 kept", n, runtime.GOMAXPROCS(0))
	}

	t.Setenv(Env, "")
	runtime.GOMAXPROCS(4)
	if n := Apply(); n != 4 || runtime.GOMAXPROCS(0) != 4 {
		t.Errorf("four CPUs: Apply = %d, runtime has %d; want 4 kept", n, runtime.GOMAXPROCS(0))
	}
}
