package wgquick

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {3482, "3.40 KiB"},
		{1258291, "1.20 MiB"}, {5 << 30, "5.00 GiB"}, {3 << 40, "3.00 TiB"},
	} {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFormatAgo(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		secs int64
		want string
	}{
		{0, "Now"}, {1, "1 second ago"}, {65, "1 minute, 5 seconds ago"}, {3600, "1 hour ago"},
		{2*86400 + 7200 + 1, "2 days, 2 hours, 1 second ago"}, {365*86400 + 60, "1 year, 1 minute ago"},
		{-5, "(System clock wound backward; connection problems may ensue.)"},
	} {
		if got := FormatAgo(now.Add(-time.Duration(tt.secs)*time.Second), now); got != tt.want {
			t.Errorf("FormatAgo(-%ds) = %q, want %q", tt.secs, got, tt.want)
		}
	}
}

func testDevice(now time.Time) *wgtypes.Device {
	priv, _ := ParseKey(testPriv)
	p1, _ := ParseKey("0CpSGmRYqUs9GfMWgI2k7pAQBgY4mOiSWoMYa/0qKHY=")
	_, n1, _ := net.ParseCIDR("10.0.0.2/32")
	_, n2, _ := net.ParseCIDR("fd00::/64")
	return &wgtypes.Device{
		Name: "wg0", PrivateKey: wgtypes.Key(priv), PublicKey: wgtypes.Key(priv.PublicKey()),
		ListenPort: 51820, FirewallMark: 51820,
		Peers: []wgtypes.Peer{
			{PublicKey: wgtypes.Key(priv.PublicKey())},
			{
				PublicKey: wgtypes.Key(p1), PresharedKey: wgtypes.Key{1},
				Endpoint:   &net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 4500},
				AllowedIPs: []net.IPNet{*n1, *n2}, LastHandshakeTime: now.Add(-65 * time.Second),
				ReceiveBytes: 1258291, TransmitBytes: 3482, PersistentKeepaliveInterval: 25 * time.Second,
			},
		},
	}
}

func TestFormatDeviceLikeWGShow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var b bytes.Buffer
	if err := FormatDevice(&b, testDevice(now), now); err != nil {
		t.Fatal(err)
	}
	want := `interface: wg0
  public key: hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=
  private key: (hidden)
  listening port: 51820
  fwmark: 0xca6c

peer: 0CpSGmRYqUs9GfMWgI2k7pAQBgY4mOiSWoMYa/0qKHY=
  preshared key: (hidden)
  endpoint: [2001:db8::1]:4500
  allowed ips: 10.0.0.2/32, fd00::/64
  latest handshake: 1 minute, 5 seconds ago
  transfer: 1.20 MiB received, 3.40 KiB sent
  persistent keepalive: every 25 seconds

peer: hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=
  allowed ips: (none)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), testPriv) {
		t.Error("private key printed")
	}
}

func TestWriteJSONSchema(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var b bytes.Buffer
	if err := WriteJSON(&b, []*wgtypes.Device{testDevice(now)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), testPriv) || strings.Contains(b.String(), "AQAAAAAA") {
		t.Fatal("secret key in JSON")
	}
	var doc ShowJSON
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != 1 || len(doc.Interfaces) != 1 {
		t.Fatalf("doc = %+v", doc)
	}
	i := doc.Interfaces[0]
	if i.Name != "wg0" || i.PublicKey != testPub || i.ListenPort != 51820 || i.FwMark != 51820 || len(i.Peers) != 2 {
		t.Fatalf("interface = %+v", i)
	}
	p := i.Peers[0]
	if !p.HasPresharedKey || p.Endpoint != "[2001:db8::1]:4500" || p.LatestHandshakeUnix != now.Unix()-65 ||
		p.RxBytes != 1258291 || p.TxBytes != 3482 || p.PersistentKeepalive != 25 || len(p.AllowedIPs) != 2 {
		t.Errorf("peer = %+v", p)
	}
	if q := i.Peers[1]; q.LatestHandshake != nil || q.LatestHandshakeUnix != 0 || q.AllowedIPs == nil {
		t.Errorf("peer without handshake = %+v", q)
	}
	// Field names are the documented, stable ones.
	for _, k := range []string{`"schema"`, `"interfaces"`, `"listen_port"`, `"has_preshared_key"`, `"latest_handshake"`, `"rx_bytes"`, `"persistent_keepalive"`} {
		if !strings.Contains(b.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// TestWriteJSONGolden pins the whole document: programs depend on it, so
// any change to testdata/show.json must be an addition.
func TestWriteJSONGolden(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var b bytes.Buffer
	if err := WriteJSON(&b, []*wgtypes.Device{testDevice(now)}); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/show.json")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("JSON differs from testdata/show.json:\n%s", b.String())
	}
}
