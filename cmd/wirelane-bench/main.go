// Command wirelane-bench compares Wirelane with wireguard-go on this
// machine, in one run, and prints a table of medians, ranges and ratios:
//
//	go run ./cmd/wirelane-bench [--quick] [--duration 3s] [--repeats 5]
//	                            [--only inproc,peers,netns,netpeers,openvpn,handshake,memory,bound,sendpath]
//	                            [--netpeers 100,1000]
//	                            [--engines wireguard-go,wirelane,wirelane-ref]
//	                            [--open-loop | --window 2048 --loss-timeout 3ms]
//	                            [--markdown]
//
// Progress goes to standard error as one updating line; the table goes to
// standard output. The netns section needs root and is skipped otherwise.
// docs/benchmarks.md explains every figure.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wirelane/wirelane/internal/sys/buildinfo"
	"github.com/wirelane/wirelane/internal/tools/bench"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

const benchHelp = `
Compares Wirelane with wireguard-go on this machine, in one run, and prints
a table of medians, ranges and ratios. Progress goes to standard error, the
table to standard output. The netns section needs root and is skipped
otherwise. docs/benchmarks.md explains every figure.`

func run(args []string) int {
	fs := flag.NewFlagSet("wirelane-bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "smoke run of a few seconds (CI): proves the harness works, measures nothing")
	duration := fs.Duration("duration", 0, "measured window of each throughput run (default 3s, 150ms with --quick)")
	repeats := fs.Int("repeats", 0, "runs per engine and case; engines alternate (default 5, 1 with --quick)")
	engines := fs.String("engines", "", "comma-separated in-process engines (default "+strings.Join(bench.DefaultConfig().Engines, ",")+")")
	only := fs.String("only", "", "comma-separated sections: "+strings.Join(bench.AllSections, ","))
	peers := fs.Int("peers", 0, "peers for the memory section (default 10000, 500 with --quick)")
	netPeers := fs.String("netpeers", "", "comma-separated peer counts of the netpeers section (default 100,1000; 100 with --quick)")
	handshakes := fs.Int("handshakes", 0, "handshakes timed per repeat (default 2000, 100 with --quick)")
	wgBin := fs.String("wireguard-go", "", "wireguard-go binary for netns (default: build it)")
	wlBin := fs.String("wirelaned", "", "wirelaned binary for netns (default: build it)")
	wlRefBin := fs.String("wirelaned-ref", "", "ref-mode wirelaned (built with -tags wirelane_refmode) for netns (default: build it)")
	markdown := fs.Bool("markdown", false, "print the table as Markdown")
	openLoop := fs.Bool("open-loop", false, "inproc: unlimited generator (the sender reads as fast as it can; the loopback socket drops the excess)")
	window := fs.Int("window", bench.DefaultWindow, "inproc: most packets in flight with the closed-loop generator")
	lossTimeout := fs.Duration("loss-timeout", bench.DefaultLossTimeout, "inproc: closed loop writes in-flight packets off as lost after this long without a delivery")
	version := fs.Bool("version", false, "print the version and the VCS revision it was built from")
	fs.SetOutput(io.Discard)
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: wirelane-bench [flags]\n\n%s\n", strings.TrimSpace(benchHelp))
		clidoc.WriteFlags(w, clidoc.FlagsOf(fs))
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(os.Stdout)
			return 0
		}
		fmt.Fprintf(os.Stderr, "wirelane-bench: %v\n", err)
		printUsage(os.Stderr)
		return 2
	}
	if *version {
		fmt.Printf("wirelane-bench %s\n", buildinfo.String())
		return 0
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "wirelane-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg := bench.DefaultConfig()
	if *quick {
		cfg = bench.QuickConfig()
	}
	if *duration != 0 {
		cfg.Duration = *duration
	}
	if *repeats != 0 {
		cfg.Repeats = *repeats
	}
	if *peers != 0 {
		cfg.Peers = *peers
	}
	if *handshakes != 0 {
		cfg.Handshakes = *handshakes
	}
	if *netPeers != "" {
		counts, err := bench.ParseCounts(*netPeers)
		if err != nil {
			fmt.Fprintf(os.Stderr, "wirelane-bench: --netpeers: %v\n", err)
			return 2
		}
		cfg.NetPeers = counts
	}
	sections, err := bench.ParseSections(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wirelane-bench: --only: %v\n", err)
		return 2
	}
	cfg.Sections = sections
	cfg.WireguardGoBin, cfg.WirelanedBin, cfg.WirelanedRefBin = *wgBin, *wlBin, *wlRefBin
	if *engines != "" {
		cfg.Engines = strings.Split(*engines, ",")
	}
	cfg.OpenLoop, cfg.Window, cfg.LossTimeout = *openLoop, *window, *lossTimeout

	command := "go run ./cmd/wirelane-bench"
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}
	start := time.Now()
	tty := isTerminal(os.Stderr)
	progress := func(step, total int, what string) {
		line := fmt.Sprintf("[%d/%d %s] %s", step, total, time.Since(start).Round(time.Second), what)
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	// Ctrl-C or SIGTERM: remove the namespaces and daemons the run set
	// up, then exit as interrupted.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "\nwirelane-bench: interrupted, removing namespaces and daemons")
			bench.Interrupt()
			os.Exit(130)
		}
	}()
	rep, err := bench.Run(cfg, command, progress)
	if tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if rep != nil {
		write := rep.WriteText
		if *markdown {
			write = rep.WriteMarkdown
		}
		if werr := write(os.Stdout); werr != nil {
			fmt.Fprintf(os.Stderr, "wirelane-bench: %v\n", werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wirelane-bench: %v\n", err)
		return 1
	}
	return 0
}

// isTerminal reports whether f is a character device (a terminal), where
// the progress line can be rewritten in place.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
