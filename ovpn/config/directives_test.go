package config

// Every directive of `openvpn --help` (OpenVPN 2.6.14, committed in
// testdata/openvpn-2.6-directives.txt and, where openvpn is installed,
// checked against the real binary) has a verdict in both parsers:
// supported (handled, its arguments checked), warned (accepted, not or
// not fully honoured, with the reason), refused (an error: unsupported,
// or the other side's directive). None may be unknown. ovpn/server's
// TestEveryOpenVPNDirectiveHasAServerVerdict does the same for the server
// and writes both columns to docs/openvpn-directives.md.

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// verdict is how one parser treats a directive given without arguments.
type verdict struct {
	kind string // supported, warned, refused, other side, unknown
	why  string
}

var locPrefix = regexp.MustCompile(`^[^:]+:\d+: [^:]+: `)

func classify(err error, warnings []Diagnostic, name string) verdict {
	if err != nil {
		msg := locPrefix.ReplaceAllString(err.Error(), "")
		switch {
		case errors.Is(err, ErrWrongRole):
			return verdict{"other side", ""}
		case errors.Is(err, ErrUnsupported):
			return verdict{"refused", msg}
		}
		return verdict{"supported", ""} // known: its arguments were checked
	}
	for _, w := range warnings {
		if w.Directive != name {
			continue
		}
		if strings.HasPrefix(w.Message, "unknown directive") {
			return verdict{"unknown", w.Message}
		}
		return verdict{"warned", w.Message}
	}
	return verdict{"supported", ""}
}

// verdicts returns the client parser's verdict on a directive.
func verdicts(name string) verdict {
	text := "client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\n" + name + "\n"
	cfg, err := Parse([]byte(text), "x.ovpn", "")
	var ws []Diagnostic
	if cfg != nil {
		ws = cfg.Warnings
	}
	return classify(err, ws, name)
}

func TestEveryOpenVPNDirectiveHasAVerdict(t *testing.T) {
	b, err := os.ReadFile("testdata/openvpn-2.6-directives.txt")
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(b))
	if _, err := exec.LookPath("openvpn"); err == nil {
		out, _ := exec.Command("openvpn", "--help").CombinedOutput()
		var real []string
		for _, m := range regexp.MustCompile(`(?m)^--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
			real = append(real, m[1])
		}
		slices.Sort(real)
		real = slices.Compact(real)
		if v := regexp.MustCompile(`OpenVPN (2\.6\.\d+)`).FindStringSubmatch(string(out)); v != nil && v[1] == "2.6.14" && !slices.Equal(real, names) {
			t.Errorf("openvpn --help lists other directives than testdata/openvpn-2.6-directives.txt (regenerate it)")
		}
	}
	var unknown []string
	for _, n := range names {
		if v := verdicts(n); v.kind == "unknown" {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("%d directives of openvpn --help have no verdict in the client parser: %s", len(unknown), strings.Join(unknown, " "))
	}
}
