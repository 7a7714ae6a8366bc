package noise

import (
	"bytes"
	"encoding/binary"
	"time"
)

// Timestamp is a TAI64N label: 8 bytes big-endian seconds offset by 2^62
// (plus the 10 s TAI-UTC offset used by the other WireGuard implementations),
// then 4 bytes big-endian nanoseconds. Byte order equals time order.
type Timestamp [TimestampSize]byte

// tai64Base is 2^62 + 10: the same base the kernel and the Go reference use,
// so a peer switching implementations does not go back in time.
const tai64Base = uint64(0x400000000000000a)

// TAI64N encodes t exactly (no rounding). It does not allocate.
func TAI64N(t time.Time) Timestamp {
	var ts Timestamp
	binary.BigEndian.PutUint64(ts[:8], tai64Base+uint64(t.Unix()))
	binary.BigEndian.PutUint32(ts[8:], uint32(t.Nanosecond()))
	return ts
}

// whitened rounds t down to TimestampGranularity within its second, as
// initiations carry it.
func whitened(t time.Time) time.Time {
	ns := t.Nanosecond()
	return t.Add(-time.Duration(ns % int(TimestampGranularity)))
}

// After reports whether t is strictly later than u.
func (t Timestamp) After(u Timestamp) bool {
	return bytes.Compare(t[:], u[:]) > 0
}

// Time converts t back to a time.Time (for logs and tests).
func (t Timestamp) Time() time.Time {
	secs := binary.BigEndian.Uint64(t[:8]) - tai64Base
	return time.Unix(int64(secs), int64(binary.BigEndian.Uint32(t[8:])))
}
