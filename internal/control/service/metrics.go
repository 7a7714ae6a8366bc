package service

// The collector reads the Host when Prometheus scrapes, never on the data
// path: a scrape costs one List (and one EngineCounters) call.
//
// Names and labels:
//   - WireGuard (and gateways, which are WireGuard interfaces) as
//     mdlayher/wireguard_exporter has them, so existing dashboards work:
//     wireguard_device_info{device,public_key},
//     wireguard_peer_info{device,public_key,endpoint,allowed_ips,name},
//     wireguard_peer_receive_bytes_total{device,public_key},
//     wireguard_peer_transmit_bytes_total{device,public_key},
//     wireguard_peer_last_handshake_seconds{device,public_key} (Unix time,
//     0 = never).
//   - OpenVPN: per client of a server, labelled by common name only
//     (clients sharing a name are summed; no connection time, no address):
//     openvpn_server_client_received_bytes_total{tunnel,common_name} and
//     ..._sent_bytes_total, openvpn_server_connected_clients{tunnel};
//     a client tunnel: openvpn_client_received_bytes_total{tunnel} and
//     ..._sent_bytes_total.
//   - Every tunnel: wirelane_tunnel_state{tunnel,kind,state} (1 for the
//     current state, 0 for the others), wirelane_tunnel_receive_bytes_total
//     and ..._transmit_bytes_total{tunnel,kind}.
//   - The engines' own counters (CounterSource): wirelane_NAME{tunnel,...}.
//   - The service: wirelane_event_subscribers,
//     wirelane_event_subscribers_dropped_total.

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descDeviceInfo   = prometheus.NewDesc("wireguard_device_info", "Metadata about a WireGuard device.", []string{"device", "public_key"}, nil)
	descPeerInfo     = prometheus.NewDesc("wireguard_peer_info", "Metadata about a WireGuard peer; join on public_key for its name.", []string{"device", "public_key", "endpoint", "allowed_ips", "name"}, nil)
	descPeerRx       = prometheus.NewDesc("wireguard_peer_receive_bytes_total", "Bytes received from the peer.", []string{"device", "public_key"}, nil)
	descPeerTx       = prometheus.NewDesc("wireguard_peer_transmit_bytes_total", "Bytes sent to the peer.", []string{"device", "public_key"}, nil)
	descPeerHS       = prometheus.NewDesc("wireguard_peer_last_handshake_seconds", "Unix time of the peer's latest handshake (0 = never).", []string{"device", "public_key"}, nil)
	descOVPNSrvRx    = prometheus.NewDesc("openvpn_server_client_received_bytes_total", "Bytes received from the server's clients of this common name.", []string{"tunnel", "common_name"}, nil)
	descOVPNSrvTx    = prometheus.NewDesc("openvpn_server_client_sent_bytes_total", "Bytes sent to the server's clients of this common name.", []string{"tunnel", "common_name"}, nil)
	descOVPNSrvConns = prometheus.NewDesc("openvpn_server_connected_clients", "Clients connected to the OpenVPN server.", []string{"tunnel"}, nil)
	descOVPNCliRx    = prometheus.NewDesc("openvpn_client_received_bytes_total", "Bytes received through the OpenVPN client tunnel.", []string{"tunnel"}, nil)
	descOVPNCliTx    = prometheus.NewDesc("openvpn_client_sent_bytes_total", "Bytes sent through the OpenVPN client tunnel.", []string{"tunnel"}, nil)
	descState        = prometheus.NewDesc("wirelane_tunnel_state", "1 for the tunnel's current state, 0 for the others.", []string{"tunnel", "kind", "state"}, nil)
	descTunnelRx     = prometheus.NewDesc("wirelane_tunnel_receive_bytes_total", "Bytes received by the tunnel (all peers).", []string{"tunnel", "kind"}, nil)
	descTunnelTx     = prometheus.NewDesc("wirelane_tunnel_transmit_bytes_total", "Bytes sent by the tunnel (all peers).", []string{"tunnel", "kind"}, nil)
	descSubscribers  = prometheus.NewDesc("wirelane_event_subscribers", "Clients reading /v1/events.", nil, nil)
	descDropped      = prometheus.NewDesc("wirelane_event_subscribers_dropped_total", "Event subscribers dropped because they stopped reading.", nil, nil)
)

// allStates is the state set of wirelane_tunnel_state.
var allStates = []State{StateDown, StateStarting, StateUp, StateReconnecting, StateStopping, StateFailed}

// metricNameRE and labelNameRE are Prometheus' rules for names.
var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// collector is the Host as a prometheus.Collector. It is unchecked
// (Describe sends nothing) because the engine counters' names are the
// Host's.
type collector struct {
	s *Server
}

// Describe sends no descriptions: the collector is unchecked.
func (c collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the Host and sends every metric.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.s.host.List() {
		kind := string(t.Kind)
		for _, st := range allStates {
			v := 0.0
			if t.State == st {
				v = 1
			}
			send(ch, descState, prometheus.GaugeValue, v, t.Name, kind, string(st))
		}
		send(ch, descTunnelRx, prometheus.CounterValue, float64(t.RxBytes), t.Name, kind)
		send(ch, descTunnelTx, prometheus.CounterValue, float64(t.TxBytes), t.Name, kind)
		switch t.Kind {
		case KindWireGuard, KindGateway:
			if t.State != StateUp && t.State != StateReconnecting {
				continue // no device: no device metrics, as the exporter
			}
			collectWireGuard(ch, &t)
			if t.Fleet != nil {
				collectFleet(ch, &t)
			}
		case KindOpenVPNServer:
			collectOVPNServer(ch, &t)
		case KindOpenVPNClient:
			send(ch, descOVPNCliRx, prometheus.CounterValue, float64(t.RxBytes), t.Name)
			send(ch, descOVPNCliTx, prometheus.CounterValue, float64(t.TxBytes), t.Name)
		}
	}
	if cs, ok := c.s.host.(CounterSource); ok {
		for _, ec := range cs.EngineCounters() {
			if m := engineMetric(ec); m != nil {
				ch <- m
			}
		}
	}
	n, dropped := c.s.hub.stats()
	send(ch, descSubscribers, prometheus.GaugeValue, float64(n))
	send(ch, descDropped, prometheus.CounterValue, float64(dropped))
}

func collectWireGuard(ch chan<- prometheus.Metric, t *Tunnel) {
	dev := t.Name
	if t.Interface != "" {
		dev = t.Interface
	}
	send(ch, descDeviceInfo, prometheus.GaugeValue, 1, dev, t.PublicKey)
	seen := map[string]bool{}
	for i := range t.Peers {
		p := &t.Peers[i]
		if p.PublicKey == "" || seen[p.PublicKey] {
			continue
		}
		seen[p.PublicKey] = true
		ep := ""
		if p.Endpoint != nil {
			ep = p.Endpoint.String()
		}
		ips := make([]string, len(p.AllowedIPs))
		for j, a := range p.AllowedIPs {
			ips[j] = a.String()
		}
		send(ch, descPeerInfo, prometheus.GaugeValue, 1, dev, p.PublicKey, ep, strings.Join(ips, ","), p.Name)
		send(ch, descPeerRx, prometheus.CounterValue, float64(p.RxBytes), dev, p.PublicKey)
		send(ch, descPeerTx, prometheus.CounterValue, float64(p.TxBytes), dev, p.PublicKey)
		hs := 0.0
		if p.LatestHandshake != nil && !p.LatestHandshake.IsZero() {
			hs = float64(p.LatestHandshake.Unix())
		}
		send(ch, descPeerHS, prometheus.GaugeValue, hs, dev, p.PublicKey)
	}
}

func collectOVPNServer(ch chan<- prometheus.Metric, t *Tunnel) {
	type sums struct{ rx, tx uint64 }
	byCN := map[string]*sums{}
	var cns []string
	for i := range t.Peers {
		p := &t.Peers[i]
		s := byCN[p.CommonName]
		if s == nil {
			s = &sums{}
			byCN[p.CommonName] = s
			cns = append(cns, p.CommonName)
		}
		s.rx += p.RxBytes
		s.tx += p.TxBytes
	}
	slices.Sort(cns)
	for _, cn := range cns {
		send(ch, descOVPNSrvRx, prometheus.CounterValue, float64(byCN[cn].rx), t.Name, cn)
		send(ch, descOVPNSrvTx, prometheus.CounterValue, float64(byCN[cn].tx), t.Name, cn)
	}
	send(ch, descOVPNSrvConns, prometheus.GaugeValue, float64(len(t.Peers)), t.Name)
}

// engineMetric turns one engine counter into a metric, or nil when its
// name or labels are not valid (a Host's mistake must not break the
// scrape).
func engineMetric(ec EngineCounter) prometheus.Metric {
	name := "wirelane_" + ec.Name
	if !metricNameRE.MatchString(name) {
		return nil
	}
	names := []string{"tunnel"}
	values := []string{ec.Tunnel}
	for _, l := range ec.Labels {
		if !labelNameRE.MatchString(l[0]) || strings.HasPrefix(l[0], "__") || slices.Contains(names, l[0]) {
			return nil
		}
		names = append(names, l[0])
		values = append(values, l[1])
	}
	help := ec.Help
	if help == "" {
		help = "Engine counter " + strconv.Quote(ec.Name) + "."
	}
	vt := prometheus.GaugeValue
	if strings.HasSuffix(ec.Name, "_total") {
		vt = prometheus.CounterValue
	}
	m, err := prometheus.NewConstMetric(prometheus.NewDesc(name, help, names, nil), vt, ec.Value, values...)
	if err != nil {
		return nil
	}
	return m
}

// send sends one constant metric, or nothing when a label value is not
// valid UTF-8 (a certificate's common name, say): bad input costs one
// series, never the scrape.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
	if m, err := prometheus.NewConstMetric(d, vt, v, labels...); err == nil {
		ch <- m
	}
}
