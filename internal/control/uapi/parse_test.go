package uapi

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
)

// Keys used across the tests, as wg writes them (lowercase hexadecimal).
const (
	hexPriv = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a"
	hexPub1 = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33"
	hexPub2 = "58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376"
	hexPSK  = "188515093e952f5f22e865cef3012e72f8b5f0b598ac0309d5dacce3b70fcf52"
	hexZero = "0000000000000000000000000000000000000000000000000000000000000000"
)

func mustKey(t testing.TB, s string) noise.Key {
	t.Helper()
	var k noise.Key
	if !decodeKeyHex(&k, []byte(s)) {
		t.Fatalf("bad test key %q", s)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

func TestParseSetAcceptsEveryKey(t *testing.T) {
	in := "private_key=" + hexPriv + "\n" +
		"listen_port=51820\n" +
		"fwmark=4294967295\n" +
		"replace_peers=true\n" +
		"public_key=" + hexPub1 + "\n" +
		"update_only=true\n" +
		"preshared_key=" + hexPSK + "\n" +
		"endpoint=[fe80::1%eth0]:51820\n" +
		"persistent_keepalive_interval=25\n" +
		"replace_allowed_ips=true\n" +
		"allowed_ip=10.0.0.1/24\n" +
		"allowed_ip=-fd00::/64\n" +
		"protocol_version=1\n" +
		"public_key=" + strings.ToUpper(hexPub2) + "\n" +
		"remove=true\n" +
		"endpoint=192.0.2.1:1\n" +
		"\n" +
		"get=1\n"
	br := bufio.NewReader(strings.NewReader(in))
	got, err := ParseSet(br)
	if err != nil {
		t.Fatal(err)
	}
	want := &device.Config{
		PrivateKey:   ptr(mustKey(t, hexPriv)),
		ListenPort:   ptr(uint16(51820)),
		FwMark:       ptr(uint32(4294967295)),
		ReplacePeers: true,
		Peers: []device.PeerConfig{{
			PublicKey:           mustKey(t, hexPub1),
			UpdateOnly:          true,
			PresharedKey:        ptr(mustKey(t, hexPSK)),
			Endpoint:            ptr(netip.MustParseAddrPort("[fe80::1%eth0]:51820")),
			PersistentKeepalive: ptr(uint16(25)),
			ReplaceAllowedIPs:   true,
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.MustParsePrefix("10.0.0.0/24")},
				{Prefix: netip.MustParsePrefix("fd00::/64"), Remove: true},
			},
		}, {
			PublicKey: mustKey(t, hexPub2),
			Remove:    true,
			Endpoint:  ptr(netip.MustParseAddrPort("192.0.2.1:1")),
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSet:\n got %s\nwant %s", formatSet(got), formatSet(want))
	}
	// Nothing past the blank line was consumed.
	rest, _ := io.ReadAll(br)
	if string(rest) != "get=1\n" {
		t.Fatalf("after the request the reader holds %q, want %q", rest, "get=1\n")
	}
}

func TestParseSetReplaceAllowedIPsDropsEarlierLines(t *testing.T) {
	in := "public_key=" + hexPub1 + "\nallowed_ip=10.0.0.0/8\nallowed_ip=-10.1.0.0/16\nreplace_allowed_ips=true\nallowed_ip=10.2.0.0/16\n\n"
	got, err := ParseSet(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.2.0.0/16")}}
	if p := got.Peers[0]; !p.ReplaceAllowedIPs || !reflect.DeepEqual(p.AllowedIPs, want) {
		t.Fatalf("got %s", formatSet(got))
	}
}

func TestParseSetEmptyRequest(t *testing.T) {
	got, err := ParseSet(strings.NewReader("\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &device.Config{}) {
		t.Fatalf("empty request parsed as %+v", got)
	}
}

func TestParseSetEndOfInputEndsTheOperation(t *testing.T) {
	got, err := ParseSet(strings.NewReader("listen_port=1\nfwmark=2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *got.ListenPort != 1 || *got.FwMark != 2 {
		t.Fatalf("got %+v", got)
	}
}

func TestParseSetZeroKeysAreKept(t *testing.T) {
	got, err := ParseSet(strings.NewReader("private_key=" + hexZero + "\npublic_key=" + hexPub1 + "\npreshared_key=" + hexZero + "\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.PrivateKey == nil || !got.PrivateKey.IsZero() || got.Peers[0].PresharedKey == nil || !got.Peers[0].PresharedKey.IsZero() {
		t.Fatalf("all-zero keys must arrive as present and zero: %+v", got)
	}
}

func TestParseSetErrors(t *testing.T) {
	pk := "public_key=" + hexPub1 + "\n"
	long := "allowed_ip=" + strings.Repeat("1", MaxLineLen) + "\n"
	tests := []struct {
		name  string
		in    string
		errno Errno
		line  int
	}{
		{"a line without an equals sign is a protocol error", "listen_port=1\nbogus\n\n", ErrnoProtocol, 2},
		{"an unknown device key is invalid", "listen_prt=1\n\n", ErrnoInvalid, 1},
		{"an unknown peer key is invalid", pk + "allowed_ips=10.0.0.0/8\n\n", ErrnoInvalid, 2},
		{"a device key after public_key is invalid", pk + "listen_port=1\n\n", ErrnoInvalid, 2},
		{"private_key after public_key is invalid", pk + "private_key=" + hexPriv + "\n\n", ErrnoInvalid, 2},
		{"a peer key before public_key is invalid", "allowed_ip=10.0.0.0/8\n\n", ErrnoInvalid, 1},
		{"a short private key is invalid", "private_key=" + hexPriv[:62] + "\n\n", ErrnoInvalid, 1},
		{"a long public key is invalid", "public_key=" + hexPub1 + "00\n\n", ErrnoInvalid, 1},
		{"a base64 key is invalid", "public_key=uFmW/sycfx/G0lcqdu2hHVm80gvo5UOxXOS9hajnWjM=\n\n", ErrnoInvalid, 1},
		{"a non-hex character in a key is invalid", "public_key=" + hexPub1[:63] + "g\n\n", ErrnoInvalid, 1},
		{"a bad preshared key is invalid", pk + "preshared_key=xyz\n\n", ErrnoInvalid, 2},
		{"listen_port above 65535 is invalid", "listen_port=65536\n\n", ErrnoInvalid, 1},
		{"a negative listen_port is invalid", "listen_port=-1\n\n", ErrnoInvalid, 1},
		{"a signed listen_port is invalid", "listen_port=+1\n\n", ErrnoInvalid, 1},
		{"an empty listen_port is invalid", "listen_port=\n\n", ErrnoInvalid, 1},
		{"fwmark above 32 bits is invalid", "fwmark=4294967296\n\n", ErrnoInvalid, 1},
		{"a hexadecimal fwmark is invalid", "fwmark=0x10\n\n", ErrnoInvalid, 1},
		{"a huge number is invalid", "fwmark=99999999999999999999999\n\n", ErrnoInvalid, 1},
		{"replace_peers=false is invalid", "replace_peers=false\n\n", ErrnoInvalid, 1},
		{"remove=1 is invalid", pk + "remove=1\n\n", ErrnoInvalid, 2},
		{"update_only=yes is invalid", pk + "update_only=yes\n\n", ErrnoInvalid, 2},
		{"replace_allowed_ips=TRUE is invalid", pk + "replace_allowed_ips=TRUE\n\n", ErrnoInvalid, 2},
		{"a host name endpoint is invalid", pk + "endpoint=example.com:51820\n\n", ErrnoInvalid, 2},
		{"an IPv6 endpoint without brackets is invalid", pk + "endpoint=fd00::1:51820\n\n", ErrnoInvalid, 2},
		{"an IPv4 endpoint in brackets is invalid", pk + "endpoint=[192.0.2.1]:51820\n\n", ErrnoInvalid, 2},
		{"an endpoint without a port is invalid", pk + "endpoint=192.0.2.1\n\n", ErrnoInvalid, 2},
		{"an endpoint with port 0 is invalid", pk + "endpoint=192.0.2.1:0\n\n", ErrnoInvalid, 2},
		{"an endpoint port above 65535 is invalid", pk + "endpoint=192.0.2.1:65536\n\n", ErrnoInvalid, 2},
		{"a keepalive above 65535 is invalid", pk + "persistent_keepalive_interval=65536\n\n", ErrnoInvalid, 2},
		{"an allowed IP without bits is invalid", pk + "allowed_ip=10.0.0.1\n\n", ErrnoInvalid, 2},
		{"an allowed IPv4 prefix over 32 bits is invalid", pk + "allowed_ip=10.0.0.0/33\n\n", ErrnoInvalid, 2},
		{"an allowed IPv6 prefix over 128 bits is invalid", pk + "allowed_ip=fd00::/129\n\n", ErrnoInvalid, 2},
		{"an allowed IP with a zone is invalid", pk + "allowed_ip=fe80::%eth0/64\n\n", ErrnoInvalid, 2},
		{"an empty allowed IP is invalid", pk + "allowed_ip=\n\n", ErrnoInvalid, 2},
		{"a lone minus is invalid", pk + "allowed_ip=-\n\n", ErrnoInvalid, 2},
		{"a double minus is invalid", pk + "allowed_ip=--10.0.0.0/8\n\n", ErrnoInvalid, 2},
		{"protocol_version=2 is invalid", pk + "protocol_version=2\n\n", ErrnoInvalid, 2},
		{"a line with a carriage return is invalid", "listen_port=1\r\n\n", ErrnoInvalid, 1},
		{"a line too long is invalid at its line", pk + "listen_port=1\n" + long + "\n", ErrnoInvalid, 2},
		{"the first of several errors is reported", pk + "allowed_ip=x\nbogus\n\n", ErrnoInvalid, 2},
		{"a last line without newline is invalid", "listen_port=1\nfwmark=1", ErrnoInvalid, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseSet(strings.NewReader(tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseSet(%q) = %+v, %v; want an *Error", tt.in, req, err)
			}
			if req != nil {
				t.Errorf("a failed parse returned a request")
			}
			if e.Errno != tt.errno || e.Line != tt.line {
				t.Errorf("error %q: errno %d line %d, want errno %d line %d", e, e.Errno, e.Line, tt.errno, tt.line)
			}
			if !strings.Contains(e.Error(), "line "+strconv.Itoa(tt.line)+":") {
				t.Errorf("message %q does not name line %d", e, tt.line)
			}
		})
	}
}

func TestParseSetErrorsNeverEchoKeyMaterial(t *testing.T) {
	secret := hexPriv
	secretB64 := "6Eta bScXwQA6E7QxVwNT26ypFGzxUMX4V1aA/rpSAno="
	inputs := []string{
		"private_key=" + secret + "0\n\n",
		"private_key=" + secret[:63] + "z\n\n",
		"public_key=" + hexPub1 + "\npreshared_key=" + secret + "00\n\n",
		"listen_port=" + secret + "\n\n",
		"public_key=" + hexPub1 + "\nendpoint=" + secret + "\n\n",
		"public_key=" + hexPub1 + "\nallowed_ip=" + secret + "\n\n",
		"public_key=" + hexPub1 + "\nallowed_ip=" + secretB64 + "\n\n",
		secret + "=1\n\n",
		secret + "\n\n",
		"private-key=" + secret + "\n\n",
		"public_key=" + hexPub1 + "\nprivate_key=" + secret + "\n\n",
	}
	for _, in := range inputs {
		_, err := ParseSet(strings.NewReader(in))
		if err == nil {
			t.Fatalf("ParseSet(%q) succeeded", in)
		}
		msg := err.Error()
		for _, frag := range []string{secret[:16], secret[20:36], secret[48:], secretB64[:10], secretB64[25:35]} {
			if strings.Contains(msg, frag) {
				t.Errorf("message %q echoes key material", msg)
			}
		}
	}
}

func TestParseSetEchoesHarmlessValues(t *testing.T) {
	_, err := ParseSet(strings.NewReader("listen_port=70000\n\n"))
	if err == nil || !strings.Contains(err.Error(), `"70000"`) {
		t.Fatalf("error %v should quote the bad port", err)
	}
	_, err = ParseSet(strings.NewReader("listn_port=1\n\n"))
	if err == nil || !strings.Contains(err.Error(), `"listn_port"`) {
		t.Fatalf("error %v should quote the unknown key", err)
	}
}

// A small reader buffer must not change what is accepted: lines longer than
// the buffer are gathered, and lines over MaxLineLen are skipped whole.
func TestParseSetSmallReaderBuffer(t *testing.T) {
	in := "public_key=" + hexPub1 + "\nendpoint=[2001:db8:1234:5678:9abc:def0:1234:5678]:51820\nallowed_ip=2001:db8::/32\n\nnext"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	got, err := ParseSet(br)
	if err != nil {
		t.Fatal(err)
	}
	if got.Peers[0].PublicKey != mustKey(t, hexPub1) || got.Peers[0].Endpoint.Port() != 51820 || len(got.Peers[0].AllowedIPs) != 1 {
		t.Fatalf("got %s", formatSet(got))
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "next" {
		t.Fatalf("reader left %q, want %q", rest, "next")
	}

	in = "listen_port=1\nx=" + strings.Repeat("y", 3*MaxLineLen) + "\nfwmark=1\n\nnext"
	br = bufio.NewReaderSize(strings.NewReader(in), 16)
	_, err = ParseSet(br)
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Errno != ErrnoInvalid {
		t.Fatalf("got %v, want EINVAL at line 2", err)
	}
	rest, _ = io.ReadAll(br)
	if string(rest) != "next" {
		t.Fatalf("after an error the parser must still stop at the blank line; reader left %q", rest)
	}
}

func TestParseSetLongestValidLines(t *testing.T) {
	in := "public_key=" + hexPub1 + "\n" +
		"endpoint=[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255%abcdefghijklmno]:65535\n" +
		"allowed_ip=-ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128\n\n"
	if _, err := ParseSet(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
}

// buildAllowedIPs returns a request giving one peer n generated prefixes.
func buildAllowedIPs(n int) string {
	var b strings.Builder
	b.WriteString("public_key=" + hexPub1 + "\nreplace_allowed_ips=true\n")
	for i := 0; i < n; i++ {
		b.WriteString("allowed_ip=" + genPrefix(i).String() + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

func TestParseSet131071AllowedIPs(t *testing.T) {
	const n = 131071
	in := buildAllowedIPs(n)
	var req *device.Config
	allocs := testing.AllocsPerRun(3, func() {
		var err error
		req, err = ParseSet(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
	})
	ips := req.Peers[0].AllowedIPs
	if len(ips) != n || ips[0].Prefix != genPrefix(0) || ips[n-1].Prefix != genPrefix(n-1) {
		t.Fatalf("got %d prefixes", len(ips))
	}
	// No allocation per line: only the reader, the request and the
	// slice's doublings.
	if allocs > 64 {
		t.Fatalf("parsing %d lines took %v allocations; want no per-line allocation", n, allocs)
	}
}

func TestParseSetRejectsTooManyAllowedIPs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20 MB request")
	}
	in := buildAllowedIPs(MaxAllowedIPs + 1)
	_, err := ParseSet(strings.NewReader(in))
	var e *Error
	if !errors.As(err, &e) || e.Errno != ErrnoInvalid || e.Line != MaxAllowedIPs+3 {
		t.Fatalf("got %v, want EINVAL at line %d", err, MaxAllowedIPs+3)
	}
}

func BenchmarkParseSet131071AllowedIPs(b *testing.B) {
	in := buildAllowedIPs(131071)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSet(strings.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseSet checks that any input gives either a request that survives a
// round trip through its text form, or an *Error with a sane errno and line.
func FuzzParseSet(f *testing.F) {
	f.Add("private_key=" + hexPriv + "\nlisten_port=51820\nfwmark=0\nreplace_peers=true\npublic_key=" + hexPub1 +
		"\npreshared_key=" + hexPSK + "\nendpoint=[::1]:51820\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=10.0.0.0/8\nallowed_ip=-::/0\nprotocol_version=1\n\n")
	f.Add("public_key=" + hexPub1 + "\nremove=true\npublic_key=" + hexPub2 + "\nupdate_only=true\nendpoint=1.2.3.4:5\n\n")
	f.Add("listen_port=1\n")
	f.Add("bogus\n\n")
	f.Add("listen_port=99999999999999999999999\n")
	f.Add("public_key=" + hexPub1 + "\nallowed_ip=1.2.3.4/33\n")
	f.Add("\n")
	f.Add("fwmark=1")
	f.Add("public_key=" + hexPub1 + "\nallowed_ip=10.0.0.0/8\nreplace_allowed_ips=true\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		lines := strings.Count(in, "\n") + 1
		req, err := ParseSet(strings.NewReader(in))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.Errno != ErrnoInvalid && e.Errno != ErrnoProtocol {
				t.Fatalf("unexpected errno %d", e.Errno)
			}
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("error line %d outside 1..%d", e.Line, lines)
			}
			return
		}
		text := formatSet(req)
		again, err := ParseSet(strings.NewReader(text + "\n"))
		if err != nil {
			t.Fatalf("re-parsing %q: %v", text, err)
		}
		if !reflect.DeepEqual(req, again) && !(len(req.Peers) == 0 && len(again.Peers) == 0) {
			t.Fatalf("round trip changed the request:\n%s\n%s", text, formatSet(again))
		}
	})
}
