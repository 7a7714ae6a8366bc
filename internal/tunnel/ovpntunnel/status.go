package ovpntunnel

// Status files: how `wirelane show` learns about running OpenVPN tunnels.
//
//	connect/serve -> statusPublisher (every 2 s, and on exit: removed)
//	    -> snapshot func -> JSON -> temp file -> rename to
//	       /var/run/wirelane/ovpn-<pid>.json (dir 0755, file 0640: client
//	       names and addresses are for root and its group; a process's later
//	       tunnels, in the service: ovpn-<pid>-<n>.json)
//	    after a drop to the file's user (privileges.go): the file kept
//	    open and rewritten in place, padded to its old length; emptied,
//	    not removed, on exit
//	Status() -> read every ovpn-*.json -> skip files whose process is gone
//	    or that stopped being updated -> []TunnelStatus -> FormatStatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/control/service"
)

// StatusDir is where running tunnels publish their status files. Tests
// point it elsewhere.
var StatusDir = "/var/run/wirelane"

// statusInterval is how often a running tunnel rewrites its status file;
// staleAfter is when Status stops trusting a file that was not rewritten
// (a hung process, or a reused process id).
const (
	statusInterval = 2 * time.Second
	staleAfter     = 30 * time.Second
)

// Tunnel kinds in TunnelStatus.Kind.
const (
	KindClient = "openvpn-client"
	KindServer = "openvpn-server"
)

// TunnelStatus describes one running OpenVPN tunnel. It holds no secrets.
type TunnelStatus struct {
	Kind      string `json:"kind"` // KindClient or KindServer
	PID       int    `json:"pid"`
	Interface string `json:"interface"` // TUN device ("" for dev null)
	Config    string `json:"config"`    // configuration file
	// Remote is the server's transport address (client) or the listening
	// address (server).
	Remote string `json:"remote"`
	Proto  string `json:"proto"`
	Cipher string `json:"cipher,omitempty"` // data cipher (client)
	// Address is the pushed address (client) or the server's tunnel
	// address, both with prefix length.
	Address string `json:"address"`
	// Address6 is the IPv6 counterpart of Address, when there is one.
	Address6 string    `json:"address6,omitempty"`
	Since    time.Time `json:"since"` // connected (client) or started (server)
	// RxBytes and TxBytes count IP packet bytes from and into the tunnel
	// (a server sums its clients).
	RxBytes uint64         `json:"rx_bytes"`
	TxBytes uint64         `json:"tx_bytes"`
	Clients []ClientStatus `json:"clients,omitempty"` // server only
	// DroppedControl and DroppedData count the packets a client's session
	// dropped because they failed their checks (authentication, replay,
	// format), since it connected.
	DroppedControl uint64 `json:"dropped_control,omitempty"`
	DroppedData    uint64 `json:"dropped_data,omitempty"`
	// DroppedCompressed counts a client's data packets the server
	// compressed, dropped under allow-compression no; DecompressFailed
	// those that did not decompress (since it connected).
	DroppedCompressed uint64 `json:"dropped_compressed,omitempty"`
	DecompressFailed  uint64 `json:"decompress_failed,omitempty"`
	// TUNErrors counts failed calls on the TUN device since the tunnel
	// started (a client's across its reconnects): writes that lost their
	// batch (a packet the kernel refused, the device set down) and reads
	// that dropped a packet.
	TUNErrors uint64 `json:"tun_errors,omitempty"`
	// SocketSendErrors counts failed sends on the transport socket (a
	// batch or a packet each: no route, a full buffer, a broken TCP
	// connection); a client's since it last connected.
	SocketSendErrors uint64 `json:"socket_send_errors,omitempty"`
	// HandshakesFailed counts a server's failed client handshakes by
	// reason (the reasons of ovpn/server's HandshakeFailure: tls_wrap,
	// verify, auth, max_clients, ...; those at zero are left out).
	HandshakesFailed map[string]uint64 `json:"handshakes_failed,omitempty"`
	// Control is the unix socket `wirelane reload` asks (reload.go).
	Control string    `json:"control,omitempty"`
	Updated time.Time `json:"updated"` // when the file was written
}

// ClientStatus is one client of a server tunnel.
type ClientStatus struct {
	CommonName string    `json:"common_name"`
	Remote     string    `json:"remote"`
	Address    string    `json:"address"`
	Address6   string    `json:"address6,omitempty"` // IPv6 tunnel address, when the server has an IPv6 pool
	PeerID     uint32    `json:"peer_id"`
	Cipher     string    `json:"cipher"`
	KeyID      uint8     `json:"key_id"` // the primary data key's id: it changes at each renegotiation
	Since      time.Time `json:"since"`
	RxBytes    uint64    `json:"rx_bytes"`
	TxBytes    uint64    `json:"tx_bytes"`
}

// statusPublisher rewrites one status file until closed.
type statusPublisher struct {
	path     string
	snapshot func() TunnelStatus // called from the publisher goroutine only
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once

	// mu guards f and size. f, once set by keepOpen (before a privilege
	// drop: StatusDir stays root's), is the status file, rewritten in
	// place instead of replaced; size is its length.
	mu   sync.Mutex
	f    *os.File
	size int
}

// publishers counts the status publishers this process has started.
var publishers atomic.Int64

// publishStatus writes the first status file now and starts rewriting it
// every interval.
func publishStatus(snapshot func() TunnelStatus, interval time.Duration) (*statusPublisher, error) {
	if err := makeStatusDir(); err != nil {
		return nil, err
	}
	// One process may run several tunnels (the service): the first keeps
	// the plain name, each later one gets its own.
	file := fmt.Sprintf("ovpn-%d.json", os.Getpid())
	if n := publishers.Add(1); n > 1 {
		file = fmt.Sprintf("ovpn-%d-%d.json", os.Getpid(), n)
	}
	p := &statusPublisher{path: filepath.Join(StatusDir, file),
		snapshot: snapshot, stop: make(chan struct{}), done: make(chan struct{})}
	if err := p.write(); err != nil {
		return nil, err
	}
	go p.run(interval)
	return p, nil
}

// makeStatusDir creates StatusDir (mode 0755) when it is missing.
func makeStatusDir() error {
	if _, err := os.Stat(StatusDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(StatusDir, 0o755); err != nil {
			return fmt.Errorf("status directory: %w", err)
		}
		_ = os.Chmod(StatusDir, 0o755) // whatever the umask
	}
	return nil
}

func (p *statusPublisher) run(interval time.Duration) {
	defer close(p.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			_ = p.write() // a full disk must not end the tunnel
		}
	}
}

// write replaces the status file atomically, or after keepOpen
// rewrites it in place.
func (p *statusPublisher) write() error {
	st := p.snapshot()
	st.PID = os.Getpid()
	st.Updated = time.Now()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil {
		return p.rewrite(b)
	}
	f, err := os.CreateTemp(StatusDir, ".ovpn-*.tmp")
	if err != nil {
		return fmt.Errorf("status file: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o640)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("status file: %w", err)
	}
	if err := os.Rename(f.Name(), p.path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("status file: %w", err)
	}
	return nil
}

// keepOpen opens the status file for rewriting in place: after a
// privilege drop the process may no longer create, rename or remove
// files in StatusDir (root's), but it may write a file it opened before.
func (p *statusPublisher) keepOpen() error {
	if p == nil {
		return nil
	}
	f, err := os.OpenFile(p.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("status file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("status file: %w", err)
	}
	p.mu.Lock()
	p.f, p.size = f, int(fi.Size())
	p.mu.Unlock()
	return nil
}

// rewrite writes b over the kept-open file in one write, padded with
// spaces (JSON whitespace) to the old length, so a reader never sees
// the tail of an older, longer text; a truncation only ever cuts
// padding. Called with mu held.
func (p *statusPublisher) rewrite(b []byte) error {
	n := len(b)
	if n < p.size {
		b = append(b, bytes.Repeat([]byte{' '}, p.size-n)...)
	}
	if _, err := p.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("status file: %w", err)
	}
	p.size = len(b)
	if p.size-n > 4096 {
		if err := p.f.Truncate(int64(n)); err == nil {
			p.size = n
		}
	}
	return nil
}

// close stops publishing and removes the file; a file kept open
// (keepOpen) cannot be removed and is emptied instead: Status skips it,
// and removes it once its process is gone, when run as root.
func (p *statusPublisher) close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		p.mu.Lock()
		defer p.mu.Unlock()
		if err := os.Remove(p.path); err != nil && p.f != nil {
			_ = p.f.Truncate(0)
		}
		if p.f != nil {
			p.f.Close()
		}
	})
}

// Status lists the OpenVPN tunnels running on this host, from their status
// files, ordered by interface. Files of processes that are gone, or that
// were not rewritten for 30 s, are skipped (and removed, when the caller
// may: a process killed with SIGKILL cannot remove its own). A missing
// status directory means no tunnels. Files this user may not read (they
// are 0640, root's) are left out and counted in an *UnreadableError,
// returned beside the tunnels that could be read.
func Status() ([]TunnelStatus, error) {
	names, err := filepath.Glob(filepath.Join(StatusDir, "ovpn-*.json"))
	if err != nil {
		return nil, err
	}
	var out []TunnelStatus
	unreadable := 0
	for _, name := range names {
		if pid, ok := statusFilePID(name); ok && !processAlive(pid) {
			removeStale(name)
			continue
		}
		b, err := readStatusFile(name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue // removed while listing
		case errors.Is(err, os.ErrPermission):
			unreadable++
			continue
		case err != nil:
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue // its process dropped privileges, and ended
		}
		var st TunnelStatus
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if !processAlive(st.PID) || time.Since(st.Updated) > staleAfter {
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Interface != out[j].Interface {
			return out[i].Interface < out[j].Interface
		}
		return out[i].PID < out[j].PID
	})
	if unreadable > 0 {
		return out, &UnreadableError{N: unreadable}
	}
	return out, nil
}

// readStatusFile reads a status file; one rewritten in place (keepOpen)
// may be read in the middle of a write, so text that is not JSON is read
// again, a few times.
func readStatusFile(name string) ([]byte, error) {
	for try := 0; ; try++ {
		b, err := os.ReadFile(name)
		if err != nil || try == 4 || len(bytes.TrimSpace(b)) == 0 || json.Valid(b) {
			return b, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// UnreadableError says how many OpenVPN tunnels' status files this user
// may not read.
type UnreadableError struct{ N int }

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("%d OpenVPN tunnel(s) not shown: only root can read their status in %s", e.N, StatusDir)
}

// statusFilePID is the process id in a status file's name
// (ovpn-PID.json or ovpn-PID-N.json).
func statusFilePID(path string) (int, bool) {
	base := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ovpn-"), ".json")
	if i := strings.IndexByte(base, '-'); i >= 0 {
		base = base[:i]
	}
	pid, err := strconv.Atoi(base)
	return pid, err == nil && pid > 0
}

// removeStale removes the status file of a process that is gone, and the
// control socket beside it (reload.go), when this user may.
func removeStale(path string) {
	os.Remove(path)
	os.Remove(strings.TrimSuffix(path, ".json") + ".sock")
}

// processAlive reports whether a process with id pid exists.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// FormatStatus writes the tunnels in the style of `wg show`, with the
// troubles their status files count (drops, failed handshakes, TUN and
// socket errors; none at zero).
func FormatStatus(w io.Writer, tunnels []TunnelStatus) error {
	return FormatStatusCounters(w, tunnels, nil)
}

// FormatStatusCounters is FormatStatus with the engine counters of the
// service's tunnels: for a tunnel for which counters answers true, the
// lines of those counters (service.CounterLines: the engine's full set,
// a server's drops by reason among them) replace the status file's. A nil
// counters is FormatStatus.
func FormatStatusCounters(w io.Writer, tunnels []TunnelStatus, counters func(TunnelStatus) ([]service.Counter, bool)) error {
	var b strings.Builder
	for i, t := range tunnels {
		if i > 0 {
			b.WriteByte('\n')
		}
		iface := t.Interface
		if iface == "" {
			iface = "(no device)"
		}
		fmt.Fprintf(&b, "interface: %s (%s, pid %d)\n", iface, t.Kind, t.PID)
		fmt.Fprintf(&b, "  config: %s\n", t.Config)
		if t.Kind == KindServer {
			fmt.Fprintf(&b, "  listening: %s %s\n", t.Proto, t.Remote)
		} else {
			fmt.Fprintf(&b, "  remote: %s %s\n", t.Proto, t.Remote)
		}
		fmt.Fprintf(&b, "  address: %s\n", t.Address)
		if t.Address6 != "" {
			fmt.Fprintf(&b, "  address6: %s\n", t.Address6)
		}
		if t.Cipher != "" {
			fmt.Fprintf(&b, "  cipher: %s\n", t.Cipher)
		}
		label := "connected"
		if t.Kind == KindServer {
			label = "up"
		}
		fmt.Fprintf(&b, "  %s since: %s (%s)\n", label, t.Since.Format(time.RFC3339), ago(t.Updated.Sub(t.Since)))
		fmt.Fprintf(&b, "  transfer: %s received, %s sent\n", byteCount(t.RxBytes), byteCount(t.TxBytes))
		cs, ok := []service.Counter(nil), false
		if counters != nil {
			cs, ok = counters(t)
		}
		if !ok {
			cs = statusCounters(t)
		}
		for _, l := range service.CounterLines(cs) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
		if t.Kind == KindServer {
			fmt.Fprintf(&b, "  clients: %d\n", len(t.Clients))
		}
		for _, c := range t.Clients {
			fmt.Fprintf(&b, "\n  client: %s\n", c.CommonName)
			fmt.Fprintf(&b, "    endpoint: %s\n", c.Remote)
			fmt.Fprintf(&b, "    address: %s, peer-id %d, %s\n", c.Address, c.PeerID, c.Cipher)
			if c.Address6 != "" {
				fmt.Fprintf(&b, "    address6: %s\n", c.Address6)
			}
			fmt.Fprintf(&b, "    connected since: %s (%s)\n", c.Since.Format(time.RFC3339), ago(t.Updated.Sub(c.Since)))
			fmt.Fprintf(&b, "    transfer: %s received, %s sent\n", byteCount(c.RxBytes), byteCount(c.TxBytes))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ago formats a duration as whole seconds, minutes and hours.
func ago(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	return d.String()
}

// byteCount formats n with binary units, as `wg show` does.
func byteCount(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, units := float64(n)/unit, []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// statusCounters are the counters a status file holds, as the service
// names them (service.OVPNClientCounters, OVPNServerCounters), for
// service.CounterLines.
func statusCounters(t TunnelStatus) []service.Counter {
	drop := func(reason string, v uint64) service.Counter {
		return service.Counter{Name: "wirelane_openvpn_dropped_packets_total", Labels: map[string]string{"reason": reason}, Value: float64(v)}
	}
	cs := []service.Counter{drop("bad_control", t.DroppedControl), drop("bad_data", t.DroppedData),
		drop("compressed", t.DroppedCompressed), drop("decompress_failed", t.DecompressFailed),
		{Name: "wirelane_tun_errors_total", Value: float64(t.TUNErrors)},
		{Name: "wirelane_socket_errors_total", Labels: map[string]string{"op": "send"}, Value: float64(t.SocketSendErrors)}}
	for r, n := range t.HandshakesFailed {
		cs = append(cs, service.Counter{Name: "wirelane_openvpn_handshakes_rejected_total", Labels: map[string]string{"reason": r}, Value: float64(n)})
	}
	return cs
}
