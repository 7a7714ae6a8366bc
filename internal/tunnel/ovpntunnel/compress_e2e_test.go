package ovpntunnel

// Compression framing against real OpenVPN 2.6 in both roles:
//
//	ccc (client side)                            ccs (server side)
//	  wirelane connect  -> openvpn --server        (Wirelane as the client)
//	  openvpn --client  -> wirelane serve          (Wirelane as the server)
//	  c1 192.168.86.2  ==========veth==========  s1 192.168.86.1
//
// For compress stub-v2, compress lz4-v2 (OpenVPN with allow-compression
// asym, so it decompresses but never compresses), comp-lzo no, and
// compress lzo with allow-compression yes on every end (OpenVPN
// compresses, Wirelane treats yes as asym and decompresses), each way:
// ping and a short iperf3 upload and download through the tunnel, and
// for lzo pings of 1200 zeros (which OpenVPN sends compressed) without
// loss; neither side may report a framing error or a dropped
// compressed packet.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// compressCases are the framings tested: the server's lines (pushed
// too where OpenVPN admins push them) and the client file's own.
var compressCases = []struct {
	name           string
	server, client string
	compressing    bool // OpenVPN compresses: send pings of zeros too
}{
	{"stub-v2", "compress stub-v2\npush \"compress stub-v2\"\n", "", false},
	{"lz4-v2 asym", "compress lz4-v2\nallow-compression asym\npush \"compress lz4-v2\"\n", "compress lz4-v2\nallow-compression asym\n", false},
	{"comp-lzo no", "comp-lzo no\n", "comp-lzo no\n", false},
	{"lzo compressing", "compress lzo\nallow-compression yes\n", "compress lzo\nallow-compression yes\n", true},
}

// framingErrors are what OpenVPN 2.6 logs for a payload whose framing it
// does not expect.
var framingErrors = []string{"Bad compression", "decompression header byte", "Bad LZO", "LZ4 decompression error"}

func checkNoFramingErrors(t *testing.T, who, out string) {
	t.Helper()
	for _, e := range framingErrors {
		if strings.Contains(out, e) {
			t.Fatalf("%s logged %q:\n%s", who, e, out)
		}
	}
}

func TestE2ECompressionFramingInterop(t *testing.T) {
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Compress CA", client: "cli1", srvNS: "ccs", cliNS: "ccc",
		srvIf: "s1", cliIf: "c1", net: "192.168.86", need: []string{"openvpn", "iperf3", "ping"}})
	tb.write(t, map[string]string{"cli1.crt": string(tb.cliCert), "cli1.key": string(tb.cliKey)})
	traffic := func(t *testing.T, addr string, compressing bool) {
		netns.Run(t, tb.cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", addr)
		if compressing {
			tb.pingZeros(t, addr)
		}
		for _, reverse := range []bool{false, true} {
			if r := tb.runIperf(t, addr, 1, reverse); r.Bytes <= 0 {
				t.Fatalf("iperf3 (reverse %v) moved no data: %+v", reverse, r)
			}
		}
	}
	for i, tc := range compressCases {
		net := fmt.Sprintf("10.12.%d", 2*i)
		port := 1200 + 2*i
		t.Run("wirelane client, openvpn server, "+tc.name, func(t *testing.T) {
			conf, prof := fmt.Sprintf("ovs%d.conf", i), fmt.Sprintf("wlc%d.ovpn", i)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\nlocal 192.168.86.1\ndev ovs%d\ndev-type tun\ntopology subnet\n"+
					"server %s.0 255.255.255.0\n%sdata-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n%s", port, i, net, serverCreds, tc.server),
				prof: fmt.Sprintf("client\ndev tun\nremote 192.168.86.1 %d udp\nnobind\nremote-cert-tls server\n%s%s", port, tc.client, tb.clientInline()),
			})
			ovs := tb.startOpenVPN(t, tb.srvNS, conf)
			cli := startHelper(t, tb.cliNS, "connect", "--dev", fmt.Sprintf("wlc%d", i), "--mtu", "1400", tb.path(prof))
			cli.waitFor(t, "tunnel up", 15*time.Second)
			traffic(t, net+".1", tc.compressing)
			cli.interrupt(t)
			checkNoFramingErrors(t, "openvpn server", ovs.out.String())
			checkNoCompressedDrops(t, cli)
		})
		net = fmt.Sprintf("10.12.%d", 2*i+1)
		port++
		t.Run("openvpn client, wirelane server, "+tc.name, func(t *testing.T) {
			conf, prof := fmt.Sprintf("wls%d.conf", i), fmt.Sprintf("ovc%d.ovpn", i)
			tb.write(t, map[string]string{
				conf: fmt.Sprintf("port %d\nproto udp4\ndev wls%d\ntun-mtu 1400\ntopology subnet\nserver %s.0 255.255.255.0\n%sdata-ciphers AES-256-GCM\nkeepalive 10 60\n%s",
					port, i, net, serverCreds, tc.server),
				prof: fmt.Sprintf("client\ndev ovc%d\ndev-type tun\nremote 192.168.86.1 %d udp4\nnobind\nremote-cert-tls server\n"+
					"ca ca.crt\ncert cli1.crt\nkey cli1.key\ndata-ciphers AES-256-GCM\ndisable-dco\nverb 3\n%s", i, port, tc.client),
			})
			srv := startHelper(t, tb.srvNS, "serve", tb.path(conf))
			srv.waitFor(t, "listening on udp", 10*time.Second)
			ovc := tb.startOpenVPN(t, tb.cliNS, prof)
			srv.waitFor(t, `client "cli1" connected`, 5*time.Second)
			traffic(t, net+".1", tc.compressing)
			srv.interrupt(t)
			checkNoFramingErrors(t, "openvpn client", ovc.out.String())
			checkNoCompressedDrops(t, srv)
		})
	}
}
