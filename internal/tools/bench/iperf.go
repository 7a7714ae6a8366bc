package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// iperfResult is what the suite takes from one iperf3 client run.
type iperfResult struct {
	bitsPerSecond float64 // received by the server
	lostPercent   float64 // UDP only
}

// iperfSum is one of the summaries at the end of iperf3's --json output.
type iperfSum struct {
	BitsPerSecond float64 `json:"bits_per_second"`
	LostPercent   float64 `json:"lost_percent"`
}

// iperfJSON is the part of iperf3's --json output the suite reads.
type iperfJSON struct {
	Error string `json:"error"`
	End   struct {
		SumReceived *iperfSum `json:"sum_received"`
		Sum         *iperfSum `json:"sum"`
	} `json:"end"`
}

// parseIperf reads iperf3 --json output. Warnings iperf3 prints before the
// JSON object are skipped. The rate is the server's (end.sum_received);
// iperf3 versions that lack it for UDP give the server's view in end.sum.
// An "error" field or missing figures are errors.
func parseIperf(out []byte, udp bool) (iperfResult, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return iperfResult{}, errors.New("iperf3 output holds no JSON object")
	}
	var j iperfJSON
	if err := json.Unmarshal(out[i:], &j); err != nil {
		return iperfResult{}, fmt.Errorf("iperf3 output at byte %d: %w", i, err)
	}
	if j.Error != "" {
		return iperfResult{}, fmt.Errorf("iperf3: %s", j.Error)
	}
	s := j.End.SumReceived
	if s == nil && udp {
		s = j.End.Sum
	}
	if s == nil {
		return iperfResult{}, errors.New("iperf3 output has no end.sum_received")
	}
	res := iperfResult{bitsPerSecond: s.BitsPerSecond}
	if udp {
		res.lostPercent = s.LostPercent
	}
	if !(res.bitsPerSecond >= 0) || !(res.lostPercent >= 0 && res.lostPercent <= 100) {
		return iperfResult{}, fmt.Errorf("iperf3 output: implausible figures (%g bit/s, %g%% lost)", res.bitsPerSecond, res.lostPercent)
	}
	return res, nil
}
