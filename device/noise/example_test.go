package noise_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/wirelane/wirelane/device/noise"
)

// A complete handshake between two endpoints, with the MACs a real packet
// carries, ending in transport keys that fit together.
func Example() {
	ka, _ := noise.GeneratePrivateKey()
	kb, _ := noise.GeneratePrivateKey()
	alice, bob := noise.NewLocal(ka), noise.NewLocal(kb)
	aliceToBob := noise.NewHandshake(alice, bob.PublicKey(), noise.PresharedKey{})
	bobToAlice := noise.NewHandshake(bob, alice.PublicKey(), noise.PresharedKey{})
	now := time.Now()

	// Alice: initiation, marshalled, with mac1.
	ini, _ := aliceToBob.CreateInitiation(1, now)
	packet := ini.MarshalTo(nil)
	noise.NewCookieGenerator(bob.PublicKey()).AddMACs(packet, now)

	// Bob: cheap mac1 check first, then the handshake.
	checker := noise.NewCookieChecker(bob)
	fmt.Println("mac1 valid:", checker.CheckMAC1(packet))
	var got noise.MessageInitiation
	_ = got.Unmarshal(packet)
	hs, err := noise.ConsumeInitiation(bob, &got, now, func(k noise.PublicKey) *noise.Handshake {
		if k == alice.PublicKey() {
			return bobToAlice
		}
		return nil
	})
	fmt.Println("initiation accepted:", err == nil)
	res, _ := hs.CreateResponse(2)
	bobSession, _ := hs.DeriveSession(now)

	// Alice: the response completes her side.
	hs, err = noise.ConsumeResponse(alice, &res, func(index uint32) *noise.Handshake {
		if index == 1 {
			return aliceToBob
		}
		return nil
	})
	fmt.Println("response accepted:", err == nil)
	aliceSession, _ := hs.DeriveSession(now)

	nonce := make([]byte, 12)
	sealed := aliceSession.Send.Seal(nil, nonce, []byte("hello"), nil)
	opened, err := bobSession.Receive.Open(nil, nonce, sealed, nil)
	fmt.Println("transport keys match:", err == nil && bytes.Equal(opened, []byte("hello")))
	// Output:
	// mac1 valid: true
	// initiation accepted: true
	// response accepted: true
	// transport keys match: true
}
