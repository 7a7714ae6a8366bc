package device

import (
	"errors"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/allowedips"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/internal/sys/refmode"
	"github.com/wirelane/wirelane/tun"
)

// Options configures a Device.
type Options struct {
	// Logger receives diagnostics; nil discards them. Key material is never
	// logged.
	Logger *slog.Logger
}

// identity is the device's private key and what is derived from it. It is
// replaced as a whole, never modified.
type identity struct {
	local   *noise.Local
	checker *noise.CookieChecker
}

// Device is a WireGuard interface: one private key, one UDP bind, one TUN
// device and any number of peers.
type Device struct {
	log   *slog.Logger
	clock clock     // the source of time of every timer; immutable
	epoch time.Time // the clock's time at creation, which stamps count from; immutable
	// refMode: this device sends on the locked ref path (refmode.go), as
	// internal/sys/refmode said when it was created; immutable.
	refMode bool
	tun     tun.Device
	bind    conn.Bind
	tm      timing // read-only after Up (tests shorten it before)
	// inlineCrypto is the largest batch sealed or opened by the goroutine
	// that built it rather than by a crypto worker (send.go).
	inlineCrypto atomic.Int32
	// cryptoWorkers is how many crypto workers the device started; immutable.
	cryptoWorkers int
	// tunMerges: the TUN device merges written packets of one flow (a
	// Linux TUN device, which has a file); immutable.
	tunMerges bool

	// rcu is the grace-period domain of every goroutine that sends on the
	// bind: one Reader per peer sender plus ctrlReader. It is the bind's own
	// domain when the bind has one (conn.StdBind), so that one kind of grace
	// period covers the device's read sections and the bind's.
	rcu        *conn.RCU
	ctrlMu     sync.Mutex   // serialises handshake sends, which share ctrlReader
	ctrlReader *conn.Reader // guarded by ctrlMu

	// cfgMu serialises configuration: Up, Down, Close, Configure.
	cfgMu      sync.Mutex
	up         atomic.Bool // written under cfgMu
	listenPort uint16      // configured port (0 = random); guarded by cfgMu
	boundPort  atomic.Uint32
	fwmark     uint32         // guarded by cfgMu
	recvWG     sync.WaitGroup // receive goroutines of the open bind

	// mu guards peers and peerList; ref-mode senders read-lock it per batch.
	mu       sync.RWMutex
	peers    map[noise.PublicKey]*peer // guarded by mu
	peerList []*peer                   // guarded by mu; creation order for WriteStatus

	ident atomic.Pointer[identity] // nil when there is no private key

	// allowedMu guards allowed; the data path read-locks it once per batch.
	allowedMu sync.RWMutex
	allowed   allowedips.Table[*peer]

	indices *indexTable
	pool    *pools
	mtu     atomic.Int64 // written under mtuMu
	mtuMu   sync.Mutex   // serialises refreshMTU

	work       chan *batch     // batches to seal or open, for the crypto workers
	handshakes chan *hsMessage // handshake messages, for the handshake workers
	// hsPriority holds, under load, the messages whose mac2 the receive
	// path verified; the handshake workers take them first.
	hsPriority chan *hsMessage
	hsFree     chan *hsMessage // free handshake messages (receive.go: getHSMessage)
	hsMade     atomic.Int32    // handshake messages allocated, at most cap(hsFree)
	quit       chan struct{}   // closed by Close after peers and readers stopped
	workersWG  sync.WaitGroup

	underLoadUntil atomic.Int64 // a stamp (Device.stamp)
	forceUnderLoad atomic.Bool  // test hook
	stamps         stampState   // receive timestamps while under load (stale.go)
	limiter        *rateLimiter
	// cookieRepliesSent counts cookie replies sent (for tests and stats).
	cookieRepliesSent atomic.Uint64
	// cookieRepliesReceived counts cookie replies accepted from peers.
	cookieRepliesReceived atomic.Uint64
	// ctr holds the device's other counters (counters.go).
	ctr counters

	removeSourceHook func() // unregisters clearAllSources from the bind; nil when none

	tunDone   chan struct{} // closed when the TUN reader has exited
	closeOnce sync.Once
	closed    chan struct{} // closed once Close has finished
	closing   atomic.Bool
}

// NewDevice returns a device that reads from t and sends on b. It starts the
// workers and the TUN reader; call Up to open the bind.
func NewDevice(t tun.Device, b conn.Bind, opts Options) *Device {
	return newDevice(t, b, opts, realClock{}, refmode.Enabled())
}

// newDevice is NewDevice with the device's clock (nil: real time) and send
// path chosen by the caller: tests drive time with a fake clock and take
// either path.
func newDevice(t tun.Device, b conn.Bind, opts Options, clk clock, refMode bool) *Device {
	d := &Device{
		log:        opts.Logger,
		clock:      clk,
		refMode:    refMode,
		tun:        t,
		bind:       b,
		tm:         defaultTiming(),
		peers:      make(map[noise.PublicKey]*peer),
		indices:    newIndexTable(),
		work:       make(chan *batch, 1024),
		handshakes: make(chan *hsMessage, HandshakeQueueSize),
		hsPriority: make(chan *hsMessage, HandshakePriorityQueueSize),
		hsFree:     make(chan *hsMessage, hsFreeSize()),
		quit:       make(chan struct{}),
		limiter:    newRateLimiter(),
		tunDone:    make(chan struct{}),
		closed:     make(chan struct{}),
	}
	d.tunMerges = t.File() != nil
	d.inlineCrypto.Store(defaultInlineCrypto())
	d.stamps.ts, _ = b.(conn.Timestamper)
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	applySoakTimers(d) // a no-op unless built for the rekey soak (soaktimers.go)
	if d.clock == nil {
		d.clock = realClock{}
	}
	d.epoch = d.clock.Now()
	if rb, ok := b.(interface{ RCU() *conn.RCU }); ok && rb.RCU() != nil {
		d.rcu = rb.RCU()
	} else {
		d.rcu = new(conn.RCU)
	}
	d.ctrlReader = d.rcu.NewReader()
	if sb, ok := b.(interface {
		OnSourceInvalid(func()) (remove func())
	}); ok {
		// A local address or route changed: every sticky source may be
		// stale. One route rebuild per peer per event.
		d.removeSourceHook = sb.OnSourceInvalid(d.clearAllSources)
	}
	mtu, err := t.MTU()
	if err != nil || mtu <= 0 {
		mtu = 1420
	}
	d.mtu.Store(int64(mtu))
	d.pool = newPools(mtu)
	// Crypto workers as the process's plan says (internal/sys/procs: one
	// per thread running Go code); handshake workers one per CPU.
	d.cryptoWorkers = procs.Current().CryptoWorkers
	for i := 0; i < d.cryptoWorkers; i++ {
		d.workersWG.Add(1)
		go d.runCryptoWorker()
	}
	for i := 0; i < runtime.NumCPU(); i++ {
		d.workersWG.Add(1)
		go d.runHandshakeWorker()
	}
	go d.runTUNReader()
	go d.runTUNEvents()
	return d
}

// Up opens the bind on the configured port and starts the peers. It is a
// no-op on a device that is already up.
func (d *Device) Up() error {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	if d.closing.Load() {
		return ErrClosed
	}
	if d.up.Load() {
		return nil
	}
	if err := d.openBindLocked(d.listenPort); err != nil {
		return err
	}
	d.up.Store(true)
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	for _, p := range peers {
		p.start()
	}
	for _, p := range peers {
		if p.persistentKeepalive.Load() > 0 {
			p.sendKeepalive()
		}
	}
	return nil
}

// Down stops the peers and closes the bind. Sessions are kept.
func (d *Device) Down() error {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	return d.downLocked()
}

func (d *Device) downLocked() error {
	if !d.up.Load() {
		return nil
	}
	d.up.Store(false)
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	for _, p := range peers {
		p.stop()
	}
	d.syncSenders()
	return d.closeBindLocked()
}

// openBindLocked opens the bind and starts one receive goroutine per
// ReceiveFunc. cfgMu must be held.
func (d *Device) openBindLocked(port uint16) error {
	if v, ok := d.bind.(conn.ViewReceiver); ok {
		// runReceive restores its landing buffers before every read and
		// is done with a datagram (opened, or copied into a packet) before
		// the next: segments of a GRO train can stay where they landed.
		v.AllowViews(true)
	}
	var fns []conn.StampedReceiveFunc
	var actual uint16
	var err error
	if ts := d.stamps.ts; ts != nil {
		// Receive timestamps, turned on under load (stale.go).
		fns, actual, err = ts.OpenStamped(port)
	} else {
		var plain []conn.ReceiveFunc
		plain, actual, err = d.bind.Open(port)
		for _, fn := range plain {
			fns = append(fns, func(bufs [][]byte, sizes []int, eps []conn.Endpoint, _ []int64) (int, error) {
				return fn(bufs, sizes, eps)
			})
		}
	}
	if err != nil {
		return err
	}
	if d.fwmark != 0 {
		if err := d.bind.SetMark(d.fwmark); err != nil {
			d.bind.Close()
			return err
		}
	}
	d.boundPort.Store(uint32(actual))
	for _, fn := range fns {
		d.recvWG.Add(1)
		go d.runReceive(fn)
	}
	return nil
}

// closeBindLocked closes the bind and waits for its receive goroutines.
func (d *Device) closeBindLocked() error {
	err := d.bind.Close()
	d.recvWG.Wait()
	d.resetStamps()
	d.boundPort.Store(0)
	return err
}

// Close shuts the device down: peers, bind, TUN device and workers. It is
// idempotent and safe to call from any goroutine.
func (d *Device) Close() {
	d.closeOnce.Do(func() {
		d.closing.Store(true)
		d.cfgMu.Lock()
		d.downLocked()
		d.cfgMu.Unlock()
		d.tun.Close()
		<-d.tunDone
		close(d.quit)
		d.workersWG.Wait()
		d.mu.Lock()
		peers := d.peerList
		d.peers = make(map[noise.PublicKey]*peer)
		d.peerList = nil
		d.mu.Unlock()
		for _, p := range peers {
			p.zeroKeys()
		}
		if d.removeSourceHook != nil {
			d.removeSourceHook()
		}
		d.ctrlReader.Release()
		close(d.closed)
	})
}

// Wait returns a channel closed once the device is closed, including when
// the TUN device goes away.
func (d *Device) Wait() <-chan struct{} { return d.closed }

// isClosedErr reports whether err means a socket or device was closed.
func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, errClosedTUN)
}

var errClosedTUN = errors.New("device: tun closed")

// runTUNEvents follows MTU changes and notices the TUN device going away.
func (d *Device) runTUNEvents() {
	for ev := range d.tun.Events() {
		if ev&tun.EventMTUUpdate != 0 {
			d.refreshMTU()
		}
	}
}

// refreshMTU asks the TUN device for its MTU and resizes new buffers when
// it changed. It is called on MTU events and when a packet read from the
// TUN device did not fit, which happens when the MTU grows during a read.
func (d *Device) refreshMTU() {
	d.mtuMu.Lock()
	defer d.mtuMu.Unlock()
	if mtu, err := d.tun.MTU(); err == nil && mtu > 0 && int64(mtu) != d.mtu.Load() {
		d.log.Info("MTU changed", "mtu", mtu)
		d.mtu.Store(int64(mtu))
		d.pool.setMTU(mtu)
	}
}

// underLoad reports whether handshakes must carry a valid mac2: the queue
// has been at least UnderLoadQueueSize long within UnderLoadAfterTime, or a
// receive goroutine saw handshake messages arrive faster than
// UnderLoadQueueSize per UnderLoadWindow (see hsRate).
func (d *Device) underLoad() bool { return d.underLoadAt(d.clock.Now(), nil) }

// hsRate is one receive goroutine's count of handshake messages in the
// current window; it belongs to that goroutine.
type hsRate struct {
	start time.Time
	count int
}

// underLoadAt is underLoad at now; r, when not nil, is the calling receive
// goroutine's arrival count, which puts the device under load when it
// reaches UnderLoadQueueSize within one UnderLoadWindow. (Under load the
// receive path answers cookies itself and the queue no longer fills, so
// the queue alone would let a flood go in and out of "under load".)
func (d *Device) underLoadAt(now time.Time, r *hsRate) bool {
	ns := d.stamp(now)
	if r != nil {
		if now.Sub(r.start) > UnderLoadWindow {
			r.start, r.count = now, 0
		} else if r.count >= UnderLoadQueueSize {
			d.underLoadUntil.Store(ns + int64(UnderLoadAfterTime))
			return true
		}
	}
	if len(d.handshakes) >= UnderLoadQueueSize || d.forceUnderLoad.Load() {
		d.underLoadUntil.Store(ns + int64(UnderLoadAfterTime))
		return true
	}
	return ns < d.underLoadUntil.Load()
}

// clearAllSources forgets every peer's sticky source.
func (d *Device) clearAllSources() {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, p := range d.peerList {
		p.clearEndpointSrc()
	}
}

// lookupPeer returns the peer with public key pk.
func (d *Device) lookupPeer(pk noise.PublicKey) *peer {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.peers[pk]
}

// stamp returns now as an integer for the atomics that remember when
// something happened: nanoseconds since the device was created, above 0.
// It counts on the monotonic clock (time.Now's times carry its reading),
// so a step of the wall clock (NTP, a resumed virtual machine) moves no
// interval; a stamp of the wall clock stepped back an hour would hold off
// handshake initiations for that hour.
func (d *Device) stamp(now time.Time) int64 { return int64(now.Sub(d.epoch)) + 1 }
