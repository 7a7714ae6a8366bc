package clidoc

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFlagsOfAndWriteFlagsUseOneStyle(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	fs.String("auth-file", "", "`file` with the credentials")
	fs.Duration("duration", 5*time.Second, "how long")
	fs.Bool("v", false, "verbose")
	var b bytes.Buffer
	WriteFlags(&b, FlagsOf(fs))
	want := `
Flags:
  --auth-file FILE
        file with the credentials
  --duration DURATION
        how long (default 5s)
  --json
        print JSON
  -v
        verbose
`
	if b.String() != want {
		t.Errorf("WriteFlags:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteFlags(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no flags printed %q", b.String())
	}
	if got := (Flag{Name: "foreground", Short: "f"}).Spelling(); got != "-f, --foreground" {
		t.Errorf("Spelling with an alias: %q", got)
	}
}

func TestRoffEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`--json`:       `\-\-json`,
		`.hidden`:      `\&.hidden`,
		`'quote`:       `\&'quote`,
		`back\slash`:   `back\eslash`,
		`plain words.`: `plain words.`,
	} {
		if got := roffText(in); got != want {
			t.Errorf("roffText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := roffQuoted(`a "b"`); got != `a \(dqb\(dq` {
		t.Errorf("roffQuoted: %q", got)
	}
}

// testProgram is a small program with every feature the renderers use.
func testProgram() *Program {
	return &Program{
		Name: "tool", Section: "8", Summary: "does things",
		Synopsis:    []string{"tool COMMAND"},
		Description: "First paragraph.\n\nSecond, with a block:\n  kept as is\n  and this",
		Flags:       []Flag{{Name: "version", Usage: "print the version"}},
		Commands: []*Command{
			{Name: "up", Synopsis: "NAME", Summary: "bring it up", Help: "Brings it up.", Args: Args{Tunnels: true, Files: "*.conf"}},
			{Name: "net", Summary: "networks", Subcommands: []*Command{
				{Name: "join", Summary: "join one", Flags: []Flag{{Name: "key-file", Arg: "FILE", Usage: "the key"}}, Args: Args{Files: "*"}},
			}},
			{Name: "secret", Summary: "hidden", Hidden: true},
		},
		Sections: []Section{{Title: "See also", Text: "other(8)"}},
	}
}

func TestManPageStructure(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMan(&b, testProgram()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		".TH TOOL 8 ", ".SH NAME\ntool \\- does things\n", ".SH OPTIONS\n", ".B \\-\\-version\n",
		".SH COMMANDS\n", ".BI \"up\" \" NAME\"\n", ".B net join\n", ".BI \"\\-\\-key\\-file\" \" FILE\"\n",
		".nf\n  kept as is\n  and this\n.fi\n", ".SH SEE ALSO\nother(8)\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret") {
		t.Errorf("hidden command in the man page")
	}
}

func TestCompletionsCoverCommandsFlagsAndTunnels(t *testing.T) {
	p := testProgram()
	for name, write := range map[string]func(*bytes.Buffer) error{
		"bash": func(b *bytes.Buffer) error { return WriteBash(b, p) },
		"zsh":  func(b *bytes.Buffer) error { return WriteZsh(b, p) },
		"fish": func(b *bytes.Buffer) error { return WriteFish(b, p) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		for _, want := range []string{"up", "net", "join", "key-file", "/etc/wireguard/*.conf"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s completion lacks %q", name, want)
			}
		}
		if strings.Contains(s, "secret") {
			t.Errorf("%s completion offers a hidden command", name)
		}
	}
}
