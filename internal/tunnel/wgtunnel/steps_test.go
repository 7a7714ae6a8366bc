package wgtunnel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
)

// changes is a log of made and undone changes, for steps that only
// pretend to change something.
type changes struct {
	undo netcfg.Undo
	log  []string
}

// change returns a step that records "do NAME" and pushes "undo NAME".
func (c *changes) change(name string) step {
	return step{name, func(context.Context) error {
		c.log = append(c.log, "do "+name)
		c.undo.Push(name, func() error { c.log = append(c.log, "undo "+name); return nil })
		return nil
	}}
}

func TestAFailingStepUndoesTheStepsBeforeIt(t *testing.T) {
	var c changes
	cause := errors.New("step three failed")
	noted := 0
	err := runSteps(context.Background(), &c.undo, func(n int) { noted = n }, []step{
		c.change("one"),
		c.change("two"),
		{"three", func(context.Context) error { return cause }},
		c.change("four"),
	})
	if !errors.Is(err, cause) {
		t.Fatalf("err = %v, want the failing step's error", err)
	}
	want := []string{"do one", "do two", "undo two", "undo one"}
	if !slices.Equal(c.log, want) {
		t.Errorf("changes = %q, want %q", c.log, want)
	}
	if noted != 2 || c.undo.Len() != 0 {
		t.Errorf("noted %d changes to undo, %d left on the stack; want 2 and 0", noted, c.undo.Len())
	}
}

func TestAFailingStepUndoesWhatItDidItself(t *testing.T) {
	var c changes
	err := runSteps(context.Background(), &c.undo, nil, []step{
		c.change("one"),
		{"half", func(context.Context) error {
			c.log = append(c.log, "do half")
			c.undo.Push("half", func() error { c.log = append(c.log, "undo half"); return nil })
			return errors.New("failed half way")
		}},
	})
	want := []string{"do one", "do half", "undo half", "undo one"}
	if err == nil || !slices.Equal(c.log, want) {
		t.Errorf("err = %v, changes = %q; want an error and %q", err, c.log, want)
	}
}

func TestCancellingBetweenStepsUndoes(t *testing.T) {
	var c changes
	ctx, cancel := context.WithCancel(context.Background())
	err := runSteps(ctx, &c.undo, nil, []step{
		c.change("one"),
		{"interrupt", func(context.Context) error { cancel(); return nil }},
		c.change("never"),
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	want := []string{"do one", "undo one"}
	if !slices.Equal(c.log, want) {
		t.Errorf("changes = %q, want %q", c.log, want)
	}
}

func TestCancellingAfterTheLastStepUndoes(t *testing.T) {
	var c changes
	ctx, cancel := context.WithCancel(context.Background())
	err := runSteps(ctx, &c.undo, nil, []step{
		c.change("one"),
		{"interrupt", func(context.Context) error { cancel(); return nil }},
	})
	if !errors.Is(err, context.Canceled) || !slices.Equal(c.log, []string{"do one", "undo one"}) {
		t.Errorf("err = %v, changes = %q; want context.Canceled and one change undone", err, c.log)
	}
}

func TestAFailedUndoIsJoinedAfterTheCause(t *testing.T) {
	var c changes
	cause := errors.New("the cause")
	c.undo.Push("stuck", func() error { return errors.New("cannot undo") })
	err := runSteps(context.Background(), &c.undo, nil, []step{
		c.change("one"),
		{"fail", func(context.Context) error { return cause }},
	})
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 || j.Unwrap()[0] != cause || !strings.Contains(err.Error(), "undo stuck: cannot undo") {
		t.Fatalf("err = %v; want errors.Join(cause, undo error)", err)
	}
	if !slices.Equal(c.log, []string{"do one", "undo one"}) {
		t.Errorf("changes = %q: the other inverses must still run", c.log)
	}
}

func TestStepsThatSucceedKeepTheirChanges(t *testing.T) {
	var c changes
	if err := runSteps(context.Background(), &c.undo, nil, []step{c.change("one"), c.change("two")}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.log, []string{"do one", "do two"}) || c.undo.Len() != 0 {
		t.Errorf("changes = %q, %d inverses left; want both kept and the stack discarded", c.log, c.undo.Len())
	}
}
