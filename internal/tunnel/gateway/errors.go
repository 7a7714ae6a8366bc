package gateway

import (
	"fmt"
	"strings"
)

// Error is one problem in a gateway file. Its text is
// "FILE:LINE:COL: message" when the position is known, else
// "FILE: key.path: message". Messages never contain key material.
type Error struct {
	File string
	Pos  Pos
	// Key is the TOML key path the problem is about ("site[1].networks[0]"),
	// "" for problems with the file as a whole.
	Key string
	Msg string
}

// Error returns the problem with its location.
func (e *Error) Error() string {
	switch {
	case e.Pos.Known():
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
	case e.Key != "":
		return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
	default:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
}

// ErrorList holds every problem found in a file, in file order. Parse
// returns one when the file has problems; it is never empty.
type ErrorList []*Error

// Error returns the problems, one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the individual problems (for errors.As).
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
