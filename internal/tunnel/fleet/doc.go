// Package fleet runs a gateway as a member of a fleet: it publishes this
// site's record in the fleet's store (internal/tunnel/fleet/store, etcd in
// production), bound to a lease it keeps alive, watches every other
// record, and keeps the gateway's WireGuard peers, allowed IPs and routes
// in step with them, in place, through wgtunnel.Reload (sessions of the
// sites that stay are kept). The [[site]] tables of the file stay beside
// the fleet's.
//
// An Agent is three loops around one state:
//
//	publish: grant a lease -> put PREFIX/sites/NAME (only if absent or
//	         ours: a name held by another key is refused) -> keep the lease
//	         alive every TTL/3; a lost lease is granted again and the
//	         record put again; a keep-alive that fails marks the store
//	         unreachable, the next that works asks for a resync
//	sync:    list PREFIX/sites/ -> watch from that revision -> every
//	         change into the record set; a watch that ends, or a resync,
//	         lists again
//	apply:   record set -> resolve (resolve.go: conflicts, locations) ->
//	         the file's configuration plus the fleet's peers ->
//	         wgtunnel.Reload, only when the peers changed
//
// When the store is unreachable nothing is removed: the gateway keeps the
// peers it last saw (fail static), and says so in its status; when the
// store answers again, a fresh list replaces the record set and only what
// really changed is applied, so no peer flaps.
//
// The status (Status) is written as JSON to StatusPath(interface) after
// every change, for `wirelane gateway show` and the service.
package fleet
