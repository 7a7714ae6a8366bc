package server

import (
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
)

// Interop with compressing OpenVPN 2.6 clients (allow-compression yes
// with comp-lzo yes, compress lz4, compress lz4-v2), through the
// server's TUN device: the client's kernel pings the server's tunnel
// address with compressible payloads (zeros, a repeated pattern), which
// OpenVPN compresses with liblzo2/liblz4. With the same compress line
// the server decompresses them and the kernel behind its TUN answers
// (Stats.Decompressed counts them), under allow-compression asym and
// without an allow-compression line (asym then, as in OpenVPN 2.6.14;
// yes is asym too, TestCompressedPacketDecompressed); with the stub of
// the same framing (comp-lzo no, compress stub, compress stub-v2) and
// allow-compression no, the large pings fail, are counted in
// Stats.Compressed and reported once (one ClientWarning), while small
// ones (never compressed) get through.
func TestE2EDecompressFromOpenVPNClients(t *testing.T) {
	f, dir := e2eFixture(t)
	srvNS, cNS := netns.New(t, "ocs"), netns.New(t, "occ")
	netns.Veth(t, srvNS, "s1", cNS, "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.74.1/24", "dev", "s1")
	netns.Run(t, cNS, "ip", "addr", "add", "192.168.74.2/24", "dev", "c1")

	for i, tc := range []struct{ name, line, stub, allow string }{
		{"comp-lzo", "comp-lzo yes", "comp-lzo no", ""},
		{"lz4", "compress lz4", "compress stub", "asym"},
		{"lz4-v2", "compress lz4-v2", "compress stub-v2", ""},
	} {
		for _, mode := range []string{tc.allow, "no"} {
			line := tc.line
			if mode == "no" {
				line = tc.stub
			}
			framing, alg, err := config.CompressFraming(strings.Fields(line))
			if err != nil {
				t.Fatal(err)
			}
			label := map[string]string{"": "none", "asym": "asym", "no": "no"}[mode]
			t.Run(tc.name+"/allow-compression "+label, func(t *testing.T) {
				dev := tunIn(t, srvNS, "wlsrv0") // a fresh device: a closed server closes its own
				netns.Run(t, srvNS, "ip", "addr", "add", "10.8.0.1/24", "dev", "wlsrv0")
				netns.Run(t, srvNS, "ip", "link", "set", "wlsrv0", "up")
				cfg := f.serverConfig(UDP)
				cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
				cfg.Compress, cfg.CompressDirective, cfg.CompressAlgorithm, cfg.AllowCompression = framing, line, alg, mode
				var mu sync.Mutex
				var warnings []string
				log, _ := testlog.New(t)
				s := startServer(t, cfg, Options{Logger: log, WrapSocket: udpIn(srvNS), Events: func(e Event) {
					if e.Kind == ClientWarning {
						mu.Lock()
						warnings = append(warnings, e.Reason)
						mu.Unlock()
					}
				}})
				attached := make(chan error, 1)
				go func() { attached <- s.AttachTUN(dev) }()
				name := "comp" + string(rune('a'+i)) + label
				startOpenVPNClient(t, f, dir, cNS, name, "192.168.74.1", "allow-compression yes", tc.line)

				netns.Run(t, cNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "-s", "16", "10.8.0.1")
				big := [][]string{{"-p", "00"}, {"-p", "776972656c616e65"}} // zeros, "wirelane" repeated
				st := s.Stats()
				if mode == "no" {
					for _, p := range big {
						if out, err := netns.Try(cNS, nil, append([]string{"ping", "-c", "2", "-i", "0.2", "-W", "1", "-s", "1200"}, append(p, "10.8.0.1")...)...); err == nil {
							t.Fatalf("a compressed ping got through under allow-compression no:\n%s", out)
						}
					}
					mu.Lock()
					defer mu.Unlock()
					if st.Compressed.Load() < 4 || st.Decompressed.Load() != 0 || len(warnings) != 1 || warnings[0] != msgCompressedRefused {
						t.Fatalf("refused %d, decompressed %d, warnings %q", st.Compressed.Load(), st.Decompressed.Load(), warnings)
					}
				} else {
					for _, p := range big {
						out := netns.Run(t, cNS, append([]string{"ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "1200"}, append(p, "10.8.0.1")...)...)
						if !strings.Contains(out, " 0% packet loss") {
							t.Fatalf("loss:\n%s", out)
						}
					}
					if st.Decompressed.Load() < 6 || st.Compressed.Load()+st.DecompressFailed.Load()+st.BadData.Load() != 0 || len(warnings) != 0 {
						t.Fatalf("decompressed %d, refused %d, failed %d, bad %d, warnings %q", st.Decompressed.Load(), st.Compressed.Load(), st.DecompressFailed.Load(), st.BadData.Load(), warnings)
					}
				}
				t.Logf("decompressed %d, refused %d", st.Decompressed.Load(), st.Compressed.Load())
				s.Close()
				if err := <-attached; err != nil {
					t.Fatalf("AttachTUN: %v", err)
				}
			})
		}
	}
}
