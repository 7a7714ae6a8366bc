package uapi

import "github.com/wirelane/wirelane/device/noise"

// Keys travel as 64 hexadecimal characters. Decoding and encoding here use
// arithmetic instead of lookup tables or branches on the key's bytes, so the
// time they take and the memory they touch do not depend on the key (private
// and preshared keys pass through these functions).

// keyHexLen is the length of a key's hexadecimal form.
const keyHexLen = 2 * noise.KeySize

// decodeKeyHex decodes exactly 64 hexadecimal characters (either case) into
// k. It reports false, leaving k unspecified, for any other input.
func decodeKeyHex(k *noise.Key, src []byte) bool {
	if len(src) != keyHexLen {
		return false
	}
	var bad uint32
	for i := range k {
		hi, bh := hexNibble(src[2*i])
		lo, bl := hexNibble(src[2*i+1])
		k[i] = byte(hi<<4 | lo)
		bad |= bh | bl
	}
	return bad == 0
}

// hexNibble returns the value of one hexadecimal digit and a nonzero bad
// flag when c is not one.
func hexNibble(c byte) (v, bad uint32) {
	x := uint32(c)
	num := x ^ '0'                                         // '0'..'9' -> 0..9
	numOK := ((num - 10) >> 8) & 0xff                      // 0xff when num < 10
	alpha := (x &^ 0x20) - ('A' - 10)                      // 'a'..'f' and 'A'..'F' -> 10..15
	alphaOK := (((alpha - 10) ^ (alpha - 16)) >> 8) & 0xff // 0xff when 10 <= alpha < 16
	v = (num & numOK) | (alpha & alphaOK)
	return v & 0xf, ^(numOK | alphaOK) & 0xff
}

// appendKeyHex appends the 64 lowercase hexadecimal characters of k.
func appendKeyHex(dst []byte, k *noise.Key) []byte {
	for _, b := range k {
		dst = append(dst, hexDigit(uint32(b)>>4), hexDigit(uint32(b)&0xf))
	}
	return dst
}

// hexDigit returns the lowercase digit for a nibble: '0'+n below 10 and
// 'a'+n-10 from 10, chosen by a mask rather than a branch.
func hexDigit(n uint32) byte {
	return byte(n + '0' + (((9 - n) >> 8) & ('a' - '0' - 10)))
}
