#include "peer/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "peer/map_reader.h"

namespace gossip::peer {
namespace {

using config_detail::MapReader;
using config_detail::parse_data;
using config_detail::parse_train;

// yaml-cpp keeps both entries of a duplicated key (lookups see the first), and a key may be a
// mapping or a list: both are refused here, before anything is read, naming the lines.
void check_keys(const YAML::Node& node, const std::string& file) {
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) check_keys(item, file);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> seen;  // key → line (1-based)
  for (auto it = node.begin(); it != node.end(); ++it) {
    const int line = it->first.Mark().line + 1;
    if (!it->first.IsScalar())
      throw Error(file + ":" + std::to_string(line), "a key must be a plain name, not a mapping or a list");
    auto [first, added] = seen.emplace(it->first.Scalar(), line);
    if (!added)
      throw Error(file + ":" + std::to_string(line), "duplicate key '" + it->first.Scalar() + "' (first at line " +
                                                         std::to_string(first->second) + ")");
    check_keys(it->second, file);
  }
}

// The whole of a file the YAML names (or the YAML itself); `what` says why it could not be read.
// Read up to a cap, so a device or an endless pipe given by mistake (--config /dev/zero) is an
// error, not a hang that eats memory; a directory is named as one.
std::string read_whole_file(const std::string& path, const std::string& what) {
  constexpr size_t kMaxBytes = size_t(16) << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, what);
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes) throw Error(path, "larger than 16 MiB, which no YAML or host file is");
  }
  if (in.bad()) throw Error(path, std::filesystem::is_directory(path) ? "is a directory" : what + " (read error)");
  return text;
}

std::string read_host_file(const std::string& path) { return read_whole_file(path, "cannot read the host file"); }

// `peers: {hosts: slurm | mpi | FILE, base_port: P}`: rank r listens on base_port + (its index
// among the ranks of its host) on its host, which the job's own environment (or the file) says.
void parse_cluster_peers(MapReader& p, const YAML::Node& node, RunConfig& cfg) {
  std::string source, hostfile;
  int base_port = 0, count = 0;
  p.read_string("hosts", source);
  p.read_string("hostfile", hostfile);
  p.read_number("count", count, 1, 4096);
  if (!p.has("base_port")) p.fail(node, "'hosts' needs a base_port (each rank listens on base_port + its local index)");
  p.read_number("base_port", base_port, 1, 65535);
  p.finish();
  if (!hostfile.empty() && source != "mpi") p.fail(p.get("hostfile"), "'hostfile' goes with hosts: mpi", "hostfile");
  std::vector<RankPlace> places;
  try {
    places = job_layout(source, hostfile, process_environment(), read_host_file);
  } catch (const Error& e) {
    p.fail(p.get("hosts"), e.what(), "hosts");
  }
  if (places.empty()) p.fail(p.get("hosts"), "the job has no ranks", "hosts");
  if (count && count != static_cast<int>(places.size()))
    p.fail(p.get("count"), "count " + std::to_string(count) + ", but the job has " + std::to_string(places.size()) + " ranks",
           "count");
  for (const RankPlace& r : places) {
    if (base_port + r.local > 65535) p.fail(p.get("base_port"), "base_port + ranks on one host exceeds 65535", "base_port");
    const std::string ep = "tcp://" + r.host + ":" + std::to_string(base_port + r.local);
    if (std::optional<std::string> why = endpoint_problem(ep))
      p.fail(p.get("hosts"), "the job's host '" + escape_for_log(r.host) + "' makes endpoint " + escape_for_log(ep) + ", which " + *why,
             "hosts");
    cfg.peers.list.push_back({static_cast<int>(cfg.peers.list.size()), ep});
  }
}

void parse_peers(MapReader& top, RunConfig& cfg) {
  if (!top.has("peers")) {
    cfg.peers.list = {PeerEntry{0, "tcp://127.0.0.1:0"}};
    return;
  }
  YAML::Node node = top.get("peers");
  if (node.IsSequence()) {
    std::set<int> ids;
    std::set<std::string> endpoints;
    for (size_t i = 0; i < node.size(); ++i) {
      MapReader p(node[i], top.file(), "peers[" + std::to_string(i) + "]");
      PeerEntry e;
      e.id = static_cast<int>(i);
      p.read_number("id", e.id, 0, 1 << 20);
      if (!p.has("endpoint")) p.fail(node[i], "missing field 'endpoint'");
      p.read_string("endpoint", e.endpoint);
      if (std::optional<std::string> why = peer_endpoint_problem(e.endpoint))
        p.fail(p.get("endpoint"), "endpoint '" + escape_for_log(e.endpoint) + "' " + *why, "endpoint");
      if (!ids.insert(e.id).second) p.fail(node[i], "duplicate peer id " + std::to_string(e.id), "id");
      if (!binds_any_port(e.endpoint) && !endpoints.insert(e.endpoint).second)
        p.fail(node[i], "duplicate endpoint " + e.endpoint, "endpoint");
      if (e.id != static_cast<int>(i))
        p.fail(node[i], "peer ids must be 0..n-1 in order; expected " + std::to_string(i), "id");
      p.finish();
      cfg.peers.list.push_back(e);
    }
    if (cfg.peers.list.empty()) top.fail(node, "needs at least one peer", "peers");
    return;
  }
  MapReader p(node, top.file(), "peers");
  if (p.has("hosts")) return parse_cluster_peers(p, node, cfg);
  int count = 1;
  std::string host = "127.0.0.1";
  int base_port = 0;
  std::string ipc_dir;
  if (!p.has("count")) p.fail(node, "missing field 'count' (or 'hosts': slurm, mpi or a host file)");
  p.read_number("count", count, 1, 4096);
  p.read_string("host", host);
  p.read_number("base_port", base_port, 0, 65535);
  p.read_string("ipc_dir", ipc_dir);
  if (base_port != 0 && base_port + count - 1 > 65535) p.fail(p.get("base_port"), "base_port + count exceeds 65535", "base_port");
  if (!ipc_dir.empty() && base_port != 0) p.fail(node, "give either base_port or ipc_dir, not both");
  p.finish();
  for (int i = 0; i < count; ++i) {
    std::string ep = !ipc_dir.empty() ? "ipc://" + peer_path(ipc_dir, i)
                                      : "tcp://" + host + ":" + std::to_string(base_port ? base_port + i : 0);
    if (std::optional<std::string> why = endpoint_problem(ep))
      p.fail(p.has("host") ? p.get("host") : node, "endpoint " + escape_for_log(ep) + " " + *why, "host");
    cfg.peers.list.push_back({i, ep});
  }
}

void parse_topology(MapReader& top, RunConfig& cfg) {
  cfg.topology.seed = cfg.seed;  // random matchings: every peer draws the same ones
  if (!top.has("topology")) return;
  YAML::Node node = top.get("topology");
  auto kind_of = [&](const YAML::Node& at, const std::string& name, const std::string& field) {
    try {
      return topology::parse_kind(name);
    } catch (const Error& e) {
      top.fail(at, std::string(e.what()).substr(std::string("topology: ").size()), field);
    }
  };
  if (node.IsScalar()) {
    cfg.topology.kind = kind_of(node, node.Scalar(), "topology");
    if (cfg.topology.kind == topology::Kind::kEdgeList) top.fail(node, "edge_list needs a mapping with 'edges'", "topology");
    return;
  }
  MapReader t(node, top.file(), "topology");
  std::string kind;
  if (!t.has("kind")) t.fail(node, "missing field 'kind'");
  t.read_string("kind", kind);
  cfg.topology.kind = kind_of(t.get("kind"), kind, "topology.kind");
  t.read_number("rows", cfg.topology.torus_rows, 0, 1 << 20);
  if (t.has("edges")) {
    YAML::Node edges = t.get("edges");
    if (!edges.IsSequence()) t.fail(edges, "expected a list of [a, b] pairs", "edges");
    for (size_t i = 0; i < edges.size(); ++i) {
      const YAML::Node& e = edges[i];
      if (!e.IsSequence() || e.size() != 2)
        t.fail(e, "edge " + std::to_string(i) + " must be a pair [a, b]", "edges");
      try {
        cfg.topology.edges.push_back({e[0].as<int>(), e[1].as<int>()});
      } catch (const YAML::Exception&) {
        t.fail(e, "edge " + std::to_string(i) + " must hold two integers", "edges");
      }
    }
  } else if (cfg.topology.kind == topology::Kind::kEdgeList) {
    t.fail(node, "edge_list needs 'edges'");
  }
  t.finish();
  if (cfg.topology.kind == topology::Kind::kEdgeList) {
    try {
      topology::validate_edge_list(cfg.topology.edges, cfg.peers.count());
    } catch (const Error& e) {
      t.fail(t.get("edges"), e.what(), "edges");
    }
  }
  if (cfg.topology.kind == topology::Kind::kTorus) {
    try {
      topology::torus_shape(cfg.topology, cfg.peers.count());
    } catch (const Error& e) {
      t.fail(node, e.what(), "rows");
    }
  }
}

// CHOCO-SGD's fields (and a clear error for them under another kind).
void parse_choco(MapReader& r, AlgorithmConfig& a, const std::string& kind) {
  r.read_choice("compressor", a.compressor,
                {{"top_k", Dtype::kTopK}, {"random_k", Dtype::kRandomK}, {"sign", Dtype::kSign}, {"int8", Dtype::kInt8}});
  r.read_number("ratio", a.ratio, 1e-9, 1);
  r.read_number("consensus_step", a.consensus_step, 1e-9, 1);
  if (kind != "choco")
    for (const char* f : {"compressor", "ratio", "consensus_step"})
      if (r.has(f)) r.fail(r.get(f), std::string(f) + " is for kind: choco", f);
  // A top-k chunk is an index and a value per kept value: beyond one half it outgrows the values.
  if (a.compressor == Dtype::kTopK && a.ratio > 0.5) r.fail(r.get("ratio"), "top_k keeps at most half (ratio <= 0.5)", "ratio");
  if (r.has("ratio") && a.compressor != Dtype::kTopK && a.compressor != Dtype::kRandomK)
    r.fail(r.get("ratio"), "ratio is for the top_k and random_k compressors", "ratio");
}

void parse_algorithm(MapReader& top, RunConfig& cfg) {
  if (!top.has("algorithm")) return;
  YAML::Node node = top.get("algorithm");
  AlgorithmConfig& a = cfg.algorithm;
  std::string kind = "none";
  bool chunk_given = false;
  if (node.IsScalar()) {
    kind = node.Scalar();
  } else {
    MapReader r(node, top.file(), "algorithm");
    r.read_string("kind", kind);
    r.read_number("global_average_every", a.global_average_every, 0, 1e9);
    r.read("overlap", a.overlap, "true or false");
    if (r.has("max_staleness") && r.get("max_staleness").IsScalar() && r.get("max_staleness").Scalar() == "unbounded") {
      if (!a.overlap) r.fail(r.get("max_staleness"), "'unbounded' (never wait) needs overlap: true", "max_staleness");
      a.max_staleness = -1;
    } else {
      r.read_number("max_staleness", a.max_staleness, 0, 1000);
    }
    r.read_number("timeout_s", a.timeout_s, 0.1, 86400);
    r.read_number("heartbeat_s", a.heartbeat_s, 0, 60);
    r.read_number("dead_after_s", a.dead_after_s, 0.1, 86400);
    r.read_number("watchers", a.watchers, 0, 1 << 20);
    r.read_number("indirect_probes", a.indirect_probes, 0, 64);
    chunk_given = r.has("chunk_bytes");
    r.read_number("chunk_bytes", a.chunk_bytes, 4096, 1 << 30);
    r.read_number("max_norm_ratio", a.max_norm_ratio, 0, 1e30);
    r.read_choice("wire", a.wire, {{"f32", Dtype::kF32}, {"bf16", Dtype::kBf16}, {"int8", Dtype::kInt8}});
    r.read("single_copy", a.single_copy, "true or false");
    r.read_choice("checksum", a.checksum_always, {{"auto", false}, {"always", true}});
    r.read_number("inner_steps", a.inner_steps, 1, 1e9);
    r.read_number("outer_lr", a.outer_lr, 0, 100);
    r.read_number("outer_momentum", a.outer_momentum, 0, 0.999999);
    r.read_choice("outer_average", a.outer_average, {{"allreduce", OuterAverage::kAllReduce}, {"gossip", OuterAverage::kGossip}});
    r.read_number("gossip_rounds", a.gossip_rounds, 1, 1000);
    if (kind != "diloco")
      for (const char* f : {"inner_steps", "outer_lr", "outer_momentum", "outer_average", "gossip_rounds"})
        if (r.has(f)) r.fail(r.get(f), std::string(f) + " is for kind: diloco", f);
    parse_choco(r, a, kind);
    r.read("gradient_tracking", a.gradient_tracking, "true or false");
    if (a.gradient_tracking && kind != "gossip")
      r.fail(r.get("gradient_tracking"), "gradient_tracking is for kind: gossip", "gradient_tracking");
    r.finish();
  }
  static const std::pair<const char*, Algorithm> kinds[] = {{"none", Algorithm::kNone},
                                                            {"gossip", Algorithm::kGossip},
                                                            {"push_sum", Algorithm::kPushSum},
                                                            {"local_sgd", Algorithm::kLocalSgd},
                                                            {"allreduce", Algorithm::kAllReduce},
                                                            {"diloco", Algorithm::kDiloco},
                                                            {"choco", Algorithm::kChoco}};
  for (auto [name, k] : kinds)
    if (kind == name) {
      a.kind = k;
      if (k == Algorithm::kLocalSgd && a.global_average_every == 0)
        top.fail(node, "local_sgd needs global_average_every: H > 0", "algorithm");
      if (k == Algorithm::kAllReduce) a.global_average_every = 1;
      if (k == Algorithm::kDiloco && a.global_average_every > 0)
        top.fail(node["global_average_every"], "diloco averages every inner_steps steps itself", "algorithm.global_average_every");
      const bool lossy_ok = k == Algorithm::kGossip || k == Algorithm::kPushSum || k == Algorithm::kDiloco;
      if (a.wire != Dtype::kF32 && !lossy_ok)
        top.fail(node["wire"], "wire: " + dtype_name(a.wire) +
                                   " is for gossip, push_sum and diloco's average (model all-reduces stay f32)", "algorithm.wire");
      if (a.wire == Dtype::kInt8 && (k != Algorithm::kDiloco || a.outer_average != OuterAverage::kAllReduce))
        top.fail(node["wire"], "wire: int8 is for diloco's all-reduce average (int8 gossip is kind: choco, compressor: int8)",
                 "algorithm.wire");
      if (!chunk_given && (k == Algorithm::kChoco || a.wire == Dtype::kInt8)) a.chunk_bytes = kCompressedChunkBytes;
      return;
    }
  top.fail(node, "unknown algorithm '" + kind + "' (valid: none, gossip, push_sum, local_sgd, allreduce, diloco, choco)", "algorithm");
}

RunConfig parse_config_unguarded(const std::string& yaml_text, const std::string& file_name);

}  // namespace

std::string algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kNone: return "none";
    case Algorithm::kGossip: return "gossip";
    case Algorithm::kPushSum: return "push_sum";
    case Algorithm::kLocalSgd: return "local_sgd";
    case Algorithm::kAllReduce: return "allreduce";
    case Algorithm::kDiloco: return "diloco";
    case Algorithm::kChoco: return "choco";
  }
  return "?";
}

namespace {

// The shortest text that reads back as `v` (no blanks, so it fits a join request's word).
std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

std::string topology_text(const topology::Graph& g) {
  std::string text = topology::kind_name(g.kind);
  if (g.kind == topology::Kind::kTorus) text += ":rows=" + std::to_string(g.torus_rows);
  if (g.kind == topology::Kind::kRandomMatching) text += ":seed=" + std::to_string(g.seed);
  if (g.kind == topology::Kind::kEdgeList) {
    std::string edges;  // in order
    for (const auto& [a, b] : g.edges) edges += std::to_string(a) + "-" + std::to_string(b) + ",";
    text += ":edges=" + std::to_string(g.edges.size()) + "/" + std::to_string(fnv1a(edges) % 1000000007);
  }
  return text;
}

}  // namespace

std::string shared_settings(const RunConfig& cfg) {
  const AlgorithmConfig& a = cfg.algorithm;
  std::vector<std::pair<std::string, std::string>> items = {
      {"algorithm.kind", algorithm_name(a.kind)},
      {"topology", topology_text(cfg.topology)},
      {"algorithm.wire", dtype_name(a.wire)},
      {"algorithm.checksum", a.checksum_always ? "always" : "auto"},
      {"algorithm.global_average_every", std::to_string(a.global_average_every)},
      {"log_every", std::to_string(cfg.log_every)},  // progress lines and Ξ are collectives
      {"consensus_every", std::to_string(cfg.consensus_every)},
  };
  if (a.kind == Algorithm::kGossip) items.emplace_back("algorithm.gradient_tracking", a.gradient_tracking ? "true" : "false");
  if (a.kind == Algorithm::kDiloco) {
    items.emplace_back("algorithm.inner_steps", std::to_string(a.inner_steps));
    items.emplace_back("algorithm.outer_average", a.outer_average == OuterAverage::kGossip ? "gossip" : "allreduce");
    items.emplace_back("algorithm.gossip_rounds", std::to_string(a.gossip_rounds));
    items.emplace_back("algorithm.outer_lr", number_text(a.outer_lr));
    items.emplace_back("algorithm.outer_momentum", number_text(a.outer_momentum));
  }
  if (a.kind == Algorithm::kChoco) {
    std::string compressor = dtype_name(a.compressor);  // "top-k": the YAML's top_k
    std::replace(compressor.begin(), compressor.end(), '-', '_');
    items.emplace_back("algorithm.compressor", compressor);
    items.emplace_back("algorithm.ratio", number_text(a.ratio));
    items.emplace_back("algorithm.consensus_step", number_text(a.consensus_step));
  }
  // Where a chunk is the unit values are compressed in, both ends must cut them alike.
  if (a.kind == Algorithm::kChoco || a.wire == Dtype::kInt8)
    items.emplace_back("algorithm.chunk_bytes", std::to_string(a.chunk_bytes));
  std::string text;
  for (const auto& [name, value] : items) text += (text.empty() ? "" : ";") + name + "=" + value;
  return text;
}

uint64_t shared_settings_digest(const RunConfig& cfg) {
  const uint64_t h = fnv1a(shared_settings(cfg));
  return h != 0 ? h : 1;  // 0 stands for "none"
}

RunConfig parse_config(const std::string& yaml_text, const std::string& file_name) {
  // Whatever yaml-cpp throws (a parse error, a conversion the readers did not foresee) becomes an
  // Error naming the file and line.
  try {
    return parse_config_unguarded(yaml_text, file_name);
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? file_name : file_name + ":" + std::to_string(e.mark.line + 1);
    throw Error(where, (dynamic_cast<const YAML::ParserException*>(&e) ? "malformed YAML: " : "") + e.msg);
  }
}

namespace {

RunConfig parse_config_unguarded(const std::string& yaml_text, const std::string& file_name) {
  const YAML::Node root = YAML::Load(yaml_text);
  if (!root.IsDefined() || root.IsNull()) throw Error(file_name, "empty configuration");
  check_keys(root, file_name);
  RunConfig cfg;
  cfg.file = file_name;
  MapReader top(root, file_name, "");
  top.read_number("seed", cfg.seed, 0, 1.8e19);
  top.read_choice("device", cfg.device,
                  {{"auto", kernels::Device::kAuto}, {"cpu", kernels::Device::kCpu}, {"cuda", kernels::Device::kCuda}});
  top.read_number("log_every", cfg.log_every, 1, 1e9);
  top.read_number("consensus_every", cfg.consensus_every, 0, 1e9);
  top.read_number("eval_every", cfg.eval_every, 0, 1e9);
  top.read_choice("init", cfg.init, {{"same", Init::kSame}, {"per_rank", Init::kPerRank}});
  top.read_number("threads", cfg.threads, 0, 1024);
  top.read_number("trainer_nice", cfg.trainer_nice, -1, 19);
  top.read_number("device_index", cfg.device_index, -1, 1024);
  top.read_number("max_unverified_connections", cfg.max_unverified_connections, 0, 1 << 20);
  if (top.has("security")) {
    MapReader sec(top.get("security"), file_name, "security");
    if (!sec.has("keys")) sec.fail(top.get("security"), "missing field 'keys' (a directory made by gossip-keygen)");
    sec.read_string("keys", cfg.keys_dir);
    sec.finish();
  }
  if (top.has("checkpoint")) {
    MapReader ck(top.get("checkpoint"), file_name, "checkpoint");
    if (!ck.has("dir")) ck.fail(top.get("checkpoint"), "missing field 'dir' (where the checkpoints go)");
    ck.read_string("dir", cfg.checkpoint_dir);
    cfg.checkpoint_every = 100;
    ck.read_number("every", cfg.checkpoint_every, 1, 1e9);
    ck.finish();
  }
  if (top.has("metrics")) {
    MapReader m(top.get("metrics"), file_name, "metrics");
    cfg.metrics_port = 0;
    m.read_number("port", cfg.metrics_port, 0, 65535);
    m.read_string("host", cfg.metrics_host);
    m.finish();
  }
  parse_peers(top, cfg);
  parse_topology(top, cfg);
  parse_algorithm(top, cfg);
  parse_data(top, cfg);
  parse_train(top, cfg);
  top.finish();
  const bool text = cfg.data.dataset == Dataset::kText, gpt = cfg.train.model.kind == model::ModelKind::kGpt;
  if (text != gpt)
    throw Error(file_name, text ? "dataset text needs a language model (model: {kind: gpt, ...})"
                                : "model kind gpt reads text (data: {dataset: text})");
  // Reading a neighbour's memory happens outside the authenticated channel: an authenticated but
  // hostile peer could point the read at another process's memory and get it back mixed in.
  if (cfg.algorithm.single_copy && !cfg.keys_dir.empty())
    throw Error(file_name, "field 'algorithm.single_copy': not with security (a peer would read its neighbours' memory "
                           "outside the authenticated channel); use one or the other");
  // push-sum works on any column-stochastic graph, and every kind here is at least that.
  const bool gossips = cfg.algorithm.kind == Algorithm::kGossip ||
                       (cfg.algorithm.kind == Algorithm::kDiloco && cfg.algorithm.outer_average == OuterAverage::kGossip);
  if (gossips && topology::is_directed(cfg.topology.kind))
    throw Error(file_name, "field 'topology': " + topology::kind_name(cfg.topology.kind) +
                               " is only column-stochastic; use algorithm push_sum with it");
  // CHOCO's public copies are kept by the same neighbours round after round.
  if (cfg.algorithm.kind == Algorithm::kChoco && topology::period(cfg.topology, 1 << 20) != 1)
    throw Error(file_name, "field 'topology': choco keeps public copies of fixed neighbours; " +
                               topology::kind_name(cfg.topology.kind) +
                               " changes them every round (use ring, exponential, complete, torus or edge_list)");
  return cfg;
}

}  // namespace

int trainer_nice(const RunConfig& cfg, const std::string& own_endpoint, bool joiner, int cpus) {
  if (cfg.trainer_nice >= 0) return cfg.trainer_nice;
  const std::string host = endpoint_host(own_endpoint);
  int here = joiner ? 1 : 0;
  for (const PeerEntry& p : cfg.peers.list) here += endpoint_host(p.endpoint) == host;
  return here > cpus ? 10 : 0;
}

RunConfig load_config(const std::string& path) {
  return parse_config(read_whole_file(path, "cannot open configuration file"), path);
}

}  // namespace gossip::peer
