package wgtunnel

import (
	"fmt"
	"io"
	"os"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
)

// Options says how Up, Down and Save run and report. The zero value
// starts daemons (Daemon) and reports nothing.
type Options struct {
	// Engine runs the devices; nil means a Daemon that logs through Log.
	Engine Engine
	// Log receives a one-line description of every change, as wg-quick
	// prints after "[#] "; nil = silent.
	Log func(string)
	// Warn receives warnings that do not stop the command (DNS not
	// applied under DNSOptional, no firewall); nil = silent.
	Warn func(string)
	// Note receives what a failed Up is about to undo; nil = silent.
	Note func(string)
	// HookStdout and HookStderr receive the hooks' output; nil means
	// os.Stdout and os.Stderr.
	HookStdout, HookStderr io.Writer
	// NoFirewall brings a default route up without the nftables
	// firewall (FirewallFromEnv reads the user's choice).
	NoFirewall bool
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(fmt.Sprintf(format, args...))
	}
}

func (o *Options) warnf(format string, args ...any) {
	if o.Warn != nil {
		o.Warn(fmt.Sprintf(format, args...))
	}
}

func (o *Options) notef(format string, args ...any) {
	if o.Note != nil {
		o.Note(fmt.Sprintf(format, args...))
	}
}

// engine returns the engine to use and a function that releases it when
// this call opened it.
func (o *Options) engine() (Engine, func()) {
	if o.Engine != nil {
		return o.Engine, func() {}
	}
	d := &Daemon{Log: o.Log}
	return d, func() { d.Close() }
}

// netConf opens netlink in the calling thread's network namespace, logging
// through o.Log; record keeps the undo stack (Up), else changes are not
// recorded (Down, Save).
func (o *Options) netConf(record bool) (*netcfg.Conf, error) {
	nc, err := netcfg.New()
	if err != nil {
		return nil, err
	}
	nc.Log = o.Log
	if !record {
		nc.Undo = nil
	}
	return nc, nil
}

// FirewallEnv names the variable that turns the nftables firewall of a
// default route off: "off" skips it, "" or "on" keep it.
const FirewallEnv = "WIRELANE_FIREWALL"

// FirewallFromEnv reads WIRELANE_FIREWALL and returns the value of
// Options.NoFirewall it asks for; any value but "", "on" and "off" is an
// error, so that a misspelt value never silently means "on" or "off".
func FirewallFromEnv() (noFirewall bool, err error) {
	switch v := os.Getenv(FirewallEnv); v {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: use \"on\" or \"off\"", FirewallEnv, v)
	}
}
