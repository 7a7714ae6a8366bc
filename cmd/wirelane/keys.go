package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const genkeyHelp = `Prints a new random Curve25519 private key in base64, as 'wg genkey' does.
Example: wirelane genkey | tee private.key | wirelane pubkey > public.key`

const pubkeyHelp = `Reads a base64 private key on standard input and prints its public key,
as 'wg pubkey' does.`

const genpskHelp = `Prints a new random preshared key in base64, as 'wg genpsk' does.`

func cmdGenkey(args []string) int { return genCmd("genkey", args, wgquick.GeneratePrivateKey) }
func cmdGenpsk(args []string) int { return genCmd("genpsk", args, wgquick.GeneratePresharedKey) }

func genCmd(name string, args []string, gen func() (wgquick.Key, error)) int {
	if _, st := parseFlags(flag.NewFlagSet(name, flag.ContinueOnError), name, args, 0, 0); st >= 0 {
		return st
	}
	warnWorldAccessible(os.Stdout)
	k, err := gen()
	if err != nil {
		return fail(fmt.Errorf("unable to generate random bytes: %w", err))
	}
	if _, err := fmt.Fprintln(os.Stdout, k.String()); err != nil {
		return fail(err)
	}
	return 0
}

// warnWorldAccessible warns, as wg does, when a key is about to be written
// to a regular file that others can read.
func warnWorldAccessible(f *os.File) {
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o007 != 0 {
		fmt.Fprintln(os.Stderr, "Warning: writing to world accessible file.\nConsider setting the umask to 077 and trying again.")
	}
}

func cmdPubkey(args []string) int {
	if _, st := parseFlags(flag.NewFlagSet("pubkey", flag.ContinueOnError), "pubkey", args, 0, 0); st >= 0 {
		return st
	}
	pub, err := pubkey(os.Stdin)
	if err != nil {
		return fail(err)
	}
	fmt.Println(pub)
	return 0
}

// pubkey reads what `wg pubkey` reads: exactly 44 key characters, then
// nothing but white space or NUL bytes until the end of input.
func pubkey(r io.Reader) (string, error) {
	br := bufio.NewReader(r)
	var text [44]byte
	if _, err := io.ReadFull(br, text[:]); err != nil {
		return "", wgquick.ErrBadKey
	}
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		switch c {
		case 0, ' ', '\t', '\n', '\v', '\f', '\r':
			continue
		}
		return "", fmt.Errorf("Trailing characters found after key")
	}
	k, err := wgquick.ParseKey(string(text[:]))
	if err != nil {
		return "", err
	}
	return k.PublicKey().String(), nil
}
