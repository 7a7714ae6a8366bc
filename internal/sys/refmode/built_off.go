//go:build !wirelane_refmode

package refmode

// built is the mode a binary starts in: off unless built with the
// wirelane_refmode tag.
const built = false
