// Package buildinfo says what a binary was built from: the module version
// (a tag such as v0.4.0 when built from a tagged checkout or installed with
// `go install ...@v0.4.0`, a pseudo-version otherwise) and the version
// control revision, with a mark when the working tree had changes. Every
// binary's --version prints String.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Values set at link time (-ldflags "-X
// github.com/wirelane/wirelane/internal/sys/buildinfo.Version=v0.4.0")
// replace those of the build information. The go command stamps the
// revision only in a checkout it recognises (not in a `git worktree`, nor
// with -buildvcs=false), so scripts/install.sh sets all three from git.
var (
	Version  = "" // module version, e.g. from `git describe --tags`
	Revision = "" // full VCS revision
	Modified = "" // "true" when the working tree had changes
)

// Info is what the build information says about the binary.
type Info struct {
	Version  string // module version, "(devel)" when none was stamped
	Revision string // VCS revision (full hash), "" when not stamped
	Modified bool   // the working tree had uncommitted changes
	Go       string // the Go toolchain, e.g. go1.26.0
}

// Read returns the binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fromBuild(nil)
	}
	return fromBuild(bi)
}

// fromBuild extracts Info from bi (nil: no build information).
func fromBuild(bi *debug.BuildInfo) Info {
	var in Info
	if bi != nil {
		in.Version = bi.Main.Version
		in.Go = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if Version != "" {
		in.Version = Version
	}
	if Revision != "" {
		in.Revision = Revision
		in.Modified = Modified == "true"
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// String formats in as one line: "v0.4.0 (revision 0123456789ab, modified,
// go1.26.0)". A build without VCS information (go run, -buildvcs=false, a
// source tree without .git) says "revision unknown".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(in.Version)
	b.WriteString(" (")
	if in.Revision == "" {
		b.WriteString("revision unknown")
	} else {
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString("revision " + rev)
	}
	if in.Modified {
		b.WriteString(", modified")
	}
	if in.Go != "" {
		b.WriteString(", " + in.Go)
	}
	b.WriteString(")")
	return b.String()
}

// String is Read().String(), the text after the program name in --version.
func String() string { return Read().String() }
