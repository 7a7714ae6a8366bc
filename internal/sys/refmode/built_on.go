//go:build wirelane_refmode

package refmode

// built is the mode a binary starts in: on, for a binary built with the
// wirelane_refmode tag (a ref-mode wirelaned for A/B runs).
const built = true
