package main

// `wirelane events`: the service's event stream, one line per event, as
// text for people or (--json) as the service sends it.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const eventsHelp = `Prints the Wirelane service's events as they happen, one line each: first
every tunnel's state (the snapshot), then tunnels changing state (with the
reason, and the error of a failed one), tunnels added and removed, peers'
handshakes (established, expired) and endpoint changes, transfer (at most
once a second per tunnel while it changes), credential requests of OpenVPN
tunnels, and the service stopping. It runs until Ctrl-C or until the
service stops. Root and the members of the group wirelane may watch.

--json prints each event as the service sends it (one JSON object per
line; docs/api.md describes them).

WIRELANE_SOCKET=PATH names another service socket than
/run/wirelane/wirelane.sock.`

func cmdEvents(args []string) int {
	flags := flag.NewFlagSet("events", flag.ContinueOnError)
	asJSON := flags.Bool("json", false, "print the events as JSON lines, as the service sends them")
	if _, st := parseFlags(flags, "events", args, 0, 0); st >= 0 {
		return st
	}
	sock := serviceSocket()
	if sock == "" {
		return fail(fmt.Errorf("%s=off: events come from the service only", socketEnv))
	}
	ctx, stop := signalContext()
	defer stop()
	evs, err := client.New(sock).Events(ctx)
	if err != nil {
		return fail(fmt.Errorf("the Wirelane service does not answer on %s: %w", sock, err))
	}
	defer evs.Close()
	for evs.Next() {
		if *asJSON {
			os.Stdout.Write(append(evs.Raw(), '\n'))
			continue
		}
		e := evs.Event()
		writeEvent(os.Stdout, &e)
	}
	if err := evs.Err(); err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return 0
}

// writeEvent writes one event as a line of text:
//
//	15:04:05 wg0: up (requested)
//	15:04:06 wg0: peer laptop: handshake
//	15:04:07 wg0: transfer 1.20 KiB received, 3.00 KiB sent
func writeEvent(w io.Writer, e *service.Event) {
	var b strings.Builder
	b.WriteString(e.Time.Local().Format("15:04:05"))
	b.WriteByte(' ')
	if e.Tunnel != "" {
		b.WriteString(e.Tunnel + ": ")
	}
	switch e.Type {
	case service.EventTunnel:
		b.WriteString(string(e.State))
		switch {
		case e.Initial:
			b.WriteString(" (now)")
		case e.Reason != "":
			b.WriteString(" (" + e.Reason + ")")
		}
		if e.Error != "" {
			b.WriteString(": " + e.Error)
		}
	case service.EventTunnels:
		b.WriteString(e.Change)
		if e.Status != nil {
			b.WriteString(" (" + string(e.Status.Kind) + ")")
		}
	case service.EventPeer:
		b.WriteString("peer " + peerLabel(e.Peer) + ": ")
		switch e.Change {
		case service.ChangeHandshakeExpired:
			b.WriteString("handshake expired")
		case service.ChangeEndpoint:
			b.WriteString("endpoint")
			if e.Peer != nil && e.Peer.Endpoint != nil {
				b.WriteString(" " + e.Peer.Endpoint.String())
			}
		default:
			b.WriteString(e.Change)
		}
	case service.EventTransfer:
		var rx, tx uint64
		if e.RxBytes != nil {
			rx = *e.RxBytes
		}
		if e.TxBytes != nil {
			tx = *e.TxBytes
		}
		fmt.Fprintf(&b, "transfer %s received, %s sent", wgquick.FormatBytes(rx), wgquick.FormatBytes(tx))
	case service.EventAuth:
		b.WriteString("asks for credentials")
		if e.Auth != nil {
			kind := e.Auth.Kind
			if e.Auth.Username != "" {
				kind += " of " + e.Auth.Username
			}
			b.WriteString(" (" + kind + ")")
			if e.Auth.Prompt != "" {
				b.WriteString(": " + e.Auth.Prompt)
			}
		}
	case service.EventStopping:
		b.WriteString("the service is stopping")
	default:
		b.WriteString(e.Type)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// peerLabel names a peer: its friendly name, else its common name, else
// the start of its public key.
func peerLabel(p *service.Peer) string {
	switch {
	case p == nil:
		return "?"
	case p.Name != "":
		return p.Name
	case p.CommonName != "":
		return p.CommonName
	case len(p.PublicKey) > 8:
		return p.PublicKey[:8] + "..."
	}
	return p.PublicKey
}
