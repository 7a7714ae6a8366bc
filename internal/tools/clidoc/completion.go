package clidoc

// Shell completions. Each shell gets the same facts, one "spec" per
// command path ("up", "ovpn connect"): its flags, which of them take a
// value, the words its first argument may be (subcommands), and what its
// arguments are (tunnel names from /etc/wireguard, files, fixed words).
// Tunnel names are read when completing, so new files are offered at once:
// those of /etc/wireguard/*.conf (root's) and of the running tunnels'
// sockets in /var/run/wireguard (visible to everyone).

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// spec is one command path's completion facts.
type spec struct {
	path       string // "" for the program itself, "up", "ovpn connect"
	summary    string
	flags      []string
	valueFlags []string
	first      []string // words for the first argument (subcommands, Words)
	args       Args
}

// specs lists the program and every visible command and subcommand.
func specs(p *Program) []spec {
	top := spec{flags: flagWords(p.Flags), valueFlags: valueFlags(p.Flags), args: p.Args}
	for _, c := range visible(p.Commands) {
		top.first = append(top.first, c.Name)
	}
	out := []spec{top}
	var add func(prefix string, c *Command)
	add = func(prefix string, c *Command) {
		path := strings.TrimSpace(prefix + " " + c.Name)
		flags := append([]Flag{{Name: "help"}}, c.Flags...)
		out = append(out, spec{path: path, summary: c.Summary, flags: flagWords(flags), valueFlags: valueFlags(c.Flags), first: c.firstWords(), args: c.Args})
		for _, s := range visible(c.Subcommands) {
			add(path, s)
		}
	}
	for _, c := range visible(p.Commands) {
		add("", c)
	}
	return out
}

// allValueFlags is every flag spelling that takes a value, anywhere: the
// word after one is a value, not an argument, when completion counts
// arguments.
func allValueFlags(ss []spec) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		for _, f := range s.valueFlags {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	sort.Strings(out)
	return out
}

// subcommandParents returns the commands that take a subcommand word
// (their spec has subcommands, not just fixed words).
func subcommandParents(p *Program) []string {
	var out []string
	for _, c := range visible(p.Commands) {
		if len(visible(c.Subcommands)) > 0 {
			out = append(out, c.Name)
		}
	}
	return out
}

// shellFunc makes s usable in a shell function name.
func shellFunc(s string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(s)
}

// WriteBash writes a bash completion script (for
// /usr/share/bash-completion/completions/NAME).
func WriteBash(w io.Writer, p *Program) error {
	bw := bufio.NewWriter(w)
	fn := "_" + shellFunc(p.Name)
	ss := specs(p)
	fmt.Fprintf(bw, "# bash completion for %s. Generated from the program's own help\n# (internal/tools/clidoc); do not edit.\n\n", p.Name)
	fmt.Fprintf(bw, "%s_tunnels() {\n\tlocal f\n\tfor f in /etc/wireguard/*.conf /var/run/wireguard/*.sock; do\n\t\t[ -e \"$f\" ] || continue\n\t\tf=${f##*/}\n\t\tf=${f%%.conf}\n\t\tprintf '%%s\\n' \"${f%%.sock}\"\n\tdone | sort -u\n}\n\n", fn)
	fmt.Fprintf(bw, "%s() {\n", fn)
	fmt.Fprintf(bw, "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	fmt.Fprintf(bw, "\tlocal cmdpath='' npos=0 i w skip=0\n")
	fmt.Fprintf(bw, "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=${COMP_WORDS[i]}\n")
	fmt.Fprintf(bw, "\t\tif [ \"$skip\" = 1 ]; then skip=0; continue; fi\n")
	fmt.Fprintf(bw, "\t\tcase $w in\n")
	if vf := allValueFlags(ss); len(vf) > 0 {
		fmt.Fprintf(bw, "\t\t%s) skip=1; continue ;;\n", strings.Join(vf, "|"))
	}
	fmt.Fprintf(bw, "\t\t-*) continue ;;\n\t\tesac\n")
	fmt.Fprintf(bw, "\t\tif [ -z \"$cmdpath\" ]; then cmdpath=$w\n")
	if parents := subcommandParents(p); len(parents) > 0 {
		fmt.Fprintf(bw, "\t\telif [ \"$npos\" = 0 ] && case $cmdpath in %s) true ;; *) false ;; esac; then cmdpath=\"$cmdpath $w\"\n", strings.Join(parents, "|"))
	}
	fmt.Fprintf(bw, "\t\telse npos=$((npos + 1)); fi\n\tdone\n")
	fmt.Fprintf(bw, "\tlocal flags='' valueflags='' first='' words='' tunnels=0 files=''\n\tcase $cmdpath in\n")
	for _, s := range ss {
		pat := "''"
		if s.path != "" {
			pat = "'" + s.path + "'"
		}
		fmt.Fprintf(bw, "\t%s)\n\t\tflags='%s' valueflags='%s' first='%s' words='%s' tunnels=%d files='%s' ;;\n",
			pat, strings.Join(s.flags, " "), strings.Join(s.valueFlags, " "), strings.Join(s.first, " "),
			strings.Join(s.args.Words, " "), b2i(s.args.Tunnels), s.args.Files)
	}
	fmt.Fprintf(bw, "\t*) return 0 ;;\n\tesac\n")
	fmt.Fprintf(bw, "\tcase \" $valueflags \" in *\" $prev \"*)\n\t\tif [ -n \"$prev\" ]; then COMPREPLY=($(compgen -f -- \"$cur\")); return 0; fi ;;\n\tesac\n")
	fmt.Fprintf(bw, "\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n\t\treturn 0\n\tfi\n")
	fmt.Fprintf(bw, "\tif [ \"$npos\" = 0 ] && [ -n \"$first\" ]; then\n\t\tCOMPREPLY=($(compgen -W \"$first\" -- \"$cur\"))\n\t\treturn 0\n\tfi\n")
	fmt.Fprintf(bw, "\tif [ -n \"$first\" ]; then npos=$((npos - 1)); fi\n")
	fmt.Fprintf(bw, "\t[ \"$npos\" = 0 ] || [ -z \"$cmdpath\" ] || return 0\n")
	fmt.Fprintf(bw, "\tlocal cands=$words\n\tif [ \"$tunnels\" = 1 ]; then cands=\"$cands $(%s_tunnels)\"; fi\n", fn)
	fmt.Fprintf(bw, "\tCOMPREPLY=($(compgen -W \"$cands\" -- \"$cur\"))\n")
	fmt.Fprintf(bw, "\tif [ -n \"$files\" ]; then\n\t\tcompopt -o filenames 2>/dev/null\n\t\tCOMPREPLY+=($(compgen -d -- \"$cur\"))\n\t\tif [ \"$files\" = '*' ]; then COMPREPLY+=($(compgen -f -- \"$cur\")); else COMPREPLY+=($(compgen -f -X \"!$files\" -- \"$cur\")); fi\n\tfi\n")
	fmt.Fprintf(bw, "\treturn 0\n}\n\ncomplete -F %s %s\n", fn, p.Name)
	return bw.Flush()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteZsh writes a zsh completion function (for a directory on $fpath,
// as the file _NAME).
func WriteZsh(w io.Writer, p *Program) error {
	bw := bufio.NewWriter(w)
	fn := "_" + shellFunc(p.Name)
	ss := specs(p)
	fmt.Fprintf(bw, "#compdef %s\n# zsh completion for %s. Generated from the program's own help\n# (internal/tools/clidoc); do not edit.\n\n", p.Name, p.Name)
	fmt.Fprintf(bw, "%s_tunnels() {\n\tlocal -a names\n\tnames=(/etc/wireguard/*.conf(N:t:r) /var/run/wireguard/*.sock(N:t:r))\n\t(( $#names )) && print -rl -- ${(u)names}\n}\n\n", fn)
	fmt.Fprintf(bw, "%s() {\n", fn)
	fmt.Fprintf(bw, "\tlocal cur=${words[CURRENT]} prev=${words[CURRENT-1]}\n\tlocal cmdpath='' npos=0 i w skip=0\n")
	fmt.Fprintf(bw, "\tfor (( i = 2; i < CURRENT; i++ )); do\n\t\tw=${words[i]}\n\t\tif (( skip )); then skip=0; continue; fi\n\t\tcase $w in\n")
	if vf := allValueFlags(ss); len(vf) > 0 {
		fmt.Fprintf(bw, "\t\t(%s) skip=1; continue ;;\n", strings.Join(vf, "|"))
	}
	fmt.Fprintf(bw, "\t\t(-*) continue ;;\n\t\tesac\n\t\tif [[ -z $cmdpath ]]; then cmdpath=$w\n")
	if parents := subcommandParents(p); len(parents) > 0 {
		fmt.Fprintf(bw, "\t\telif (( npos == 0 )) && [[ $cmdpath == (%s) ]]; then cmdpath=\"$cmdpath $w\"\n", strings.Join(parents, "|"))
	}
	fmt.Fprintf(bw, "\t\telse (( npos++ )); fi\n\tdone\n")
	fmt.Fprintf(bw, "\tlocal -a flags valueflags first argwords descr\n\tlocal tunnels=0 files=''\n\tcase $cmdpath in\n")
	for _, s := range ss {
		pat := "('')"
		if s.path != "" {
			pat = "('" + s.path + "')"
		}
		fmt.Fprintf(bw, "\t%s\n\t\tflags=(%s) valueflags=(%s) first=(%s) argwords=(%s) tunnels=%d files='%s'\n",
			pat, strings.Join(s.flags, " "), strings.Join(s.valueFlags, " "), strings.Join(s.first, " "),
			strings.Join(s.args.Words, " "), b2i(s.args.Tunnels), s.args.Files)
		if s.path == "" {
			var d []string
			for _, c := range visible(p.Commands) {
				d = append(d, zshQuote(c.Name+":"+c.Summary))
			}
			fmt.Fprintf(bw, "\t\tdescr=(%s)\n", strings.Join(d, " "))
		}
		fmt.Fprintf(bw, "\t\t;;\n")
	}
	fmt.Fprintf(bw, "\t(*) return 1 ;;\n\tesac\n")
	fmt.Fprintf(bw, "\tif [[ -n $prev ]] && (( ${valueflags[(Ie)$prev]} )); then _files; return; fi\n")
	fmt.Fprintf(bw, "\tif [[ $cur == -* ]]; then compadd -- $flags; return; fi\n")
	fmt.Fprintf(bw, "\tif (( npos == 0 )) && (( $#descr )); then _describe 'command' descr; return; fi\n")
	fmt.Fprintf(bw, "\tif (( npos == 0 )) && (( $#first )); then compadd -- $first; return; fi\n")
	fmt.Fprintf(bw, "\t(( $#first )) && (( npos-- ))\n\t(( npos == 0 )) || return 1\n")
	fmt.Fprintf(bw, "\t(( $#argwords )) && compadd -- $argwords\n\t(( tunnels )) && compadd -- $(%s_tunnels)\n", fn)
	fmt.Fprintf(bw, "\tif [[ $files == '*' ]]; then _files; elif [[ -n $files ]]; then _files -g \"$files\"; fi\n")
	fmt.Fprintf(bw, "}\n\n%s \"$@\"\n", fn)
	return bw.Flush()
}

// zshQuote quotes s in single quotes for zsh.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// WriteFish writes a fish completion script (for
// /usr/share/fish/vendor_completions.d/NAME.fish).
func WriteFish(w io.Writer, p *Program) error {
	bw := bufio.NewWriter(w)
	n := p.Name
	fn := "__" + shellFunc(n)
	fmt.Fprintf(bw, "# fish completion for %s. Generated from the program's own help\n# (internal/tools/clidoc); do not edit.\n\n", n)
	fmt.Fprintf(bw, "function %s_tunnels\n\tfor f in /etc/wireguard/*.conf /var/run/wireguard/*.sock\n\t\tstring replace -r '.*/(.*)\\\\.(conf|sock)$' '$1' -- $f\n\tend | sort -u\nend\n\n", fn)
	fmt.Fprintf(bw, "complete -c %s -f\n", n)
	for _, f := range p.Flags {
		fmt.Fprintf(bw, "complete -c %s -n __fish_use_subcommand %s\n", n, fishFlag(f))
	}
	if p.Args.Tunnels {
		fmt.Fprintf(bw, "complete -c %s -n __fish_use_subcommand -a '(%s_tunnels)' -d tunnel\n", n, fn)
	}
	cs := visible(p.Commands)
	for _, c := range cs {
		fmt.Fprintf(bw, "complete -c %s -n __fish_use_subcommand -a %s -d %s\n", n, c.Name, fishQuote(c.Summary))
	}
	for _, c := range cs {
		cond := "__fish_seen_subcommand_from " + c.Name
		writeFishCommand(bw, n, fn, cond, c)
		subs := visible(c.Subcommands)
		if len(subs) == 0 {
			continue
		}
		subNames := strings.Join(names(subs), " ")
		for _, s := range subs {
			fmt.Fprintf(bw, "complete -c %s -n %s -a %s -d %s\n", n,
				fishQuote(cond+"; and not __fish_seen_subcommand_from "+subNames), s.Name, fishQuote(s.Summary))
		}
		for _, s := range subs {
			writeFishCommand(bw, n, fn, cond+"; and __fish_seen_subcommand_from "+s.Name, s)
		}
	}
	return bw.Flush()
}

func writeFishCommand(w io.Writer, n, fn, cond string, c *Command) {
	q := fishQuote(cond)
	fmt.Fprintf(w, "complete -c %s -n %s -l help -d 'show this command'\\''s help'\n", n, q)
	for _, f := range c.Flags {
		fmt.Fprintf(w, "complete -c %s -n %s %s\n", n, q, fishFlag(f))
	}
	if len(c.Words) > 0 {
		fmt.Fprintf(w, "complete -c %s -n %s -a %s\n", n, fishQuote(cond+"; and not __fish_seen_subcommand_from "+strings.Join(c.Words, " ")), fishQuote(strings.Join(c.Words, " ")))
	}
	a := c.Args
	if len(c.Words) > 0 {
		// The arguments come after the word.
		q = fishQuote(cond + "; and __fish_seen_subcommand_from " + strings.Join(c.Words, " "))
	}
	if len(a.Words) > 0 {
		fmt.Fprintf(w, "complete -c %s -n %s -a %s\n", n, q, fishQuote(strings.Join(a.Words, " ")))
	}
	if a.Tunnels {
		fmt.Fprintf(w, "complete -c %s -n %s -a '(%s_tunnels)' -d tunnel\n", n, q, fn)
	}
	if a.Files != "" {
		fmt.Fprintf(w, "complete -c %s -n %s -F\n", n, q)
	}
}

// fishFlag is the part of a complete line that names a flag.
func fishFlag(f Flag) string {
	var b strings.Builder
	if len(f.Name) == 1 {
		b.WriteString("-s " + f.Name)
	} else {
		b.WriteString("-l " + f.Name)
	}
	if f.Short != "" {
		b.WriteString(" -s " + f.Short)
	}
	if f.Arg != "" {
		b.WriteString(" -r")
		if strings.Contains(f.Arg, "FILE") || strings.Contains(f.Arg, "PATH") {
			b.WriteString(" -F")
		}
	}
	b.WriteString(" -d " + fishQuote(f.Usage))
	return b.String()
}

// fishQuote quotes s in single quotes for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
