package bench

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestPeersDebug(t *testing.T) {
	cfg := QuickConfig()
	cfg.Duration = 3 * time.Second
	cfg.Warmup = 300 * time.Millisecond
	n, _ := strconv.Atoi(os.Getenv("BP_N"))
	engs := []string{EngineWireguardGo, EngineWirelane}
	if e := os.Getenv("BP_ENG"); e != "" {
		engs = []string{e}
	}
	for _, name := range engs {
		eng, _ := engineByName(name)
		res, err := runPeers(eng, n, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.3f Gbit/s cpu %.2f fair %.3f loss %.2f allocs %.3f wo %d stray %d silent %d", name, res.gbps(), res.cpuPerGB(), res.fairness, res.lossPct(), res.allocsPerPacket(), res.writeOffs, res.stray, res.silent)
	}
}
