package conn

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The one refusal policy, case by case (gso_policy.go).
func TestClassifyRefusal(t *testing.T) {
	for _, c := range []struct {
		name              string
		e                 unix.Errno
		segmented, sticky bool
		want              refusal
	}{
		{"segmented EIO: no checksum offload", unix.EIO, true, false, refuseGSOOff},
		{"segmented EIO with a source", unix.EIO, true, true, refuseGSOOff},
		{"segmented EMSGSIZE: above the path MTU", unix.EMSGSIZE, true, false, refuseSegSize},
		{"segmented EMSGSIZE with a source", unix.EMSGSIZE, true, true, refuseSegSize},
		{"segmented EINVAL without a source", unix.EINVAL, true, false, refuseSegSize},
		{"segmented EINVAL with a source: the source first", unix.EINVAL, true, true, refuseSource},
		{"single EINVAL with a source", unix.EINVAL, false, true, refuseSource},
		{"single ENODEV with a source", unix.ENODEV, false, true, refuseSource},
		{"single EADDRNOTAVAIL with a source", unix.EADDRNOTAVAIL, false, true, refuseSource},
		{"single ENETUNREACH with a source", unix.ENETUNREACH, false, true, refuseSource},
		{"single EINVAL without a source", unix.EINVAL, false, false, refuseFail},
		{"single EMSGSIZE: skip it", unix.EMSGSIZE, false, false, refuseSkip},
		{"single EMSGSIZE with a source", unix.EMSGSIZE, false, true, refuseSkip},
		{"single EIO", unix.EIO, false, false, refuseFail},
		{"segmented EPERM", unix.EPERM, true, false, refuseFail},
		{"single ENETUNREACH without a source", unix.ENETUNREACH, false, false, refuseFail},
	} {
		if got := classifyRefusal(c.e, c.segmented, c.sticky); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A refused size lowers the limit only downwards; EIO turns GSO off.
func TestSegMaxOnlyFalls(t *testing.T) {
	b := NewStdBindOptions(Options{})
	b.segMax.Store(noSegLimit)
	b.lowerSegMax(1400)
	b.lowerSegMax(1500)
	if got := b.segMax.Load(); got != 1400 {
		t.Fatalf("limit %d after refusals of 1400 and 1500, want 1400", got)
	}
	b.lowerSegMax(1000)
	if got := b.segMax.Load(); got != 1000 {
		t.Fatalf("limit %d, want 1000", got)
	}
}

// build joins equal-size datagrams to one route into a segmented message
// only below the segment limit, and never joins datagrams of two routes
// (SendEach), whatever their sizes.
func TestBuildSegmentsBelowLimitAndPerRoute(t *testing.T) {
	st := newSendState(new(RCU), false)
	defer st.rd.Release()
	ra := NewRoute(Endpoint{Dst: loop4(1)}, 1)
	rb := NewRoute(Endpoint{Dst: loop4(2)}, 1)
	small, big := stamped(4, 1000, 1), stamped(4, 1400, 2)

	st.build(small, ra, nil, 1400, true)
	if st.nmsg != 1 || !st.seg[0] {
		t.Fatalf("1000-byte run under a 1400 limit: %d messages, segmented %v", st.nmsg, st.seg[0])
	}
	st.clear()
	st.build(big, ra, nil, 1400, true)
	if st.nmsg != 4 {
		t.Fatalf("1400-byte run at a 1400 limit: %d messages, want 4 single ones", st.nmsg)
	}
	st.clear()
	st.build(small, ra, nil, 0, true)
	if st.nmsg != 4 {
		t.Fatalf("GSO off: %d messages, want 4", st.nmsg)
	}
	st.clear()
	routes := []*Route{ra, ra, rb, rb}
	st.build(small, routes[0], routes, noSegLimit, true)
	if st.nmsg != 2 || !st.seg[0] || !st.seg[1] || st.end[0] != 2 || st.end[1] != 4 {
		t.Fatalf("two routes: %d messages ending at %v", st.nmsg, st.end[:st.nmsg])
	}
	st.clear()
	routes = []*Route{ra, rb, ra, rb}
	st.build(small, routes[0], routes, noSegLimit, true)
	if st.nmsg != 4 {
		t.Fatalf("alternating routes: %d messages, want 4", st.nmsg)
	}
	st.clear()
}
