package main

import "testing"

func TestBadArgumentsExitWithUsageStatus(t *testing.T) {
	for _, args := range [][]string{
		{"--only=inproc,warp"},
		{"--repeats", "many"},
		{"stray"},
		{"--no-such-flag"},
		{"--netpeers=100,lots"},
		{"--netpeers=0"},
	} {
		if got := run(args); got != 2 {
			t.Errorf("run(%q) = %d, want 2", args, got)
		}
	}
}

func TestInvalidConfigFails(t *testing.T) {
	if got := run([]string{"--quick", "--duration=-1s", "--only=bound"}); got != 1 {
		t.Errorf("negative duration: exit %d, want 1", got)
	}
}

func TestQuickBoundRunSucceeds(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for about a second")
	}
	if got := run([]string{"--quick", "--only=bound"}); got != 0 {
		t.Errorf("exit %d, want 0", got)
	}
}

func TestBadInprocOptionsFail(t *testing.T) {
	for _, args := range [][]string{
		{"--quick", "--only=bound", "--window=0"},
		{"--quick", "--only=bound", "--loss-timeout=0s"},
		{"--quick", "--only=bound", "--engines=wirelane,boringtun"},
	} {
		if got := run(args); got != 1 {
			t.Errorf("run(%q) = %d, want 1", args, got)
		}
	}
}

func TestHelpAndVersionExitZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--version"}} {
		if got := run(args); got != 0 {
			t.Errorf("run(%q) = %d, want 0", args, got)
		}
	}
}
