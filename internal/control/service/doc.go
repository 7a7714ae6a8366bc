// Package service is the long-running Wirelane service's control plane: a
// versioned HTTP/1.1 + JSON API on a unix socket (/v1/tunnels, /v1/events),
// permissions from the caller's socket credentials, and a Prometheus
// exposition (/metrics), all in front of a Host that owns the tunnels.
//
// The model:
//
//	Host (the tunnels: list, get, up, down, import, delete; pushes state
//	  │   changes through the publish function given to Watch)
//	  ├─> hub: one bounded queue per event subscriber; publishing never
//	  │        blocks, a subscriber whose queue is full is dropped
//	  ├─> poller: once a second, while someone subscribes, diffs the Host's
//	  │        snapshot into peer and transfer events
//	  ├─> api: the /v1/ handlers, each checking the caller's role
//	  └─> collector: reads the Host at scrape time (nothing per packet)
//
// The package knows no engine: the tunnel library implements Host, and
// tests use an in-memory one. Nothing here sees a private or preshared
// key: the Tunnel and Event types have no field that could carry one.
//
// Files: types.go (what the API returns), host.go (the Host contract),
// errors.go (errors and their HTTP status), hub.go (subscribers), poll.go
// (derived events), perm.go (SO_PEERCRED roles), api.go (handlers),
// metrics.go (the collector), listen.go (the socket), server.go (the
// service's life).
package service
