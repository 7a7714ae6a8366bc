package client

import (
	"errors"
	"testing"
)

func TestParseCRV1(t *testing.T) {
	ch, ok, err := parseCRV1("CRV1:R,E:st:Ym9i:Enter PIN: now")
	if !ok || err != nil || !ch.Echo || !ch.Required || ch.StateID != "st" || ch.Username != "bob" || ch.Text != "Enter PIN: now" {
		t.Fatalf("%+v %v %v", ch, ok, err)
	}
	if u, p := ch.Answer("1234"); u != "bob" || p != "CRV1::st::1234" {
		t.Fatalf("answer %q %q", u, p)
	}
	if !errors.Is(ch, ErrAuthFailed) {
		t.Fatal("a challenge is not an AUTH_FAILED")
	}
	if _, ok, _ := parseCRV1("SESSION: expired"); ok {
		t.Fatal("another reason taken for a challenge")
	}
	for _, bad := range []string{"CRV1:", "CRV1:R:st", "CRV1:R:st:!!:text"} {
		if _, ok, err := parseCRV1(bad); !ok || err == nil {
			t.Errorf("%q: ok %v err %v", bad, ok, err)
		}
	}
}

func FuzzParseCRV1(f *testing.F) {
	f.Add("CRV1:R,E:st:Ym9i:Enter PIN")
	f.Add("CRV1::::")
	f.Fuzz(func(t *testing.T, s string) {
		ch, ok, err := parseCRV1(s)
		if ok && err == nil && ch == nil {
			t.Fatal("no challenge and no error")
		}
	})
}
