package bench

// The report: every sample of every run, grouped into measurements, and the
// table that shows medians, ranges and ratios.

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// Direction says which way a metric improves.
type Direction int

// Directions of metrics.
const (
	HigherIsBetter Direction = iota
	LowerIsBetter
)

// Measurement is one metric of one engine in one case, over all repeats.
type Measurement struct {
	Section string // "inproc", "netns", "handshake", "memory", "bound"
	Case    string // e.g. "1420 B", "TCP x1"
	Metric  string // e.g. "Gbit/s"
	Engine  string // e.g. EngineWirelane
	Better  Direction
	Samples []float64 // one per repeat, in run order
}

// Median returns the median of the samples (the mean of the middle two for
// an even count), or NaN when there are none.
func (m *Measurement) Median() float64 { return median(m.Samples) }

// Min returns the smallest sample, or NaN when there are none.
func (m *Measurement) Min() float64 {
	if len(m.Samples) == 0 {
		return math.NaN()
	}
	return slices.Min(m.Samples)
}

// Max returns the largest sample, or NaN when there are none.
func (m *Measurement) Max() float64 {
	if len(m.Samples) == 0 {
		return math.NaN()
	}
	return slices.Max(m.Samples)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Machine describes where a report was measured.
type Machine struct {
	CPUs      int    // logical CPUs (nproc)
	CPUModel  string // "model name" from /proc/cpuinfo
	Kernel    string // uname release
	GoVersion string
	LoadAvg   string // /proc/loadavg at the start: shows a shared machine
}

// ThisMachine describes the machine the process runs on.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// Report holds everything one benchmark run measured.
type Report struct {
	Machine  Machine
	Started  time.Time
	Finished time.Time
	Command  string
	Config   Config
	// Measurements in the order they were first recorded.
	Measurements []*Measurement
	// Notes are skipped sections and caveats, printed under the table.
	Notes []string
}

// Add records one sample.
func (r *Report) Add(section, cas, metric, engine string, better Direction, v float64) {
	if m := r.Find(section, cas, metric, engine); m != nil {
		m.Samples = append(m.Samples, v)
		return
	}
	r.Measurements = append(r.Measurements, &Measurement{
		Section: section, Case: cas, Metric: metric, Engine: engine, Better: better, Samples: []float64{v},
	})
}

// Note records a caveat or a skipped section.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Find returns the measurement with these keys, or nil.
func (r *Report) Find(section, cas, metric, engine string) *Measurement {
	for _, m := range r.Measurements {
		if m.Section == section && m.Case == cas && m.Metric == metric && m.Engine == engine {
			return m
		}
	}
	return nil
}

// Ratio returns median(engine) / median(base) for one metric, and false when
// either is missing or the base median is zero.
func (r *Report) Ratio(section, cas, metric, engine, base string) (float64, bool) {
	a, b := r.Find(section, cas, metric, engine), r.Find(section, cas, metric, base)
	if a == nil || b == nil {
		return 0, false
	}
	am, bm := a.Median(), b.Median()
	if math.IsNaN(am) || math.IsNaN(bm) || bm == 0 {
		return 0, false
	}
	return am / bm, true
}

// boundEngine is the engine a section's tunnel figures are a fraction of.
func boundEngine(section string) string {
	if section == "netns" {
		return EngineVeth
	}
	return ""
}

// row is one line of the table.
type row struct {
	section, cas, metric, engine, median, rng, n, vsWG, noref, ofBound string
}

var header = row{"section", "case", "metric", "engine", "median", "min-max", "n", "vs wireguard-go", "noref/ref", "of bound"}

func (r *Report) rows() []row {
	var out []row
	for _, m := range r.Measurements {
		rw := row{
			section: m.Section, cas: m.Case, metric: m.Metric, engine: m.Engine,
			median: formatNum(m.Median()),
			rng:    formatNum(m.Min()) + "-" + formatNum(m.Max()),
			n:      fmt.Sprint(len(m.Samples)),
		}
		if m.Better == LowerIsBetter {
			rw.metric += " (lower better)"
		}
		// The bound section compares AEADs: wireguard-go's is x/crypto's.
		base := EngineWireguardGo
		if m.Section == SectionBound {
			base = EngineXCrypto
		}
		if m.Section == SectionOpenVPN { // and the OpenVPN section OpenVPN's
			base = EngineOpenVPN
		}
		if m.Engine != base && m.Engine != EngineVeth {
			if v, ok := r.Ratio(m.Section, m.Case, m.Metric, m.Engine, base); ok {
				rw.vsWG = fmt.Sprintf("%.2fx", v)
			}
		}
		if m.Engine == EngineWirelane {
			if v, ok := r.Ratio(m.Section, m.Case, m.Metric, EngineWirelane, EngineWirelaneRef); ok {
				rw.noref = fmt.Sprintf("%+.1f%%", (v-1)*100)
			}
		}
		if b := boundEngine(m.Section); b != "" && m.Engine != b && m.Better == HigherIsBetter {
			if v, ok := r.Ratio(m.Section, m.Case, m.Metric, m.Engine, b); ok {
				rw.ofBound = fmt.Sprintf("%.0f%% of %s", v*100, b)
			}
		}
		out = append(out, rw)
	}
	return out
}

func (rw row) cells() []string {
	return []string{rw.section, rw.cas, rw.metric, rw.engine, rw.median, rw.rng, rw.n, rw.vsWG, rw.noref, rw.ofBound}
}

// formatNum prints v with three significant digits, without exponent for
// ordinary magnitudes.
func formatNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case a == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.001:
		return fmt.Sprintf("%.4f", v)
	default:
		return fmt.Sprintf("%.2e", v)
	}
}

func (r *Report) preamble() []string {
	m := r.Machine
	lines := []string{
		fmt.Sprintf("machine: %d CPUs, %s, kernel %s, %s, load average at start %s", m.CPUs, m.CPUModel, m.Kernel, m.GoVersion, m.LoadAvg),
		fmt.Sprintf("date:    %s (took %s)", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second)),
		fmt.Sprintf("command: %s", r.Command),
		fmt.Sprintf("runs:    %s per run, %d repeats, engines alternated, medians with min-max", r.Config.Duration, r.Config.Repeats),
	}
	if r.Config.Has(SectionInproc) {
		lines = append(lines, "inproc:  generator "+r.Config.GeneratorMode())
	}
	return lines
}

// WriteText writes the report as an aligned plain-text table.
func (r *Report) WriteText(w io.Writer) error {
	for _, l := range r.preamble() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, rw := range append([]row{header}, r.rows()...) {
		fmt.Fprintln(tw, strings.Join(rw.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "targets:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, t.Want, t.Measured, t.Status())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	for _, l := range r.preamble() {
		k, v, _ := strings.Cut(l, ":")
		fmt.Fprintf(w, "- **%s**: %s\n", k, strings.TrimSpace(v))
	}
	fmt.Fprintln(w)
	writeMD := func(cells []string) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	writeMD(header.cells())
	sep := make([]string, len(header.cells()))
	for i := range sep {
		sep[i] = "---"
	}
	writeMD(sep)
	for _, rw := range r.rows() {
		writeMD(rw.cells())
	}
	fmt.Fprintln(w)
	writeMD([]string{"target", "wanted", "measured", "status"})
	writeMD([]string{"---", "---", "---", "---"})
	for _, t := range r.Targets() {
		writeMD([]string{t.Name, t.Want, t.Measured, t.Status()})
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
