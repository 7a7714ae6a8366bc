package demo

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Namespace is a network namespace the demo created. An anonymous one lives
// only as long as its handle is open, so the kernel removes it (and the
// interfaces inside it) even if the process is killed; a named one is
// bind-mounted under /var/run/netns (visible to `ip netns`) and survives
// until Close removes it.
type Namespace struct {
	Handle netns.NsHandle
	Name   string // "" for an anonymous namespace
}

// NewNamespace creates a network namespace without moving the calling
// goroutine's thread into it. name == "" creates an anonymous namespace.
func NewNamespace(name string) (*Namespace, error) {
	var ns *Namespace
	err := onFreshThread(func(restore func() error) error {
		var h netns.NsHandle
		var err error
		if name == "" {
			h, err = netns.New()
		} else {
			h, err = netns.NewNamed(name)
		}
		if rerr := restore(); rerr != nil {
			if err == nil {
				h.Close()
			}
			return errors.Join(err, rerr)
		}
		if err != nil {
			return fmt.Errorf("create network namespace %s: %w", name, err)
		}
		ns = &Namespace{Handle: h, Name: name}
		return nil
	})
	return ns, err
}

// Close releases the namespace: an anonymous one disappears once no
// process or socket uses it; a named one is unmounted and its file removed.
func (n *Namespace) Close() error {
	if n == nil {
		return nil
	}
	var err error
	if n.Name != "" {
		err = netns.DeleteNamed(n.Name)
	}
	n.Handle.Close()
	return err
}

// Do runs f on a goroutine whose OS thread is inside the namespace, and
// waits for it. Sockets f opens belong to the namespace for their whole
// life, so they may be used from any goroutine afterwards.
func (n *Namespace) Do(f func() error) error {
	return onFreshThread(func(restore func() error) error {
		if err := netns.Set(n.Handle); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		ferr := f()
		return errors.Join(ferr, restore())
	})
}

// onFreshThread runs f on a new goroutine locked to its OS thread. restore
// switches the thread back to the original namespace; if f never manages
// to restore it, the thread stays locked and the runtime discards it when
// the goroutine ends, so no other goroutine ever runs in the wrong
// namespace.
func onFreshThread(f func(restore func() error) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return // thread stays locked and is discarded
		}
		defer orig.Close()
		restored := true
		restore := func() error {
			if err := netns.Set(orig); err != nil {
				restored = false
				return fmt.Errorf("return to the original network namespace: %w", err)
			}
			return nil
		}
		err = f(restore)
		if restored {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
