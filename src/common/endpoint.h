// Endpoint naming shared by every layer that resolves peers.
#pragma once

#include <optional>
#include <string>

namespace gossip {

// Why `endpoint` is not one a peer can bind or reach, or nullopt when it is: tcp://HOST:PORT
// (HOST a name, an address, an interface, * or [an IPv6 address]; PORT 0..65535), ipc://PATH or
// inproc://NAME. Said before anything is bound or dialled, so a typo is an error naming it
// rather than ZeroMQ's "Invalid argument" or a join that waits for an answer from nowhere.
std::optional<std::string> endpoint_problem(const std::string& endpoint);
// As endpoint_problem, for a member of a run over ZeroMQ between processes: tcp:// or ipc:// only
// (inproc:// is one process's).
std::optional<std::string> peer_endpoint_problem(const std::string& endpoint);

// True for tcp://host:0, an endpoint that binds any free port and is found through a rendezvous.
bool binds_any_port(const std::string& endpoint);

// The host of a tcp:// endpoint ("node07" of tcp://node07:29500); "" for any other kind (ipc://,
// inproc://: always this host).
std::string endpoint_host(const std::string& endpoint);

// True when whatever connects to `endpoint` is on this host and its bytes never leave the
// machine's memory: ipc://, inproc://, or a tcp:// endpoint at a loopback address (127.0.0.0/8,
// localhost, [::1]). Host names are not resolved (false).
bool is_loopback(const std::string& endpoint);

// Where a peer listens for its own endpoint: the endpoint itself, except a tcp:// endpoint named
// by a host name (tcp://node07:29500, from a cluster's host list), which ZeroMQ cannot bind: that
// one listens on every interface at its port (tcp://*:29500), as the other hosts reach it by
// whatever address the name has there (a host's own /etc/hosts often maps its name to loopback).
// localhost listens on 127.0.0.1; addresses and interface names are left to ZeroMQ.
std::string listen_address(const std::string& endpoint);

// DIR/peer-ID followed by `suffix`: how every per-peer file of a run is named (rendezvous
// files, ipc sockets, checkpoints, CurveZMQ keys).
std::string peer_path(const std::string& dir, int id, const std::string& suffix = "");

}  // namespace gossip
