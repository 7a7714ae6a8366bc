// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"fmt"
	"os"
)

// EnvAEAD names the environment variable that picks the data-path AEAD:
// "auto" (or unset) uses the AVX-512 kernels where the CPU has them,
// "generic" uses golang.org/x/crypto's everywhere. It is read once, when the
// program starts.
const EnvAEAD = "WIRELANE_AEAD"

// envErr is the complaint about a bad EnvAEAD value; the package then
// behaves as with "generic", the conservative choice.
var envErr error

func init() {
	if err := SetMode(os.Getenv(EnvAEAD)); err != nil {
		envErr = fmt.Errorf("%s=%q: %w", EnvAEAD, os.Getenv(EnvAEAD), err)
		_ = SetMode("generic")
	}
}

// EnvError reports a bad EnvAEAD value, for commands to refuse to start
// with it (nil when the variable is unset or valid).
func EnvError() error { return envErr }

// SetMode selects what New returns from now on: "auto" or "" for the
// kernels where the CPU has them, "generic" for x/crypto's. It is meant for
// start-up, before any cipher exists, and must not run while ciphers are in
// use; ciphers made before keep their implementation.
func SetMode(mode string) error {
	switch mode {
	case "", "auto":
		haveKernel, haveIFMA = cpuKernel, cpuIFMA
	case "generic":
		haveKernel, haveIFMA = false, false
	default:
		return fmt.Errorf("want auto or generic")
	}
	return nil
}

// Mode describes what New returns on this machine: "avx512-ifma",
// "avx512" or "generic".
func Mode() string {
	switch {
	case haveIFMA:
		return "avx512-ifma"
	case haveKernel:
		return "avx512"
	}
	return "generic"
}
