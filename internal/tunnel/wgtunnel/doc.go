// Package wgtunnel brings WireGuard tunnels up and down: a wg-quick file
// (or a gateway file turned into one) becomes an interface with its keys,
// peers, addresses, MTU, DNS, routes, policy rules and firewall, and goes
// away again. The command line, the gateway, the demo and a long-running
// service all use it; none of them touches netlink itself.
//
// Up runs these steps, pushing the inverse of each change on an undo
// stack; a failed step, or a cancelled context between steps, rolls the
// stack back, so a failed Up leaves no interface, route, rule, firewall
// table or DNS entry behind:
//
//	check the interface is free -> PreUp hooks
//	-> Engine.Start (the daemon: wirelane daemon IFNAME)              [undo: delete link]
//	   and the record of that device instance, "configuring" (record.go)
//	-> Engine.Configure: keys, port, fwmark, peers (endpoints resolved)
//	-> addresses -> MTU (given, or route MTU to the endpoints - 80) -> link up
//	-> DNS: systemd-resolved (D-Bus; "~." for a /0), else resolvconf;
//	   neither: fail, unless the file says DNSOptional              [undo: RevertLink / resolvconf -d]
//	-> routes for every peer's AllowedIPs, longest prefix first;
//	   a /0 gets fwmark + table + "not fwmark" and suppress rules      [undo: delete rules]
//	   and the nftables table wg-quick-IFNAME of its family
//	   (anti-spoofing drop + fwmark save/restore)                     [undo: delete table]
//	-> PostUp hooks -> the daemon still answers and its link exists
//	   (a daemon killed during Up fails it here)
//	-> the record says "configured" -> done (undo discarded)
//
// Reload (reload.go) changes a running tunnel into what Up of its file
// would make, in place: plan.go compares the running device (UAPI get)
// and interface (netlink) with the file and lists only the differences;
// they are applied as steps on the same undo stack, so a reload that
// fails leaves the tunnel as it was. Peers that stay are changed with
// update_only, keeping their sessions; hooks do not run; a plan with no
// change makes no changing call.
//
// Down runs PreDown, saves (SaveConfig), deletes the rules, the nftables
// tables and the link (the engine stops when its interface goes), removes
// DNS and runs PostDown. A tunnel whose engine is gone (crashed, killed)
// is cleaned up and then runs PostDown only; nothing is saved. Save writes
// the running configuration back to the file, but never a state that
// could lose what the file holds: no private key, a device that is not
// the instance Up recorded as configured (a restarted daemon), or an
// interface without the addresses the file gives it; SaveAnyway saves
// the last two on the user's word. Status says whether a tunnel is up.
//
// The Engine interface is what runs the WireGuard device: Daemon starts
// a userspace daemon process per interface and speaks UAPI to it; an
// in-process service can implement the same interface.
package wgtunnel
