package clidoc

// The man page: roff with the man(7) macros, the subset every man(1)
// renders (TH, SH, TP, RS/RE, nf/fi, B, I, PP).

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMan writes p as a man(7) page. The output depends only on p (no
// date), so a test can compare it with a committed file.
func WriteMan(w io.Writer, p *Program) error {
	bw := bufio.NewWriter(w)
	upper := strings.ToUpper(p.Name)
	fmt.Fprintf(bw, ".\\\" Generated from the program's own help (internal/tools/clidoc); do not edit.\n")
	fmt.Fprintf(bw, ".TH %s %s \"\" \"Wirelane\" \"Wirelane Manual\"\n", upper, p.Section)
	// No hyphenation and a ragged right margin: names such as AllowedIPs
	// and paths must come out whole, to be searched and pasted.
	fmt.Fprintf(bw, ".nh\n.ad l\n")
	fmt.Fprintf(bw, ".SH NAME\n%s \\- %s\n", p.Name, roffText(p.Summary))
	fmt.Fprintf(bw, ".SH SYNOPSIS\n")
	for i, s := range p.Synopsis {
		if i > 0 {
			fmt.Fprintf(bw, ".br\n")
		}
		fmt.Fprintf(bw, ".B %s\n%s\n", p.Name, roffText(strings.TrimPrefix(strings.TrimPrefix(s, p.Name), " ")))
	}
	fmt.Fprintf(bw, ".SH DESCRIPTION\n")
	writeRoffText(bw, p.Description)
	if len(p.Flags) > 0 {
		fmt.Fprintf(bw, ".SH OPTIONS\n")
		writeRoffFlags(bw, p.Flags)
	}
	if cs := visible(p.Commands); len(cs) > 0 {
		fmt.Fprintf(bw, ".SH COMMANDS\n")
		for _, c := range cs {
			writeRoffCommand(bw, c, "")
		}
	}
	for _, s := range p.Sections {
		fmt.Fprintf(bw, ".SH %s\n", strings.ToUpper(s.Title))
		writeRoffText(bw, s.Text)
	}
	return bw.Flush()
}

func writeRoffCommand(w io.Writer, c *Command, parent string) {
	name := strings.TrimSpace(parent + " " + c.Name)
	if c.Synopsis != "" {
		fmt.Fprintf(w, ".TP\n.BI \"%s\" \" %s\"\n", roffQuoted(name), roffQuoted(c.Synopsis))
	} else {
		fmt.Fprintf(w, ".TP\n.B %s\n", roffText(name))
	}
	fmt.Fprintf(w, "%s\n", roffText(c.Summary))
	if c.Help != "" || len(c.Flags) > 0 || len(visible(c.Subcommands)) > 0 {
		fmt.Fprintf(w, ".RS\n.PP\n")
		if c.Help != "" {
			writeRoffText(w, c.Help)
		}
		writeRoffFlags(w, c.Flags)
		for _, s := range visible(c.Subcommands) {
			writeRoffCommand(w, s, name)
		}
		fmt.Fprintf(w, ".RE\n")
	}
}

func writeRoffFlags(w io.Writer, flags []Flag) {
	for _, f := range flags {
		if f.Arg != "" {
			fmt.Fprintf(w, ".TP\n.BI \"%s\" \" %s\"\n", roffQuoted(f.Spelling()), roffQuoted(f.Arg))
		} else {
			fmt.Fprintf(w, ".TP\n.B %s\n", roffText(f.Spelling()))
		}
		u := f.Usage
		if f.Default != "" {
			u += " (default " + f.Default + ")"
		}
		fmt.Fprintf(w, "%s\n", roffText(u))
	}
}

// writeRoffText writes paragraphs; lines that start with a space (tables,
// examples, schemas) are kept as they are, in no-fill mode.
func writeRoffText(w io.Writer, text string) {
	text = strings.Trim(text, "\n")
	if text == "" {
		return
	}
	verbatim := false
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			fmt.Fprintf(w, ".PP\n")
		}
		for _, line := range strings.Split(para, "\n") {
			pre := strings.HasPrefix(line, " ")
			if pre != verbatim {
				if pre {
					fmt.Fprintf(w, ".nf\n")
				} else {
					fmt.Fprintf(w, ".fi\n")
				}
				verbatim = pre
			}
			fmt.Fprintf(w, "%s\n", roffText(line))
		}
		if verbatim {
			fmt.Fprintf(w, ".fi\n")
			verbatim = false
		}
	}
}

// roffText escapes s for a text line: backslashes, dashes (so that man
// prints them as ASCII minus and they can be searched and pasted), and a
// leading control character.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffQuoted escapes s for a quoted macro argument.
func roffQuoted(s string) string {
	return strings.ReplaceAll(roffText(s), `"`, `\(dq`)
}
