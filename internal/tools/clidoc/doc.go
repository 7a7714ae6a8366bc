// Package clidoc renders the description of a command-line program (its
// commands, flags, environment and files) as --help text, a man page
// (roff) and shell completions for bash, zsh and fish. The binaries build
// one Program from the tables and flag sets their commands really use, so
// the help, the man pages and the completions are three views of one
// source: tests in cmd/ regenerate the committed files under packaging/
// and fail when they differ.
//
// The package imports nothing but the standard library.
package clidoc

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Program describes one binary.
type Program struct {
	Name     string // program name, e.g. "wirelane"
	Section  string // man section, e.g. "8"
	Summary  string // one line for NAME
	Synopsis []string
	// Description is the text of DESCRIPTION: paragraphs separated by a
	// blank line; a line starting with a space is kept as it is.
	Description string
	Flags       []Flag     // the program's own options
	Commands    []*Command // its subcommands, in the order help shows them
	// Args says how to complete the program's own positional arguments
	// (programs without subcommands).
	Args Args
	// Sections follow COMMANDS in the man page (ENVIRONMENT, FILES, EXIT
	// STATUS, SEE ALSO).
	Sections []Section
}

// Section is one extra man page section.
type Section struct {
	Title string
	Text  string // as Program.Description
}

// Command is one subcommand (or a subcommand's subcommand).
type Command struct {
	Name     string
	Synopsis string // the argument synopsis, e.g. "CONFIG_FILE|INTERFACE"
	Summary  string // one line for the command list
	Help     string // the text after the usage line (as Program.Description)
	Hidden   bool   // left out of help, man page and completions
	Flags    []Flag
	// Subcommands, such as "ovpn connect"; completion offers their names
	// as the first argument.
	Subcommands []*Command
	// Words are fixed words completion offers as the first argument (a
	// subcommand without flags of its own, e.g. "gateway up").
	Words []string
	// Args says how to complete the positional arguments (after Words).
	Args Args
}

// Args is what a command's positional arguments are, for completion.
type Args struct {
	Tunnels bool     // wg-quick tunnel names: /etc/wireguard/NAME.conf
	Files   string   // files matching this glob, e.g. "*.conf"; "*" for any
	Words   []string // fixed words, e.g. "all" and "interfaces" for show
}

// Flag is one option.
type Flag struct {
	Name    string // long name without dashes ("json"); one letter for a short-only flag ("v")
	Short   string // one-letter alias, "" when none
	Arg     string // the value's placeholder ("FILE"); "" for a boolean
	Usage   string
	Default string // shown as "(default X)"; "" for none
}

// Spelling returns how the flag is written: "--json", "-v" for a
// one-letter flag, "-f, --foreground" with an alias.
func (f Flag) Spelling() string {
	long := "--" + f.Name
	if len(f.Name) == 1 {
		long = "-" + f.Name
	}
	if f.Short != "" {
		return "-" + f.Short + ", " + long
	}
	return long
}

// FlagsOf describes the flags defined in fs, sorted by name as fs keeps
// them. A flag's usage may name its value in back quotes (see
// flag.UnquoteUsage); defaults that say nothing (false, 0, "") are left out.
func FlagsOf(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		def := f.DefValue
		if def == "false" || def == "0" || def == "0s" {
			def = ""
		}
		out = append(out, Flag{Name: f.Name, Arg: strings.ToUpper(kind), Usage: usage, Default: def})
	})
	return out
}

// WriteFlags prints the "Flags:" block of --help, GNU style: every long
// flag with two dashes, its value's placeholder, its usage on the next
// line. It prints nothing for no flags.
func WriteFlags(w io.Writer, flags []Flag) {
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags:\n")
	for _, f := range flags {
		arg := ""
		if f.Arg != "" {
			arg = " " + f.Arg
		}
		def := ""
		if f.Default != "" {
			def = " (default " + f.Default + ")"
		}
		fmt.Fprintf(w, "  %s%s\n        %s%s\n", f.Spelling(), arg, f.Usage, def)
	}
}

// visible returns the commands that are not hidden.
func visible(cs []*Command) []*Command {
	var out []*Command
	for _, c := range cs {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// names returns the names of cs.
func names(cs []*Command) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// firstWords returns what completion offers as a command's first
// argument: its subcommands' names and its fixed words.
func (c *Command) firstWords() []string {
	return append(names(visible(c.Subcommands)), c.Words...)
}

// flagWords returns every spelling of flags, for completion: "--json",
// "-v", "-f".
func flagWords(flags []Flag) []string {
	var out []string
	for _, f := range flags {
		if len(f.Name) == 1 {
			out = append(out, "-"+f.Name)
		} else {
			out = append(out, "--"+f.Name)
		}
		if f.Short != "" {
			out = append(out, "-"+f.Short)
		}
	}
	sort.Strings(out)
	return out
}

// valueFlags returns the spellings of flags that take a value.
func valueFlags(flags []Flag) []string {
	var vf []Flag
	for _, f := range flags {
		if f.Arg != "" {
			vf = append(vf, f)
		}
	}
	return flagWords(vf)
}
