package main

import "github.com/wirelane/wirelane/internal/control/daemon"

// cmdDaemon runs the userspace daemon. The daemon re-executes this binary
// with the same arguments to detach, which lands here again.
func cmdDaemon(args []string) int { return daemon.Main(args) }
