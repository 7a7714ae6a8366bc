package daemon

// The foreground daemon's life:
//
//	setup:    TUN (create, or WG_TUN_FD) -> UAPI socket (create, or
//	          WG_UAPI_FD) -> device up -> Ready / readiness report
//	serve:    accept loop, one goroutine per UAPI connection
//	teardown: the first of these ends the daemon, and everything is closed
//	          in reverse order (the socket file is unlinked):
//	            - ctx cancelled (SIGTERM/SIGINT in Main)
//	            - the device closes itself (its TUN went away: link deleted)
//	            - the socket file is removed or replaced (socketGone)
//	            - the listener fails

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/crypto/chachapoly"
	"github.com/wirelane/wirelane/internal/sys/harden"
	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/tun"
)

// engine is the running WireGuard device as the daemon sees it.
type engine interface {
	// ServeUAPI answers the UAPI operations arriving on c until c closes.
	ServeUAPI(c net.Conn)
	// Done is closed once the device has stopped (for example because its
	// TUN interface was deleted).
	Done() <-chan struct{}
	// Close stops the device and closes its TUN and sockets; idempotent.
	Close()
}

// engineFunc builds and starts the device on t. It is a variable so that
// tests can run the daemon's lifecycle around a stand-in device.
var engineFunc = newEngine

// Run runs the daemon described by cfg. With cfg.Foreground it returns when
// the daemon ends (nil for an orderly end: cancelled ctx, deleted
// interface, removed socket); otherwise it starts a detached copy of the
// program (see daemonize) and returns once that copy is ready.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if !cfg.Foreground {
		return daemonize(ctx, &cfg)
	}
	return runForeground(ctx, &cfg)
}

func runForeground(ctx context.Context, cfg *Config) error {
	log, closeLog, err := cfg.logger()
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	defer closeLog.Close()
	// Private keys arrive over UAPI: no core dump or ptrace by others.
	if err := harden.NoDump(); err != nil {
		log.Warn("hardening", "err", err)
	}

	var dev tun.Device
	if cfg.TunFD != 0 {
		dev, err = tun.CreateTUNFromFile(os.NewFile(uintptr(cfg.TunFD), EnvTunFD), DefaultMTU)
	} else {
		dev, err = tun.CreateTUN(cfg.Interface, DefaultMTU)
	}
	if err != nil {
		return fmt.Errorf("create TUN: %w", err)
	}
	name, err := dev.Name()
	if err != nil {
		dev.Close()
		return fmt.Errorf("TUN name: %w", err)
	}
	log = log.With("interface", name)
	log.Debug("data-path AEAD", "implementation", chachapoly.Mode())
	// How the data path uses the CPUs (Main applied it), one Info line.
	procs.Current().Log(log)

	var ln net.Listener
	sockPath := ""
	if cfg.UAPIFD != 0 {
		ln, err = uapi.ListenFD(cfg.UAPIFD)
	} else {
		sockPath = uapi.SocketPath(name)
		ln, err = uapi.Listen(name)
	}
	if err != nil {
		dev.Close()
		return fmt.Errorf("UAPI socket: %w", err)
	}
	if sockPath == "" {
		sockPath = ln.Addr().String()
	}

	eng, err := engineFunc(dev, log)
	if err != nil {
		ln.Close()
		dev.Close()
		return fmt.Errorf("start device: %w", err)
	}

	var conns sync.WaitGroup
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				eng.ServeUAPI(c)
			}()
		}
	}()

	// Removing the socket file (or another daemon taking the name over)
	// ends this daemon, as with the reference implementation.
	stopWatch := make(chan struct{})
	var sockGone <-chan struct{}
	if sockPath != "" && sockPath[0] == '/' {
		sockGone = uapi.WatchRemoved(sockPath, stopWatch)
	}

	log.Info("daemon ready", "socket", sockPath, "pid", os.Getpid())
	if cfg.Ready != nil {
		cfg.Ready()
	}

	var result error
	select {
	case <-ctx.Done():
		log.Info("stopping: signal or cancellation")
	case <-eng.Done():
		log.Info("stopping: device stopped (its TUN was deleted or failed)")
	case <-sockGone:
		log.Info("stopping: UAPI socket file removed", "socket", sockPath)
	case err := <-acceptErr:
		log.Error("stopping: UAPI listener failed", "err", err)
		result = fmt.Errorf("UAPI listener: %w", err)
	}
	close(stopWatch)
	ln.Close()
	eng.Close()
	conns.Wait()
	return result
}
