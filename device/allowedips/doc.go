// Package allowedips is WireGuard's crypto-routing table: it maps IPv4 and
// IPv6 prefixes to the peer that owns them and answers longest-prefix-match
// queries for both directions of the data path.
//
//   - Send: the destination address of an outgoing packet selects the peer
//     that encrypts it (LookupBytes on the inner header).
//   - Receive: after decryption, the inner source address must be owned by
//     the peer whose key authenticated the packet, or the packet is dropped.
//
// # Model
//
// A Table holds two independent tries, one per address family. IPv4 and
// IPv6 prefixes never match each other: 10.0.0.0/8 does not cover
// ::ffff:10.0.0.1 when that address arrives in a 16-byte IPv6 header. The
// one exception is Lookup, which takes a netip.Addr from Go APIs where an
// IPv4 address is often carried in the IPv4-mapped IPv6 form; Lookup
// unmaps such an address and consults the IPv4 trie. Prefixes are always
// stored masked (10.1.2.3/8 is stored as 10.0.0.0/8) and in the family they
// were given in.
//
// Each prefix has exactly one owner. Inserting a prefix that is already
// present moves it to the new owner, which is how a peer takes over an
// address from another peer.
//
// # Data structure
//
// Each family is a path-compressed binary trie (a PATRICIA trie). A node
// stores its prefix as two 64-bit words (IPv4 uses the top 32 bits of the
// first word) and a length. Nodes exist only where a prefix is stored or
// where two stored prefixes diverge, so a trie of n prefixes has fewer
// than 2n nodes and its depth is bounded by the address width (32 or 128)
// and in practice near log2(n). A permanent root node of length 0 per
// family holds the /0 route.
//
// A lookup walks from the root, comparing the address with each node's
// prefix using one XOR and a leading-zero count, remembering the deepest
// node that has an owner, and stops at the first node that does not match.
// It allocates nothing and takes no lock.
//
// Once a family holds 512 prefixes or more, a jump index lets lookups skip
// the top of the walk (jump.go). It is an array of one to two entries per
// prefix (at most 2^16 entries) indexed by the k address bits that follow
// an anchor prefix A, chosen as the deepest node holding at least 7/8 of
// the family's prefixes. An entry records where the walk stands after A
// plus k bits: the deepest node there and the deepest one with an owner.
// A lookup inside A reads one entry and continues the walk below it, so
// at 100,000 random prefixes it visits a few nodes instead of about 17.
// Writers keep the index exact: when a node of length at most |A|+k is
// linked in, unlinked, or gains or loses an owner, one sequential pass
// over the entries under its prefix patches them (a few entries for long
// prefixes, the whole index for /0). Entries point at nodes, not owners,
// so moving a prefix to another owner costs nothing. The index is rebuilt
// whenever its family has doubled or halved since the last build, which
// costs amortised O(1) per change.
//
// Every owner has an index entry holding a dense slice of its nodes; each
// node records its position in it. Count is a map read; Prefixes iterates
// the slice; removing one prefix swaps the last node into its slot;
// RemoveValue walks the slice, so its cost is proportional to the owner's
// prefix count, not the table size. A WireGuard peer may hold 131,071
// prefixes and removing it does not touch other peers' routes. (When the
// value owns at least an eighth of the table, the jump indexes are dropped
// and rebuilt once instead of updated per prefix.)
//
// Removal keeps the trie compressed: a node that loses its owner is
// dropped if it has fewer than two children, and a branch node left with
// one child is spliced out.
//
// # Memory
//
// A node is 56 bytes on 64-bit platforms (two child pointers, the
// 128-bit key, the owner and parent pointers, the slot in the owner's
// slice and the length), allocated from the 64-byte size class so that a
// lookup reads one cache line per node. With branch nodes, the owner
// slices and the jump index, a table of 100,000 random prefixes uses
// about 150 bytes of heap per prefix; the tests assert at most 200.
//
// # Concurrency
//
// The table has no lock of its own. Any number of goroutines may call
// Lookup, LookupBytes, Prefixes, Count and Len at the same time as long as
// no goroutine is inside Insert, Remove or RemoveValue. The device guards
// its table with a sync.RWMutex: the data path takes the read lock once
// per batch of packets, and configuration changes take the write lock.
// The callback given to Prefixes must not modify the table.
package allowedips
