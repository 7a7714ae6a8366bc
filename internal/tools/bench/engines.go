package bench

// The engines under test, behind one small interface so that every
// measurement drives them through identical code: a device built on a TUN,
// configured through its UAPI text interface, and closed.

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/sys/refmode"
)

// Engine names as they appear in reports.
const (
	EngineWireguardGo = "wireguard-go"
	EngineWirelane    = "wirelane"
	EngineWirelaneRef = "wirelane-ref"
	EngineVeth        = "veth"
	EngineXCrypto     = "x/crypto"
)

// uapiDevice is what both engines' devices offer: a UAPI text conversation
// and Close.
type uapiDevice interface {
	IpcSet(text string) error
	IpcGet() (string, error)
	Close()
}

// wirelaneDevice gives Wirelane's device the text conversation wireguard-go's
// offers, through the UAPI package that speaks it.
type wirelaneDevice struct{ *device.Device }

// IpcSet applies one set operation given as text.
func (d wirelaneDevice) IpcSet(text string) error { return uapi.SetText(d.Device, text) }

// IpcGet returns the answer to a get operation.
func (d wirelaneDevice) IpcGet() (string, error) { return uapi.GetText(d.Device) }

// engine builds a device of one implementation on an in-memory TUN with a
// real UDP bind.
type engine struct {
	name string
	// make returns a device that is up, has privateKey and listens on a
	// random port.
	make func(t *genTUN, privateKey []byte) (uapiDevice, error)
}

// wirelaneEngine is Wirelane's device on conn.NewStdBind, with the lock-free
// send path or (ref) the conventional locked one, which the harness asks for
// through internal/sys/refmode while it creates the device.
func wirelaneEngine(ref bool) engine {
	name := EngineWirelane
	if ref {
		name = EngineWirelaneRef
	}
	return engine{name: name, make: func(t *genTUN, key []byte) (uapiDevice, error) {
		was := refmode.Set(ref)
		d := wirelaneDevice{device.NewDevice(t, conn.NewStdBind(), device.Options{})}
		refmode.Set(was)
		if err := d.IpcSet("private_key=" + hex.EncodeToString(key) + "\nlisten_port=0\n"); err != nil {
			d.Close()
			return nil, fmt.Errorf("%s: set private key: %w", name, err)
		}
		if err := d.Up(); err != nil {
			d.Close()
			return nil, fmt.Errorf("%s: up: %w", name, err)
		}
		return d, nil
	}}
}

// wireguardGoEngine is golang.zx2c4.com/wireguard/device on its default bind.
func wireguardGoEngine() engine {
	return engine{name: EngineWireguardGo, make: func(t *genTUN, key []byte) (uapiDevice, error) {
		d := wgdevice.NewDevice(t, wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
		if err := d.IpcSet("private_key=" + hex.EncodeToString(key) + "\nlisten_port=0\n"); err != nil {
			d.Close()
			return nil, fmt.Errorf("%s: set private key: %w", EngineWireguardGo, err)
		}
		if err := d.Up(); err != nil {
			d.Close()
			return nil, fmt.Errorf("%s: up: %w", EngineWireguardGo, err)
		}
		return d, nil
	}}
}

// engineByName returns the in-process engine called name.
func engineByName(name string) (engine, error) {
	switch name {
	case EngineWireguardGo:
		return wireguardGoEngine(), nil
	case EngineWirelane:
		return wirelaneEngine(false), nil
	case EngineWirelaneRef:
		return wirelaneEngine(true), nil
	}
	return engine{}, fmt.Errorf("unknown engine %q", name)
}

// keyPair is an X25519 key pair in WireGuard's raw form.
type keyPair struct {
	priv, pub []byte
}

// newKeyPair returns a fresh random key pair.
func newKeyPair() (keyPair, error) {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{priv: k.Bytes(), pub: k.PublicKey().Bytes()}, nil
}

// listenPort asks d for the port it is bound to.
func listenPort(d uapiDevice) (uint16, error) {
	text, err := d.IpcGet()
	if err != nil {
		return 0, err
	}
	return parseListenPort(text)
}

// parseListenPort finds listen_port in a UAPI get answer.
func parseListenPort(text string) (uint16, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || k != "listen_port" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("uapi answer line %d: listen_port %q: %w", line, v, err)
		}
		if n == 0 {
			return 0, fmt.Errorf("uapi answer line %d: listen_port is 0 (not bound)", line)
		}
		return uint16(n), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("uapi answer: %w", err)
	}
	return 0, fmt.Errorf("uapi answer has no listen_port line")
}
