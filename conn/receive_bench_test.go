package conn

import "testing"

// BenchmarkReceive: batches of 64 datagrams of 1420 bytes over loopback,
// sent with one sendmmsg and read back with the ReceiveFunc (timestamps
// off, as on the data path outside a handshake flood): the cost of the
// receive path per datagram, for A/B runs of changes to it.
func BenchmarkReceive(b *testing.B) {
	a, _, _ := openBind(b, Options{DisableSourceWatch: true, DisableGSO: true, DisableGRO: true})
	_, fns, port := openBind(b, Options{DisableSourceWatch: true, DisableGRO: true})
	r := NewRoute(Endpoint{Dst: loop4(port)}, 1)
	out := makeBufs(64, 1420)
	bufs := makeBufs(IdealBatchSize, 2048)
	sizes := make([]int, IdealBatchSize)
	eps := make([]Endpoint, IdealBatchSize)
	b.SetBytes(64 * 1420)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(out, r); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := fns[0](bufs, sizes, eps)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
}
