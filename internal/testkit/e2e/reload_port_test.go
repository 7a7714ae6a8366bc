package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestReloadListenPortAndPrivateKey: a reload that changes an address
// leaves the listening socket alone (the same socket, by inode: not
// rebound, unlike wireguard-go's listen_port set); a changed ListenPort
// is rebound; a new private key is applied and the command says every
// session restarted.
func TestReloadListenPortAndPrivateKey(t *testing.T) {
	h := newHub(t, []int{2}, []int{2}, nil)
	netns.Run(t, h.nsA, "ping", "-c", "1", "-W", "5", "10.70.0.2")
	inodeRE := regexp.MustCompile(`ino:(\d+)`)
	socket := func(port string) string {
		t.Helper()
		out := netns.Run(t, h.nsA, "ss", "-H", "-u", "-l", "-n", "-e", "sport", "=", ":"+port)
		var inos []string
		for _, m := range inodeRE.FindAllStringSubmatch(out, -1) {
			inos = append(inos, m[1])
		}
		return strings.Join(inos, ",")
	}
	before := socket("51000")
	if before == "" {
		t.Fatalf("no socket on :51000:\n%s", netns.Run(t, h.nsA, "ss", "-u", "-l", "-n", "-e"))
	}
	file := h.write(t, h.dir, h.a, h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2}, nil))
	if out, err := cli(h.nsA, "reload", file); err != nil || !strings.Contains(out, "10.80.0.1/24") {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if after := socket("51000"); after != before {
		t.Errorf("the listening socket changed on a reload that did not change the port: %s -> %s", before, after)
	}

	file = h.write(t, h.dir, h.a, strings.Replace(h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2}, nil), "ListenPort = 51000", "ListenPort = 51077", 1))
	if out, err := cli(h.nsA, "reload", file); err != nil || !strings.Contains(out, "51077") {
		t.Fatalf("reload of the port: %v\n%s", err, out)
	}
	if socket("51077") == "" || socket("51000") != "" {
		t.Errorf("after the port change:\n%s", netns.Run(t, h.nsA, "ss", "-u", "-l", "-n"))
	}

	k := newKey(t)
	file = h.write(t, h.dir, h.a, strings.Replace(strings.Replace(h.conf("Address = 10.70.0.1/24, 10.80.0.1/24", []int{2}, nil), "ListenPort = 51000", "ListenPort = 51077", 1), h.key.String(), k.String(), 1))
	out, err := cli(h.nsA, "reload", file)
	if err != nil || !strings.Contains(out, "new private key: every peer's session restarted") {
		t.Errorf("reload of a new private key: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(netns.Run(t, nil, "wg", "show", h.a, "public-key")); got != k.PublicKey().String() {
		t.Errorf("public key %s, want %s", got, k.PublicKey())
	}
}
