package wgquick

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestPublicKeyKnownAnswer(t *testing.T) {
	k, err := ParseKey(testPriv)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.PublicKey().String(); got != testPub {
		t.Errorf("PublicKey = %s, want %s", got, testPub)
	}
	// RFC 7748 section 6.1: Alice's key pair.
	a, _ := ParseKey("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	if a.PublicKey().String() != "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=" {
		t.Error("RFC 7748 vector mismatch")
	}
}

func TestGeneratePrivateKeyIsClamped(t *testing.T) {
	seen := map[Key]bool{}
	for range 50 {
		k, err := GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		if k[0]&7 != 0 || k[31]&128 != 0 || k[31]&64 == 0 {
			t.Fatalf("key not clamped: %x", k)
		}
		if seen[k] {
			t.Fatal("repeated key")
		}
		seen[k] = true
		if k2, err := ParseKey(k.String()); err != nil || k2 != k {
			t.Fatalf("text form does not round-trip")
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, s := range []string{
		"", "abc", testPriv[:43], testPriv + "=", strings.Replace(testPriv, "=", "A", 1),
		"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCp=", // non-zero trailing bits
		"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25L-o=", // URL alphabet
	} {
		if _, err := ParseKey(s); err != ErrBadKey {
			t.Errorf("ParseKey(%q) = %v, want ErrBadKey", s, err)
		}
	}
}

// TestMatchesWG compares against the real wg tool when it is installed.
func TestMatchesWG(t *testing.T) {
	wg, err := exec.LookPath("wg")
	if err != nil {
		t.Skip("wg (wireguard-tools) is not installed; known-answer tests still ran")
	}
	for range 10 {
		out, err := exec.Command(wg, "genkey").Output()
		if err != nil {
			t.Fatal(err)
		}
		priv, err := ParseKey(strings.TrimSuffix(string(out), "\n"))
		if err != nil {
			t.Fatalf("wg genkey output does not parse")
		}
		cmd := exec.Command(wg, "pubkey")
		cmd.Stdin = bytes.NewReader(out)
		pub, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := priv.PublicKey().String() + "\n"; got != string(pub) {
			t.Fatalf("public key %q, wg says %q", got, pub)
		}
		mine, _ := GeneratePrivateKey()
		cmd = exec.Command(wg, "pubkey")
		cmd.Stdin = strings.NewReader(mine.String() + "\n")
		pub, err = cmd.Output()
		if err != nil {
			t.Fatalf("wg pubkey rejects our key: %v", err)
		}
		if got := mine.PublicKey().String() + "\n"; got != string(pub) {
			t.Fatalf("public key %q, wg says %q", got, pub)
		}
	}
}

// FuzzParseKey checks the key parser: no panics, and whatever it accepts
// prints back as exactly the same text (one canonical spelling per key).
func FuzzParseKey(f *testing.F) {
	f.Add("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	f.Add("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCp=") // non-canonical last bits
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	f.Add("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if err != ErrBadKey {
				t.Fatalf("ParseKey(%q): unexpected error %v", s, err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q) accepted a text that prints as %q", s, k.String())
		}
	})
}
