package allowedips_test

import (
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/device/allowedips"
)

func ExampleTable() {
	type peer struct{ name string }
	alice, bob := &peer{"alice"}, &peer{"bob"}

	var routes allowedips.Table[*peer]
	routes.Insert(netip.MustParsePrefix("0.0.0.0/0"), alice)
	routes.Insert(netip.MustParsePrefix("10.0.0.0/24"), bob)
	routes.Insert(netip.MustParsePrefix("10.0.0.1/32"), alice)

	for _, a := range []string{"10.0.0.1", "10.0.0.2", "192.0.2.1", "2001:db8::1"} {
		if p, ok := routes.Lookup(netip.MustParseAddr(a)); ok {
			fmt.Println(a, "->", p.name)
		} else {
			fmt.Println(a, "-> no route")
		}
	}

	routes.RemoveValue(alice)
	fmt.Println("after removing alice:", routes.Len(), "prefix left")
	routes.Prefixes(bob, func(p netip.Prefix) bool {
		fmt.Println("bob owns", p)
		return true
	})
	// Output:
	// 10.0.0.1 -> alice
	// 10.0.0.2 -> bob
	// 192.0.2.1 -> alice
	// 2001:db8::1 -> no route
	// after removing alice: 1 prefix left
	// bob owns 10.0.0.0/24
}
