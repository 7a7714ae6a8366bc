package wrap

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Keys made by `openvpn --genkey tls-crypt-v2-server|client` (2.6.14):
// the client keys unwrap with the server key, and their metadata is what
// openvpn was given.
func TestV2KeysFromOpenVPN(t *testing.T) {
	sk, err := ParseV2ServerKey(readTestdata(t, "v2server.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sk.Format(), readTestdata(t, "v2server.key")) {
		t.Error("server key does not format back to openvpn's file")
	}
	for name, check := range map[string]func([]byte) bool{
		"v2client-user.key": func(md []byte) bool { return DescribeMetadata(md) == "user YWxpY2VAZXhhbXBsZQ==" },
		"v2client-timestamp.key": func(md []byte) bool {
			ts, ok := MetadataTime(md)
			return ok && ts.After(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		},
	} {
		text := readTestdata(t, name)
		ck, err := ParseV2ClientKey(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(ck.Format(), text) {
			t.Errorf("%s does not format back to openvpn's file", name)
		}
		kc, md, err := sk.UnwrapClientKey(ck.WKc)
		if err != nil {
			t.Fatalf("%s: unwrap: %v", name, err)
		}
		if *kc != ck.Key {
			t.Errorf("%s: unwrapped Kc differs from the file's", name)
		}
		if !check(md) {
			t.Errorf("%s: metadata %s", name, DescribeMetadata(md))
		}
		// Wrapping again gives the same bytes (the construction is
		// deterministic: a synthetic IV).
		again, err := sk.WrapClientKey(kc, md)
		if err != nil || !bytes.Equal(again, ck.WKc) {
			t.Errorf("%s: rewrapped WKc differs (%v)", name, err)
		}
	}
}

// The WKc layout against an independent computation of the spec.
func TestV2WrapLayout(t *testing.T) {
	sk, _ := GenerateV2ServerKey()
	md, _ := UserMetadata("aGVsbG8=")
	ck, err := sk.NewClientKey(md)
	if err != nil {
		t.Fatal(err)
	}
	w := ck.WKc
	if len(w) != 32+256+len(md)+2 || int(binary.BigEndian.Uint16(w[len(w)-2:])) != len(w) {
		t.Fatalf("WKc length %d", len(w))
	}
	b, _ := aes.NewCipher(sk[:32])
	plain := make([]byte, len(w)-34)
	cipher.NewCTR(b, w[:16]).XORKeyStream(plain, w[32:len(w)-2])
	if !bytes.Equal(plain[:256], ck.Key[:]) || !bytes.Equal(plain[256:], md) {
		t.Fatal("ciphertext differs from the reference AES-256-CTR")
	}
	m := hmac.New(sha256.New, sk[64:96])
	m.Write(w[len(w)-2:])
	m.Write(plain)
	if !bytes.Equal(m.Sum(nil), w[:32]) {
		t.Fatal("tag differs from the reference HMAC-SHA256")
	}
	other, _ := GenerateV2ServerKey()
	if _, _, err := other.UnwrapClientKey(w); !errors.Is(err, ErrWKcAuth) {
		t.Fatalf("other server key: %v", err)
	}
	bad := append([]byte(nil), w...)
	bad[40] ^= 1
	if _, _, err := sk.UnwrapClientKey(bad); !errors.Is(err, ErrWKcAuth) {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, _, err := sk.UnwrapClientKey(w[:len(w)-1]); !errors.Is(err, ErrWKcLength) {
		t.Fatalf("cut: %v", err)
	}
	if _, err := UserMetadata(strings.Repeat("QUFB", 300)); err == nil {
		t.Fatal("oversized metadata accepted")
	}
}

func TestV2KeyParseErrors(t *testing.T) {
	srv := string(readTestdata(t, "v2server.key"))
	cli := string(readTestdata(t, "v2client-user.key"))
	for name, text := range map[string]string{
		"empty":           "",
		"static key":      string(testKey(1).Format()),
		"client as srv":   cli,
		"after end":       srv + "junk\n",
		"bad base64":      strings.Replace(srv, "K0h2", "K!h2", 1),
		"no end":          srv[:len(srv)-50],
		"short":           "-----BEGIN OpenVPN tls-crypt-v2 server key-----\nAAAA\n-----END OpenVPN tls-crypt-v2 server key-----\n",
		"headers present": strings.Replace(srv, "-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1),
	} {
		if _, err := ParseV2ServerKey([]byte(text)); err == nil {
			t.Errorf("server key %s: accepted", name)
		}
	}
	if _, err := ParseV2ClientKey([]byte(srv)); err == nil {
		t.Error("server key accepted as a client key")
	}
	ck, _ := ParseV2ClientKey([]byte(cli))
	ck.WKc = ck.WKc[:len(ck.WKc)-3]
	ck.WKc = append(ck.WKc, 0, 0) // length field 0
	if _, err := ParseV2ClientKey(ck.Format()); !errors.Is(err, ErrWKcLength) {
		t.Errorf("bad length field: %v", err)
	}
	if _, err := ParseV2ServerKey([]byte("# comment\n" + srv)); err != nil {
		t.Errorf("comment before the key: %v", err)
	}
	if _, err := ParseV2ServerKey([]byte("# comment\n" + strings.Replace(srv, "K0h2", "K!h2", 1))); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error lacks the line: %v", err)
	}
}

// A client and a server wrapper talk: the reset goes out as
// HARD_RESET_CLIENT_V3 with early negotiation and the WKc, the server's
// session wrapper hands the control channel a V2 reset, the server's
// early-negotiation reply sets ResendWKc and loses its payload, and
// message 1 goes out as CONTROL_WKC_V1.
func TestV2ClientServerExchange(t *testing.T) {
	sk, _ := GenerateV2ServerKey()
	ck, _ := sk.NewClientKey(TimestampMetadata(time.Now()))
	cli, err := NewV2Client(ck)
	if err != nil {
		t.Fatal(err)
	}
	reset := wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{1, 2, 3}}
	plain, _ := wire.AppendControl(nil, &reset)
	w, err := cli.Wrap(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if op, _ := wire.Header(w[0]); op != wire.HardResetClientV3 || !bytes.HasSuffix(w, ck.WKc) || !EarlyNegotiation(w) {
		t.Fatalf("reset %x", w[:20])
	}
	head, wkc, err := SplitWKc(w)
	if err != nil || !bytes.Equal(wkc, ck.WKc) {
		t.Fatalf("split: %v", err)
	}
	_ = head
	kc, _, err := sk.UnwrapClientKey(wkc)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewV2Session(kc, nil)
	got, err := srv.Unwrap(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("server sees %x, want %x", got, plain)
	}
	// A bit flipped in the WKc part of a CONTROL_WKC_V1 does not matter
	// to a session that has its key; one in the tls-crypt part does.
	reply := wire.ControlPacket{Op: wire.HardResetServerV2, Session: wire.SessionID{9}, Payload: EarlyNegReply()}
	rp, _ := wire.AppendControl(nil, &reply)
	rw, _ := srv.Wrap(nil, rp)
	if cli.ResendWKc() {
		t.Fatal("resend before the reply")
	}
	gotReply, err := cli.Unwrap(nil, rw)
	if err != nil {
		t.Fatal(err)
	}
	var dp wire.ControlPacket
	if err := wire.DecodeControl(gotReply, &dp); err != nil || len(dp.Payload) != 0 || dp.Session != reply.Session || !cli.ResendWKc() {
		t.Fatalf("reply %+v %v resend %v", dp, err, cli.ResendWKc())
	}
	msg := wire.ControlPacket{Op: wire.ControlV1, Session: reset.Session, NumAcks: 1, Remote: reply.Session, ID: 1}
	mp, _ := wire.AppendControl(nil, &msg)
	mw, _ := cli.Wrap(nil, mp)
	if op, _ := wire.Header(mw[0]); op != wire.ControlWKCV1 || !bytes.HasSuffix(mw, ck.WKc) {
		t.Fatalf("message 1 sent as %v", op)
	}
	mw[len(mw)-100] ^= 1 // inside the WKc
	if got, err := srv.Unwrap(nil, mw); err != nil || !bytes.Equal(got, mp) {
		t.Fatalf("WKC_V1: %v", err)
	}
	msg.ID = 2
	mp, _ = wire.AppendControl(nil, &msg)
	mw, _ = cli.Wrap(nil, mp)
	if op, _ := wire.Header(mw[0]); op != wire.ControlV1 || len(mw) != len(mp)+40 {
		t.Fatalf("message 2 sent as %v, %d bytes", op, len(mw))
	}
	if got, err := srv.Unwrap(nil, mw); err != nil || !bytes.Equal(got, mp) {
		t.Fatalf("CONTROL_V1: %v", err)
	}
	mw2, _ := cli.Wrap(nil, mp)
	mw2[20] ^= 1
	if _, err := srv.Unwrap(nil, mw2); !errors.Is(err, ErrAuth) {
		t.Fatalf("tampered: %v", err)
	}
}

func FuzzParseV2Key(f *testing.F) {
	f.Add(readTestdata(f, "v2server.key"))
	f.Add(readTestdata(f, "v2client-user.key"))
	f.Add(readTestdata(f, "v2client-timestamp.key"))
	f.Add([]byte("-----BEGIN OpenVPN tls-crypt-v2 client key-----\nAAAA\n-----END OpenVPN tls-crypt-v2 client key-----\n"))
	sk, _ := ParseV2ServerKey(readTestdata(f, "v2server.key"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := ParseV2ServerKey(b); err == nil {
			if k2, err := ParseV2ServerKey(k.Format()); err != nil || *k2 != *k {
				t.Fatalf("server key does not round-trip: %v", err)
			}
		}
		if k, err := ParseV2ClientKey(b); err == nil {
			if k2, err := ParseV2ClientKey(k.Format()); err != nil || k2.Key != k.Key || !bytes.Equal(k2.WKc, k.WKc) {
				t.Fatalf("client key does not round-trip: %v", err)
			}
			sk.UnwrapClientKey(k.WKc)
		}
	})
}

func FuzzUnwrapV2(f *testing.F) {
	sk, _ := ParseV2ServerKey(readTestdata(f, "v2server.key"))
	ck, _ := ParseV2ClientKey(readTestdata(f, "v2client-user.key"))
	cli, _ := NewV2Client(ck)
	reset := wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{1}}
	plain, _ := wire.AppendControl(nil, &reset)
	w, _ := cli.Wrap(nil, plain)
	f.Add(w)
	f.Add(ck.WKc)
	f.Add(w[:60])
	f.Fuzz(func(t *testing.T, b []byte) {
		sk.UnwrapClientKey(b)
		if _, wkc, err := SplitWKc(b); err == nil {
			if kc, _, err := sk.UnwrapClientKey(wkc); err == nil {
				s, _ := NewV2Session(kc, nil)
				s.Unwrap(nil, b)
			}
		}
		s, _ := NewV2Session(&ck.Key, nil)
		s.Unwrap(nil, b)
		c, _ := NewV2Client(ck)
		c.Unwrap(nil, b)
		EarlyNegotiation(b)
	})
}
