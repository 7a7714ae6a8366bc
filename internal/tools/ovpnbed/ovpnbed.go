// Package ovpnbed is the set-up shared by the two OpenVPN throughput
// comparisons, the ovpntunnel package's TestThroughputVsOpenVPN and the
// openvpn section of cmd/wirelane-bench: the four configuration files of
// Wirelane's and OpenVPN 2.6's client and server, the addresses they use
// and a throw-away certificate authority. Both run the same topology:
//
//	client namespace                         server namespace
//	  wlc0 10.9.0.2   <- wirelane connect     wlsrv0 10.9.0.1  <- wirelane serve
//	  ovc0 10.10.0.2  <- openvpn client       ovs0  10.10.0.1  <- openvpn server
//	  192.168.83.2  ===========veth===========  192.168.83.1
//
// Wirelane's TUN MTU is 1400 so that encapsulated packets fit the
// 1500-byte link unfragmented; OpenVPN keeps its defaults (tun-mtu 1500
// with mssfix, which clamps TCP to the same effect) and runs without the
// DCO kernel module.
package ovpnbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Addresses of the topology.
const (
	Net          = "192.168.83" // the veth link's /24
	ServerLink   = Net + ".1"
	WirelaneAddr = "10.9.0.1"  // Wirelane's server end of its tunnel
	OpenVPNAddr  = "10.10.0.1" // OpenVPN's server end of its tunnel
	WirelaneDev  = "wlc0"      // Wirelane's client TUN
	WirelaneMTU  = 1400        // Wirelane's client TUN MTU (connect --mtu)
)

// Configuration file names, in the working directory both sides run in.
const (
	WirelaneServerConf = "wl-server.conf"
	WirelaneClientConf = "wl-client.ovpn"
	OpenVPNServerConf  = "ov-server.conf"
	OpenVPNClientConf  = "ov-client.ovpn"
)

// ServerCreds are the server configuration lines naming the certificate
// files (Creds.Files writes them).
const ServerCreds = "ca ca.crt\ncert server.crt\nkey server.key\ndh none\n"

// Options choose the transport and the data cipher.
type Options struct {
	Proto  string // "udp" or "tcp"
	Cipher string // data-ciphers of all four ends; "" is AES-256-GCM
	Auth   string // the auth directive (HMAC of CBC ciphers); "" leaves it out
	// ClientInline is the client's <ca>, <cert> and <key> blocks
	// (Creds.ClientInline).
	ClientInline string
}

// Configs returns the four configuration files (name to content) for o.
// The servers name their certificates with ServerCreds.
func Configs(o Options) (map[string]string, error) {
	if o.Proto != "udp" && o.Proto != "tcp" {
		return nil, fmt.Errorf("proto %q: want udp or tcp", o.Proto)
	}
	ciph := o.Cipher
	if ciph == "" {
		ciph = "AES-256-GCM"
	}
	cipherLines := "data-ciphers " + ciph + "\n"
	if o.Auth != "" {
		cipherLines += "auth " + o.Auth + "\n"
	}
	creds := ServerCreds + cipherLines + "keepalive 10 60\n"
	ovServerProto := o.Proto + "4"
	if o.Proto == "tcp" {
		ovServerProto = "tcp4-server"
	}
	return map[string]string{
		WirelaneServerConf: fmt.Sprintf("port 1194\nproto %s4\ndev wlsrv0\ntun-mtu %d\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n", o.Proto, WirelaneMTU) + creds,
		WirelaneClientConf: "client\ndev tun\nremote " + ServerLink + " 1194 " + o.Proto + "\nnobind\nremote-cert-tls server\n" + cipherLines +
			o.ClientInline,
		OpenVPNServerConf: "port 1195\nproto " + ovServerProto + "\nlocal " + ServerLink + "\ndev ovs0\ndev-type tun\ntopology subnet\n" +
			"server 10.10.0.0 255.255.255.0\ndisable-dco\nverb 3\n" + creds,
		OpenVPNClientConf: "client\ndev ovc0\ndev-type tun\nremote " + ServerLink + " 1195 " + o.Proto + "4\nnobind\nremote-cert-tls server\n" +
			cipherLines + "disable-dco\nverb 3\n" + o.ClientInline,
	}, nil
}

// Creds are a throw-away CA and the server's and client's certificates
// and keys, as PEM.
type Creds struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey []byte
}

// Files returns the server's files ServerCreds names (name to content).
func (c Creds) Files() map[string]string {
	return map[string]string{"ca.crt": string(c.CA), "server.crt": string(c.ServerCert), "server.key": string(c.ServerKey)}
}

// ClientInline returns the client's CA, certificate and key as inline
// blocks of a client configuration.
func (c Creds) ClientInline() string {
	return "<ca>\n" + string(c.CA) + "</ca>\n<cert>\n" + string(c.ClientCert) + "</cert>\n<key>\n" + string(c.ClientKey) + "</key>\n"
}

// NewCreds creates a CA named ca, valid from an hour ago for a day, and
// issues a server certificate ("server", server auth) and a client
// certificate (common name client, client auth) with P-256 keys.
func NewCreds(ca, client string) (Creds, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Creds{}, err
	}
	from, until := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: ca},
		NotBefore: from, NotAfter: until, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Creds{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Creds{}, err
	}
	issue := func(serial int64, cn string, eku x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyAgreement,
			ExtKeyUsage: []x509.ExtKeyUsage{eku}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	c := Creds{CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	if c.ServerCert, c.ServerKey, err = issue(2, "server", x509.ExtKeyUsageServerAuth); err != nil {
		return Creds{}, err
	}
	if c.ClientCert, c.ClientKey, err = issue(3, client, x509.ExtKeyUsageClientAuth); err != nil {
		return Creds{}, err
	}
	return c, nil
}
