package bench

import (
	"errors"
	"fmt"
	"time"
)

// ProgressFunc is told before each step: its number (from 1), the planned
// total, and what it measures.
type ProgressFunc func(step, total int, what string)

// progress counts steps against a planned total.
type progress struct {
	n, total int
	fn       ProgressFunc
}

func (p *progress) step(what string) {
	p.n++
	if p.n > p.total {
		p.total = p.n
	}
	if p.fn != nil {
		p.fn(p.n, p.total, what)
	}
}

// ErrSkipped marks a section that could not run on this machine (not root,
// a tool missing); Run records it as a note and carries on.
var ErrSkipped = errors.New("skipped")

// plannedSteps is the number of progress steps Run will take for cfg.
func plannedSteps(cfg Config) int {
	n := 0
	if cfg.Has(SectionInproc) {
		n += cfg.Repeats * len(inprocCases) * len(cfg.Engines)
	}
	if cfg.Has(SectionPeers) {
		n += cfg.Repeats * len(cfg.ActivePeers) * len(peersDirections) * len(peersEngines(cfg))
	}
	if cfg.Has(SectionNetns) {
		n += netnsSetupSteps + cfg.Repeats*len(netnsTests)*len(netnsEngines(cfg))
	}
	if cfg.Has(SectionNetpeers) {
		n += netpeersSteps(cfg)
	}
	if cfg.Has(SectionOpenVPN) {
		n += openvpnSteps(cfg)
	}
	if cfg.Has(SectionHandshake) {
		n += cfg.Repeats * len(handshakeEngines(cfg))
	}
	if cfg.Has(SectionMemory) {
		n += len(memoryEngines(cfg))
	}
	if cfg.Has(SectionBound) {
		n += 4 * 2 * cfg.Repeats // four measurements, two AEADs
	}
	if cfg.Has(SectionSendPath) {
		n += len(sendPathThreads) * 2 * cfg.Repeats // noref and ref
	}
	return n
}

// Run measures the selected sections and returns the report. command is
// recorded as the command line that produced it. A section that cannot run
// here is noted and skipped; any other failure ends the run with an error
// and the report so far.
func Run(cfg Config, command string, fn ProgressFunc) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Report{Machine: ThisMachine(), Started: time.Now(), Command: command, Config: cfg}
	if cfg.Quick {
		r.Note("quick smoke run: windows of %v, figures only show that the harness works", cfg.Duration)
	}
	p := &progress{total: plannedSteps(cfg), fn: fn}
	sections := []struct {
		name string
		run  func(*Report, Config, *progress) error
	}{
		{SectionInproc, inprocSection},
		{SectionPeers, peersSection},
		{SectionNetns, netnsSection},
		{SectionNetpeers, netpeersSection},
		{SectionOpenVPN, openvpnSection},
		{SectionHandshake, handshakeSection},
		{SectionMemory, memorySection},
		{SectionBound, boundSection},
		{SectionSendPath, sendPathSection},
	}
	for _, s := range sections {
		if !cfg.Has(s.name) {
			continue
		}
		if err := s.run(r, cfg, p); err != nil {
			if errors.Is(err, ErrSkipped) {
				r.Note("%s: %v", s.name, err)
				continue
			}
			r.Finished = time.Now()
			return r, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	r.Finished = time.Now()
	return r, nil
}
