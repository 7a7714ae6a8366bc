package tray

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bytes renders a byte count in IEC units, as wg(8) does: "0 B",
// "512 B", "1.50 KiB", "3.21 GiB".
func Bytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// Ago renders how long ago t was, seen at now, in at most two units:
// "12 seconds ago", "1 minute, 5 seconds ago", "3 hours, 2 minutes ago",
// "2 days, 1 hour ago". A time in the future (clock skew) or under a
// second ago is "just now".
func Ago(t, now time.Time) string {
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	s := int64(d / time.Second)
	parts := []struct {
		n    int64
		unit string
	}{
		{s / 86400, "day"},
		{s / 3600 % 24, "hour"},
		{s / 60 % 60, "minute"},
		{s % 60, "second"},
	}
	var out []string
	for _, p := range parts {
		if p.n == 0 && len(out) == 0 {
			continue
		}
		if len(out) == 2 {
			break
		}
		if p.n == 0 {
			// "1 hour" rather than "1 hour, 0 minutes".
			break
		}
		u := p.unit
		if p.n != 1 {
			u += "s"
		}
		out = append(out, fmt.Sprintf("%d %s", p.n, u))
	}
	return strings.Join(out, ", ") + " ago"
}

// maxLabel is how many characters a menu label keeps.
const maxLabel = 72

// Clip shortens s to at most n characters (runes), ending with "…" when
// it cut, and turns control characters (newlines from an error message,
// escapes from a hostile service) into spaces.
func Clip(s string, n int) string {
	var b strings.Builder
	count := 0
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			r = '?'
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		if count == n-1 && utf8.RuneCountInString(s[i:]) > 1 {
			b.WriteString("…")
			return b.String()
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}

// MenuText escapes s for a dbusmenu label, where "_" marks the access
// key: a tunnel named "my_vpn" would otherwise show as "myvpn".
func MenuText(s string) string { return strings.ReplaceAll(s, "_", "__") }

// MarkupText escapes s for a notification body, which servers may read
// as a small subset of HTML (the specification's "body-markup").
func MarkupText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}
