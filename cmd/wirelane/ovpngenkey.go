package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wirelane/wirelane/ovpn/wrap"
)

const ovpnGenkeyUsage = `Usage: wirelane ovpn genkey [flags] TYPE [FILE]

Writes a new OpenVPN key to FILE (created with mode 0600; it must not
exist) or to standard output, in the format of 'openvpn --genkey TYPE', so
openvpn and Wirelane read each other's keys. TYPE is one of:
  tls-crypt-v2-server   the server key that wraps every client's key
  tls-crypt-v2-client   a client's own key, wrapped by --server-key; its
                        metadata is --metadata (base64, as openvpn's) or,
                        without it, the time of generation
  tls-crypt             a static key for tls-crypt or tls-auth
Example:
  wirelane ovpn genkey tls-crypt-v2-server /etc/wirelane/openvpn-server/v2.key
  wirelane ovpn genkey --server-key /etc/wirelane/openvpn-server/v2.key \
      --metadata "$(printf alice | base64)" tls-crypt-v2-client alice.key
A server's tls-crypt-v2-metadata-allow file lists the --metadata values it
accepts (docs/openvpn.md).`

// ovpnGenkeyFlags returns the flag set of `ovpn genkey`.
func ovpnGenkeyFlags() (fs *flag.FlagSet, serverKey, metadata *string) {
	fs = flag.NewFlagSet("wirelane ovpn genkey", flag.ContinueOnError)
	serverKey = fs.String("server-key", "", "tls-crypt-v2 server key `file` that wraps a tls-crypt-v2-client key")
	metadata = fs.String("metadata", "", "user metadata of a tls-crypt-v2-client key, `base64` (default: the time of generation)")
	return fs, serverKey, metadata
}

// ovpnGenkey runs `wirelane ovpn genkey`.
func ovpnGenkey(args []string) int {
	fs, serverKey, metadata := ovpnGenkeyFlags()
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				ovpnPrintUsage(os.Stdout, ovpnGenkeyUsage, fs)
				return 0
			}
			fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
			ovpnPrintUsage(os.Stderr, ovpnGenkeyUsage, fs)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) < 1 || len(pos) > 2 {
		fmt.Fprintf(os.Stderr, "%s: want TYPE and at most one FILE, got %d arguments\n", fs.Name(), len(pos))
		ovpnPrintUsage(os.Stderr, ovpnGenkeyUsage, fs)
		return 2
	}
	text, err := genOvpnKey(pos[0], *serverKey, *metadata)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	defer clear(text)
	if len(pos) == 1 {
		warnWorldAccessible(os.Stdout)
		if _, err := os.Stdout.Write(text); err != nil {
			return fail(err)
		}
		return 0
	}
	f, err := os.OpenFile(pos[1], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	return 0
}

// genOvpnKey returns a new key of kind in its file format.
func genOvpnKey(kind, serverKey, metadata string) ([]byte, error) {
	if kind != "tls-crypt-v2-client" && (serverKey != "" || metadata != "") {
		return nil, fmt.Errorf("--server-key and --metadata are for tls-crypt-v2-client keys")
	}
	switch kind {
	case "tls-crypt-v2-server":
		k, err := wrap.GenerateV2ServerKey()
		if err != nil {
			return nil, err
		}
		defer clear(k[:])
		return k.Format(), nil
	case "tls-crypt-v2-client":
		if serverKey == "" {
			return nil, fmt.Errorf("a tls-crypt-v2-client key needs --server-key FILE (the server key that wraps it)")
		}
		b, err := os.ReadFile(serverKey)
		if err != nil {
			return nil, err
		}
		sk, err := wrap.ParseV2ServerKey(b)
		clear(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", serverKey, err)
		}
		defer clear(sk[:])
		md := wrap.TimestampMetadata(time.Now())
		if metadata != "" {
			if md, err = wrap.UserMetadata(metadata); err != nil {
				return nil, fmt.Errorf("--metadata: %v", err)
			}
		}
		ck, err := sk.NewClientKey(md)
		if err != nil {
			return nil, err
		}
		defer clear(ck.Key[:])
		return ck.Format(), nil
	case "tls-crypt", "tls-auth", "secret":
		var k wrap.StaticKey
		if _, err := rand.Read(k[:]); err != nil {
			return nil, err
		}
		defer clear(k[:])
		return append([]byte("#\n# 2048 bit OpenVPN static key\n#\n"), k.Format()...), nil
	}
	return nil, fmt.Errorf("unknown key type %q (want tls-crypt-v2-server, tls-crypt-v2-client or tls-crypt)", kind)
}
