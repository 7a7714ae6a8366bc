// Package suggest finds the known name a misspelt one was probably meant
// to be, for "unknown key X; did you mean Y?" messages in the
// configuration parsers.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the name in known nearest to word, ignoring case, or ""
// when none is near enough to be a likely typo: at most one edit for
// words of up to four letters, two up to eight, three beyond (an edit is
// an insertion, deletion, substitution or swap of adjacent letters). A
// known name that word is a prefix of, or that is a prefix of word, also
// counts when the shorter has at least four letters ("Allowed" for
// "AllowedIPs"). Ties go to the earlier name in known.
func Closest(word string, known []string) string {
	w := strings.ToLower(word)
	n := utf8.RuneCountInString(w)
	if n == 0 || n > 64 {
		return ""
	}
	limit := 3
	switch {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, k := range known {
		lk := strings.ToLower(k)
		if lk == w {
			return k
		}
		d := distance(w, lk)
		if d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	for _, k := range known {
		lk := strings.ToLower(k)
		short, long := w, lk
		if len(short) > len(long) {
			short, long = long, short
		}
		if utf8.RuneCountInString(short) >= 4 && strings.HasPrefix(long, short) {
			return k
		}
	}
	return ""
}

// Hint is "; did you mean NAME?" for the name Closest finds, else "".
func Hint(word string, known []string) string {
	if k := Closest(word, known); k != "" {
		return "; did you mean " + k + "?"
	}
	return ""
}

// distance is the optimal string alignment distance between a and b
// (Levenshtein with adjacent transpositions), in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
