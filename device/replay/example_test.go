package replay_test

import (
	"fmt"

	"github.com/wirelane/wirelane/device/replay"
)

func ExampleFilter() {
	// WireGuard's RejectAfterMessages.
	const limit = 1<<64 - 1<<13 - 1

	var f replay.Filter
	for _, c := range []uint64{0, 2, 1, 2, 10000, 1000, 5000} {
		fmt.Println(c, f.Validate(c, limit))
	}
	// Output:
	// 0 true
	// 2 true
	// 1 true
	// 2 false
	// 10000 true
	// 1000 false
	// 5000 true
}
