package wire

import (
	"encoding/binary"
	"fmt"
)

// Data packet headers. DATA_V2: op|kid (1) | peer-id (3); DATA_V1: op|kid (1).
// Everything after the header belongs to the data channel (package data).

// PutDataV2Header writes a DATA_V2 header into b[:4].
func PutDataV2Header(b []byte, keyID uint8, peerID uint32) {
	binary.BigEndian.PutUint32(b, uint32(HeaderByte(DataV2, keyID))<<24|peerID&0xFFFFFF)
}

// DecodeDataHeader returns the opcode, key id and peer-id (UndefinedPeerID
// for DATA_V1) of a data packet and the header length.
func DecodeDataHeader(b []byte) (op Opcode, keyID uint8, peerID uint32, hdrLen int, err error) {
	if len(b) < 1 {
		return 0, 0, 0, 0, ErrShort
	}
	op, keyID = Header(b[0])
	switch op {
	case DataV1:
		return op, keyID, UndefinedPeerID, 1, nil
	case DataV2:
		if len(b) < 4 {
			return 0, 0, 0, 0, ErrShort
		}
		return op, keyID, binary.BigEndian.Uint32(b) & 0xFFFFFF, 4, nil
	}
	return 0, 0, 0, 0, fmt.Errorf("wire: %v is not a data opcode", op)
}
