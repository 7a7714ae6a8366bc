package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRealPrometheusScrapes runs Debian's Prometheus server against the
// service's TCP metrics address and asks it, through its HTTP API, for the
// transfer of a peer.
func TestRealPrometheusScrapes(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("the Prometheus server is not installed (apt package prometheus)")
	}
	if testing.Short() {
		t.Skip("starts a Prometheus server (-short)")
	}
	h := NewFakeHost()
	h.Up(t.Context(), "wg0")
	h.Traffic("wg0", 0, 4242, 99)
	s := New(h, Config{})
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeMetrics(ml)
	defer s.Shutdown(context.Background())

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: wirelane\n    static_configs:\n      - targets: [%q]\n", ml.Addr().String())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := wl.Addr().String()
	wl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()

	q := url.Values{"query": {`wireguard_peer_receive_bytes_total{device="wg0",public_key="` + FakeKeyA + `"}`}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := promQuery("http://" + web + "/api/v1/query?" + q.Encode())
		if err == nil && v == "4242" {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("Prometheus never returned the peer's transfer (last: %q, %v)\n%s", v, err, log)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The friendly name joins through wireguard_peer_info.
	q = url.Values{"query": {`wireguard_peer_receive_bytes_total * on(device, public_key) group_left(name) wireguard_peer_info{name="Alice's phone"}`}}
	if v, err := promQuery("http://" + web + "/api/v1/query?" + q.Encode()); err != nil || v != "4242" {
		t.Errorf("the join on the friendly name: %q, %v", v, err)
	}
}

// promQuery runs an instant query and returns the first sample's value.
func promQuery(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("%v: %s", err, b)
	}
	if r.Status != "success" || len(r.Data.Result) == 0 || len(r.Data.Result[0].Value) != 2 {
		return "", fmt.Errorf("no sample yet: %s", b)
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	return v, nil
}
