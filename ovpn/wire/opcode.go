package wire

import "fmt"

// Opcode is the 5-bit packet type carried in the top bits of the first byte.
type Opcode uint8

// Opcodes used by OpenVPN 2.6.
const (
	SoftResetV1       Opcode = 3  // P_CONTROL_SOFT_RESET_V1: start a new key state
	ControlV1         Opcode = 4  // P_CONTROL_V1: TLS bytes
	AckV1             Opcode = 5  // P_ACK_V1: acknowledgements only
	DataV1            Opcode = 6  // P_DATA_V1: data without peer-id
	HardResetClientV2 Opcode = 7  // P_CONTROL_HARD_RESET_CLIENT_V2
	HardResetServerV2 Opcode = 8  // P_CONTROL_HARD_RESET_SERVER_V2
	DataV2            Opcode = 9  // P_DATA_V2: data with a 24-bit peer-id
	HardResetClientV3 Opcode = 10 // tls-crypt-v2 client reset, WKc appended (ovpn/wrap turns it into V2)
	ControlWKCV1      Opcode = 11 // tls-crypt-v2 CONTROL_V1 with the WKc appended (ovpn/wrap turns it into CONTROL_V1)
	KeyIDMask                = 0x07
	UndefinedPeerID   uint32 = 0xFFFFFF
)

var opcodeNames = [...]string{
	SoftResetV1:       "P_CONTROL_SOFT_RESET_V1",
	ControlV1:         "P_CONTROL_V1",
	AckV1:             "P_ACK_V1",
	DataV1:            "P_DATA_V1",
	HardResetClientV2: "P_CONTROL_HARD_RESET_CLIENT_V2",
	HardResetServerV2: "P_CONTROL_HARD_RESET_SERVER_V2",
	DataV2:            "P_DATA_V2",
	HardResetClientV3: "P_CONTROL_HARD_RESET_CLIENT_V3",
	ControlWKCV1:      "P_CONTROL_WKC_V1",
}

// String returns OpenVPN's name for the opcode.
func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return fmt.Sprintf("opcode(%d)", uint8(o))
}

// IsData reports whether o is a data-channel opcode.
func (o Opcode) IsData() bool { return o == DataV1 || o == DataV2 }

// IsControl reports whether o travels on the control channel (carries a
// session id and acknowledgements).
func (o Opcode) IsControl() bool {
	switch o {
	case SoftResetV1, ControlV1, AckV1, HardResetClientV2, HardResetServerV2:
		return true
	}
	return false
}

// Header splits the first byte of a packet into opcode and key id.
func Header(b byte) (Opcode, uint8) { return Opcode(b >> 3), b & KeyIDMask }

// HeaderByte builds the first byte of a packet.
func HeaderByte(op Opcode, keyID uint8) byte { return byte(op)<<3 | keyID&KeyIDMask }
