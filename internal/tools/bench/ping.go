package bench

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// pingResult is what the suite takes from one ping -q run.
type pingResult struct {
	received int // echo replies
	millis   int // the run's length as ping reports it
}

// roundTripsPerSecond is the rate of answered requests.
func (r pingResult) roundTripsPerSecond() float64 {
	return float64(r.received) / (float64(r.millis) / 1000)
}

// pingSummary matches iputils ping's summary line, e.g.
// "20000 packets transmitted, 20000 received, 0% packet loss, time 3634ms"
// (with ", +N errors" or ", +N duplicates" possibly before the loss).
var pingSummary = regexp.MustCompile(`(?m)^(\d+) packets transmitted, (\d+) received(?:, \+\d+ \w+)*, [0-9.]+% packet loss, time (\d+)ms`)

// parsePing reads the summary of iputils ping -q output. A run that
// answered nothing, or whose figures do not add up, is an error.
func parsePing(out []byte) (pingResult, error) {
	m := pingSummary.FindSubmatch(out)
	if m == nil {
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			out = out[:i]
		}
		return pingResult{}, fmt.Errorf("ping output has no summary line (first line: %q)", out)
	}
	sent, err1 := strconv.Atoi(string(m[1]))
	rcvd, err2 := strconv.Atoi(string(m[2]))
	ms, err3 := strconv.Atoi(string(m[3]))
	if err := errors.Join(err1, err2, err3); err != nil {
		return pingResult{}, fmt.Errorf("ping summary %q: %w", m[0], err)
	}
	switch {
	case rcvd == 0:
		return pingResult{}, fmt.Errorf("ping summary %q: no reply", m[0])
	case rcvd > sent:
		return pingResult{}, fmt.Errorf("ping summary %q: more replies than requests", m[0])
	case ms <= 0:
		return pingResult{}, fmt.Errorf("ping summary %q: no time elapsed", m[0])
	}
	return pingResult{received: rcvd, millis: ms}, nil
}
