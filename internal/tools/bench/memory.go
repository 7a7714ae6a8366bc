package bench

// Memory per peer: a device that is up (real bind, no traffic) is given
// cfg.Peers peers in one UAPI set, each with an endpoint and one allowed IP.
// The cost is the growth of the live heap (after two forced collections)
// and of goroutine stacks, divided by the number of peers.

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

func memoryEngines(cfg Config) []string {
	var out []string
	for _, e := range cfg.Engines {
		if e != EngineWirelaneRef { // same peer structures as wirelane
			out = append(out, e)
		}
	}
	return out
}

// liveMemory returns the live heap and the goroutine stack memory after
// two collections.
func liveMemory() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// peersConfig is the UAPI text adding one peer per public key.
func peersConfig(pubs [][]byte) string {
	var b strings.Builder
	for i, pub := range pubs {
		fmt.Fprintf(&b, "public_key=%x\nendpoint=127.0.0.1:%d\nallowed_ip=10.%d.%d.%d/32\n",
			pub, 20000+i%40000, 100+i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return b.String()
}

// measurePeerMemory returns heap and heap+stack bytes per peer for eng.
func measurePeerMemory(eng engine, text string, peers int) (heapPer, totalPer float64, err error) {
	k, err := newKeyPair()
	if err != nil {
		return 0, 0, err
	}
	t := newGenTUN("wlbench-mem", inprocMTU, nil, nil)
	d, err := eng.make(t, k.priv)
	if err != nil {
		return 0, 0, err
	}
	defer d.Close()
	time.Sleep(50 * time.Millisecond) // let the device's workers start
	h0, s0 := liveMemory()
	if err := d.IpcSet(text); err != nil {
		return 0, 0, fmt.Errorf("%s: add %d peers: %w", eng.name, peers, err)
	}
	time.Sleep(100 * time.Millisecond) // let per-peer goroutines start
	h1, s1 := liveMemory()
	runtime.KeepAlive(d)
	heapPer = (float64(h1) - float64(h0)) / float64(peers)
	totalPer = (float64(h1+s1) - float64(h0+s0)) / float64(peers)
	return heapPer, totalPer, nil
}

// memorySection measures every engine once (the figure barely varies).
func memorySection(r *Report, cfg Config, p *progress) error {
	pubs := make([][]byte, cfg.Peers)
	for i := range pubs {
		k, err := newKeyPair()
		if err != nil {
			return err
		}
		pubs[i] = k.pub
	}
	text := peersConfig(pubs)
	for _, name := range memoryEngines(cfg) {
		p.step(fmt.Sprintf("memory %s, %d peers", name, cfg.Peers))
		eng, err := engineByName(name)
		if err != nil {
			return err
		}
		heapPer, totalPer, err := measurePeerMemory(eng, text, cfg.Peers)
		if err != nil {
			return err
		}
		r.Add(SectionMemory, CasePeers, MetricHeapPerPeer, name, LowerIsBetter, heapPer)
		r.Add(SectionMemory, CasePeers, MetricTotalPerPeer, name, LowerIsBetter, totalPer)
	}
	r.Note("memory: %d peers added in one UAPI set to a device that is up, each with an endpoint and one /32", cfg.Peers)
	return nil
}
