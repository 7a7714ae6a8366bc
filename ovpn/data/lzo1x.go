package data

// A bounded LZO1X decompressor (what liblzo2's lzo1x_decompress_safe
// accepts, which OpenVPN's comp-lzo uses; the format as Linux's
// Documentation/staging/lzo.rst describes it). Written for Wirelane: no
// Go LZO module is served by the module proxy. It reads only within src,
// writes only within dst, and returns an error for any stream that would
// do otherwise.
//
// The stream is a sequence of instructions. Each copies literals from
// the input or a match from the output already written (distance back,
// length), and its low two bits (the "state", S below) say how many
// literals (0 to 3) follow it before the next instruction; after a long
// literal run the state is 4. The meaning of instructions 0..15 depends
// on the state:
//
//	first byte 18..255: copy byte-17 literals (state: that count, or 4)
//	0000LLLL, state 0:      literal run of 3+len(L, 4 bits) bytes; state 4
//	0000DDSS HHHHHHHH, 1-3: match of 2, distance (H<<2)+D+1
//	0000DDSS HHHHHHHH, 4:   match of 3, distance (H<<2)+D+2049
//	0001HLLL LE16:          match of 2+len(L, 3 bits), distance
//	                        16384+(H<<14)+(LE16>>2), S=LE16&3; distance
//	                        16384 ends the stream
//	001LLLLL LE16:          match of 2+len(L, 5 bits), distance (LE16>>2)+1
//	01LDDDSS HHHHHHHH:      match of 3+L, distance (H<<3)+D+1
//	1LLDDDSS HHHHHHHH:      match of 5+L, distance (H<<3)+D+1
//
// where len(L, b) is L, or when L is 0: 2^b-1, plus 255 for each zero
// byte that follows, plus the first non-zero byte.

// errLZO is a malformed LZO1X stream.
var errLZO = ErrDecompress

// lzo1xDecompress decompresses the LZO1X stream src into dst and returns
// the number of bytes written. Output that would not fit in dst is
// ErrDecompressSize; a malformed stream (including one that does not end
// exactly at the end of src) is ErrDecompress.
func lzo1xDecompress(dst, src []byte) (int, error) {
	ip, op := 0, 0
	state := 0
	if len(src) == 0 {
		return 0, errLZO
	}
	// literals copies n literal bytes from src to dst.
	literals := func(n int) error {
		if n > len(src)-ip {
			return errLZO
		}
		if n > len(dst)-op {
			return ErrDecompressSize
		}
		copy(dst[op:op+n], src[ip:ip+n])
		ip += n
		op += n
		return nil
	}
	// length reads the rest of a length whose bits in the instruction
	// were zero: mask, then 255 per zero byte, then the next byte.
	length := func(mask int) (int, error) {
		n := mask
		for {
			if ip >= len(src) {
				return 0, errLZO
			}
			b := src[ip]
			ip++
			if b != 0 {
				return n + int(b), nil
			}
			n += 255
			if n > len(dst)+255 { // already longer than any output can be
				return 0, ErrDecompressSize
			}
		}
	}
	if src[0] > 17 {
		n := int(src[0]) - 17
		ip = 1
		if err := literals(n); err != nil {
			return 0, err
		}
		state = min(n, 4)
	}
	for {
		if ip >= len(src) {
			return 0, errLZO // no end-of-stream marker
		}
		inst := int(src[ip])
		ip++
		var n, dist, next int
		switch {
		case inst >= 64: // 01LDDDSS, 1LLDDDSS
			if ip >= len(src) {
				return 0, errLZO
			}
			n = inst>>5 + 1 // 64..127: 3 or 4; 128..255: 5..8
			dist = int(src[ip])<<3 + inst>>2&7 + 1
			ip++
			next = inst & 3
		case inst >= 32: // 001LLLLL
			n = inst & 31
			if n == 0 {
				var err error
				if n, err = length(31); err != nil {
					return 0, err
				}
			}
			n += 2
			if len(src)-ip < 2 {
				return 0, errLZO
			}
			v := int(src[ip]) | int(src[ip+1])<<8
			ip += 2
			dist, next = v>>2+1, v&3
		case inst >= 16: // 0001HLLL
			n = inst & 7
			if n == 0 {
				var err error
				if n, err = length(7); err != nil {
					return 0, err
				}
			}
			n += 2
			if len(src)-ip < 2 {
				return 0, errLZO
			}
			v := int(src[ip]) | int(src[ip+1])<<8
			ip += 2
			dist, next = (inst&8)<<11+v>>2, v&3
			if dist == 0 { // end of stream
				if ip != len(src) {
					return 0, errLZO
				}
				return op, nil
			}
			dist += 16384
		default: // 0000XXXX
			if state == 0 { // a literal run
				n = inst
				if n == 0 {
					var err error
					if n, err = length(15); err != nil {
						return 0, err
					}
				}
				if err := literals(n + 3); err != nil {
					return 0, err
				}
				state = 4
				continue
			}
			if ip >= len(src) {
				return 0, errLZO
			}
			n, dist = 2, int(src[ip])<<2+inst>>2+1
			if state == 4 {
				n, dist = 3, dist+2048
			}
			ip++
			next = inst & 3
		}
		if dist > op {
			return 0, errLZO // before the start of the output
		}
		if n > len(dst)-op {
			return 0, ErrDecompressSize
		}
		// An overlapping match (dist < n) repeats its last dist bytes:
		// copy what is already there, doubling each time.
		from, end := op-dist, op+n
		for op < end {
			op += copy(dst[op:end], dst[from:op])
		}
		if err := literals(next); err != nil {
			return 0, err
		}
		state = next
	}
}
