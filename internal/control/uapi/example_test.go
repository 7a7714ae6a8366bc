package uapi_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
)

func ExampleParseSet() {
	req, err := uapi.ParseSet(strings.NewReader(
		"listen_port=51820\n" +
			"public_key=b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33\n" +
			"endpoint=[2001:db8::1]:51820\n" +
			"replace_allowed_ips=true\n" +
			"allowed_ip=10.0.0.0/24\n" +
			"\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	p := req.Peers[0]
	fmt.Println(*req.ListenPort, *p.Endpoint, p.ReplaceAllowedIPs, p.AllowedIPs[0].Prefix)

	_, err = uapi.ParseSet(strings.NewReader("listen_port=51820\nfwmark=-1\n\n"))
	fmt.Println(err)
	// Output:
	// 51820 [2001:db8::1]:51820 true 10.0.0.0/24
	// uapi: line 2: fwmark: invalid value "-1", want 0-4294967295
}

func ExampleWriter() {
	w := uapi.NewWriter(os.Stdout)
	w.Device(device.Status{ListenPort: 51820})
	w.Peer(device.PeerStatus{Endpoint: netip.MustParseAddrPort("192.0.2.1:51820"), TxBytes: 148})
	w.AllowedIP(netip.MustParsePrefix("10.0.0.2/32"))
	w.Finish(nil)
	// Output:
	// listen_port=51820
	// public_key=0000000000000000000000000000000000000000000000000000000000000000
	// preshared_key=0000000000000000000000000000000000000000000000000000000000000000
	// protocol_version=1
	// endpoint=192.0.2.1:51820
	// last_handshake_time_sec=0
	// last_handshake_time_nsec=0
	// tx_bytes=148
	// rx_bytes=0
	// persistent_keepalive_interval=0
	// allowed_ip=10.0.0.2/32
	// errno=0
}
