package suggest

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"}
	for _, tc := range []struct{ word, want string }{
		{"AllowedIp", "AllowedIPs"},
		{"allowedips", "AllowedIPs"},
		{"Allowed", "AllowedIPs"},
		{"EndPiont", "Endpoint"},
		{"PublicKy", "PublicKey"},
		{"PersistentKeepAlive", "PersistentKeepalive"},
		{"Persistent", "PersistentKeepalive"},
		{"MTU", ""},
		{"Frobnicate", ""},
		{"", ""},
	} {
		if got := Closest(tc.word, keys); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Hint("remot", []string{"remote", "route"}); got != "; did you mean remote?" {
		t.Errorf("Hint = %q", got)
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("AllowedIp")
	f.Add("éé")
	f.Fuzz(func(t *testing.T, w string) {
		Closest(w, []string{"AllowedIPs", "Endpoint", "ü"})
	})
}
