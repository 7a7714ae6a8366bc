package bench

// Handshakes per second per core. wireguard-go's Noise functions are only
// reachable as methods of its Device, so both engines are timed at the same
// level: one goroutine runs complete handshakes (initiation created and
// consumed, response created and consumed, both sessions derived) through
// each engine's own API, with no network, no MACs and no timers.
//
//	initiator i (of K)  --initiation-->  responder (K peers)
//	                    <--response----
//	both sides derive transport keys
//
// A peer accepts one initiation per 20 ms and only with a newer timestamp
// (timestamps have a 2^24 ns grain), so the K initiators take turns; a round
// of K handshakes that finishes in under 25 ms waits the rest untimed.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"

	"github.com/wirelane/wirelane/device/noise"
)

// handshakePeers is K, the number of initiators that take turns.
const handshakePeers = 256

// handshakeRound is the least time between two initiations from one peer.
const handshakeRound = 25 * time.Millisecond

// handshaker runs full handshakes; do(i) runs one with initiator i.
type handshaker struct {
	k     int
	do    func(i int) error
	close func()
}

func handshakeEngines(cfg Config) []string {
	var out []string
	for _, e := range cfg.Engines {
		if e != EngineWirelaneRef { // RefMode does not touch the handshake
			out = append(out, e)
		}
	}
	return out
}

// timeHandshakes runs n handshakes round-robin over h's initiators and
// returns the rate, excluding the pauses that keep each peer under its
// initiation rate limit.
func timeHandshakes(h handshaker, n int) (float64, error) {
	var busy time.Duration
	roundStart := time.Now()
	start := roundStart
	for j := 0; j < n; j++ {
		i := j % h.k
		if i == 0 && j > 0 {
			busy += time.Since(start)
			if d := handshakeRound - time.Since(roundStart); d > 0 {
				time.Sleep(d)
			}
			roundStart = time.Now()
			start = roundStart
		}
		if err := h.do(i); err != nil {
			return 0, fmt.Errorf("handshake %d (initiator %d): %w", j, i, err)
		}
	}
	busy += time.Since(start)
	return float64(n) / busy.Seconds(), nil
}

// wirelaneHandshaker drives device/noise directly, with a map standing in
// for the device's index table.
func wirelaneHandshaker(k int) (handshaker, error) {
	resp, err := noise.GeneratePrivateKey()
	if err != nil {
		return handshaker{}, err
	}
	respLocal := noise.NewLocal(resp)
	respPub := resp.PublicKey()
	var psk noise.PresharedKey
	byKey := make(map[noise.PublicKey]*noise.Handshake, k)
	locals := make([]*noise.Local, k)
	inits := make([]*noise.Handshake, k)
	for i := range k {
		priv, err := noise.GeneratePrivateKey()
		if err != nil {
			return handshaker{}, err
		}
		locals[i] = noise.NewLocal(priv)
		inits[i] = noise.NewHandshake(locals[i], respPub, psk)
		byKey[priv.PublicKey()] = noise.NewHandshake(respLocal, priv.PublicKey(), psk)
	}
	byIndex := make(map[uint32]*noise.Handshake)
	var next uint32
	do := func(i int) error {
		now := time.Now()
		next++
		ii := next
		m1, err := inits[i].CreateInitiation(ii, now)
		if err != nil {
			return err
		}
		byIndex[ii] = inits[i]
		h, err := noise.ConsumeInitiation(respLocal, &m1, now, func(pk noise.PublicKey) *noise.Handshake { return byKey[pk] })
		if err != nil {
			return err
		}
		next++
		m2, err := h.CreateResponse(next)
		if err != nil {
			return err
		}
		if _, err := h.DeriveSession(now); err != nil {
			return err
		}
		hi, err := noise.ConsumeResponse(locals[i], &m2, func(idx uint32) *noise.Handshake { return byIndex[idx] })
		if err != nil {
			return err
		}
		delete(byIndex, ii)
		_, err = hi.DeriveSession(now)
		return err
	}
	return handshaker{k: k, do: do, close: func() {}}, nil
}

// wireguardGoHandshaker drives wireguard-go's exported handshake methods on
// K initiator devices (down) and one responder device (up, on a real
// bind that carries nothing).
func wireguardGoHandshaker(k int) (handshaker, error) {
	newDev := func() *wgdevice.Device {
		return wgdevice.NewDevice(newGenTUN("wlbench-hs", inprocMTU, nil, nil), wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	}
	var devs []*wgdevice.Device
	closeAll := func() {
		for _, d := range devs {
			d.Close()
		}
	}
	respKey, err := newKeyPair()
	if err != nil {
		return handshaker{}, err
	}
	resp := newDev()
	devs = append(devs, resp)
	var cfg strings.Builder
	cfg.WriteString("private_key=" + hex.EncodeToString(respKey.priv) + "\nlisten_port=0\n")
	inits := make([]*wgdevice.Device, k)
	peers := make([]*wgdevice.Peer, k)
	for i := range k {
		kp, err := newKeyPair()
		if err != nil {
			closeAll()
			return handshaker{}, err
		}
		fmt.Fprintf(&cfg, "public_key=%x\n", kp.pub)
		inits[i] = newDev()
		devs = append(devs, inits[i])
		if err := inits[i].IpcSet(fmt.Sprintf("private_key=%x\npublic_key=%x\n", kp.priv, respKey.pub)); err != nil {
			closeAll()
			return handshaker{}, fmt.Errorf("wireguard-go initiator: %w", err)
		}
		var pk wgdevice.NoisePublicKey
		copy(pk[:], respKey.pub)
		if peers[i] = inits[i].LookupPeer(pk); peers[i] == nil {
			closeAll()
			return handshaker{}, errors.New("wireguard-go initiator has no peer after UAPI set")
		}
	}
	if err := resp.IpcSet(cfg.String()); err != nil {
		closeAll()
		return handshaker{}, fmt.Errorf("wireguard-go responder: %w", err)
	}
	// The responder only answers peers that are running, which they are
	// once the device is up. Its peers have no endpoint: nothing is sent.
	if err := resp.Up(); err != nil {
		closeAll()
		return handshaker{}, fmt.Errorf("wireguard-go responder: up: %w", err)
	}
	do := func(i int) error {
		m1, err := inits[i].CreateMessageInitiation(peers[i])
		if err != nil {
			return err
		}
		p := resp.ConsumeMessageInitiation(m1)
		if p == nil {
			return errors.New("wireguard-go responder rejected the initiation")
		}
		m2, err := resp.CreateMessageResponse(p)
		if err != nil {
			return err
		}
		if err := p.BeginSymmetricSession(); err != nil {
			return err
		}
		if q := inits[i].ConsumeMessageResponse(m2); q == nil {
			return errors.New("wireguard-go initiator rejected the response")
		}
		return peers[i].BeginSymmetricSession()
	}
	return handshaker{k: k, do: do, close: closeAll}, nil
}

// handshakeSection times cfg.Handshakes handshakes per engine and repeat.
func handshakeSection(r *Report, cfg Config, p *progress) error {
	k := min(handshakePeers, cfg.Handshakes)
	engines := handshakeEngines(cfg)
	for rep := 0; rep < cfg.Repeats; rep++ {
		for i := range engines {
			name := engines[(i+rep)%len(engines)]
			p.step(fmt.Sprintf("handshake %s, repeat %d/%d", name, rep+1, cfg.Repeats))
			var h handshaker
			var err error
			switch name {
			case EngineWirelane:
				h, err = wirelaneHandshaker(k)
			case EngineWireguardGo:
				h, err = wireguardGoHandshaker(k)
			default:
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: set up: %w", name, err)
			}
			rate, err := timeHandshakes(h, cfg.Handshakes)
			h.close()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			r.Add(SectionHandshake, CaseHandshake, MetricHandshakes, name, HigherIsBetter, rate)
		}
	}
	return nil
}
