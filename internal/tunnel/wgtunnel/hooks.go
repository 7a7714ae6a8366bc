package wgtunnel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// runHooks runs hook commands through bash (sh if bash is missing) with %i
// replaced by the interface name; the first failure stops.
func runHooks(ctx context.Context, o *Options, hooks []string, ifname string) error {
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	stdout, stderr := o.HookStdout, o.HookStderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	for _, h := range hooks {
		h = strings.ReplaceAll(h, "%i", ifname)
		o.logf("%s", h)
		cmd := exec.CommandContext(ctx, shell, "-c", h)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hook %q failed: %w", h, err)
		}
	}
	return nil
}
