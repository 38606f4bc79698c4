// The run configuration, parsed once from YAML into plain structs. Defaults live in the member
// initialisers; every field is validated and errors name the file, line and field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/endpoint.h"
#include "kernels/backend.h"
#include "model/data_cache.h"
#include "model/optimizer.h"
#include "model/presets.h"
#include "model/schedule.h"
#include "wire/wire_format.h"
#include "topology/topology.h"

namespace YAML {
class Node;
}

namespace gossip::peer {

struct PeerEntry {
  int id = 0;
  std::string endpoint;  // tcp://host:port (port 0 = any free port, found through rendezvous) or ipc://path
};

struct PeersConfig {
  std::vector<PeerEntry> list;  // one entry per peer, ids 0..n-1 in order
  int count() const { return static_cast<int>(list.size()); }
};

enum class Algorithm { kNone, kGossip, kPushSum, kLocalSgd, kAllReduce, kDiloco, kChoco };
enum class OuterAverage { kAllReduce, kGossip };  // DiLoCo: how the pseudo-gradients are averaged

// Payload frames are kChunkBytes (wire_format.h) by default. Where a chunk is also the unit values
// are compressed in (CHOCO's compressors, the int8 all-reduce's scales) the default stays 1 MiB,
// which the results published for them were measured with.
inline constexpr int64_t kCompressedChunkBytes = 1 << 20;

struct AlgorithmConfig {
  Algorithm kind = Algorithm::kNone;  // none = independent training (single peer)
  int global_average_every = 0;       // H > 0: exact global average after every H-th step (Gossip-PGA)
  bool overlap = false;               // push-sum: fold late messages in later rounds (up to max_staleness) instead of waiting
  int max_staleness = 2;              // overlap: rounds a neighbour's message may lag before we wait (-1: never)
  double timeout_s = 60;              // a neighbour silent this long is reported as dead
  double heartbeat_s = 0.25;          // each member heartbeats its watchers this often
  double dead_after_s = 3;            // a member with no heartbeat this long is removed from the run
  int watchers = 3;                   // members that heartbeat-watch each member (0: all of them)
  int indirect_probes = 3;            // others asked about a silent member before it is suspected (0: none)
  int64_t chunk_bytes = static_cast<int64_t>(kChunkBytes);  // payload frames are at most this large (kCompressedChunkBytes: choco, int8)
  double max_norm_ratio = 10;         // gossip: a neighbour's values this many times our norm are not mixed (0 = off)
  Dtype wire = Dtype::kF32;           // values travel as f32 (exact), bf16 (half the bytes; gossip, push-sum,
                                      // diloco) or int8 (a quarter; diloco's all-reduce average)
  // Peers on one host copy each other's vectors straight out of the sender's memory
  // (process_vm_readv): one copy instead of the socket's two, and no checksum pass; a gossip
  // peer's parameters live in shared regions its neighbours map and fold from in place (no copy).
  // Where a neighbour cannot be read (another host, no ptrace permission) its values come over the socket.
  bool single_copy = false;
  // Payload checksums (CRC32C): `auto` skips them for vector chunks over links that keep bytes
  // intact by themselves (loopback, ipc://, CurveZMQ); `always` checksums every payload and
  // refuses unchecked ones — the same on every peer, like `wire`.
  bool checksum_always = false;
  // DiLoCo: `inner_steps` local steps, then the pseudo-gradients averaged by `outer_average`
  // (allreduce: exact; gossip: `gossip_rounds` rounds on the topology) and an outer Nesterov step.
  int inner_steps = 50;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  OuterAverage outer_average = OuterAverage::kAllReduce;
  int gossip_rounds = 1;
  // CHOCO-SGD: q = Q(x − x̂) with `compressor` (kTopK, kRandomK: k = ratio·values; kSign, kInt8),
  // then x ← x + consensus_step·Σ_j W_ij·(x̂_j − x̂_i).
  Dtype compressor = Dtype::kTopK;
  double ratio = 0.01;
  double consensus_step = 0.05;
  // gossip: the optimiser steps along a tracker of the peers' average gradient, gossiped beside
  // the model (DSGT; algorithms/gradient_tracking.h).
  bool gradient_tracking = false;
};

enum class Dataset { kFashionMnist, kSynthetic, kText };  // YAML: fashion-mnist | synthetic | text
enum class Sharding { kIid, kDirichlet };          // YAML: iid | dirichlet
enum class Init { kSame, kPerRank };               // YAML: same | per_rank

struct DataConfig {
  Dataset dataset = Dataset::kFashionMnist;
  std::string dir = "/usr/share/datasets/fashion-mnist";  // text: model::kFortunesDir unless given
  std::vector<std::string> text_files;            // dataset=text: these files in order (instead of dir's)
  Sharding sharding = Sharding::kIid;
  double dirichlet_alpha = 0.5;                   // sharding=dirichlet: concentration
  int64_t limit_train = 0;                        // use only the first N training rows (0 = all)
  // Where the decompressed data set is cached for the peers of a host to share (model/data_cache.h);
  // YAML "none" (stored empty): each peer decompresses into private memory.
  std::string cache_dir = model::default_cache_dir();
  int synthetic_train = 4000;                     // dataset=synthetic: rows
  int synthetic_test = 1000;
  int synthetic_dims = 32;
  int synthetic_classes = 4;
  double synthetic_noise = 1.0;                   // standard deviation around each class centre
};

struct TrainConfig {
  model::ModelConfig model;              // YAML model: (kind mlp | cnn | gpt and their sizes)
  int batch = 64;                        // per-peer batch size (rows; windows for text)
  double epochs = 3;                     // passes over the peer's shard (fractions allowed)
  int64_t steps = 0;                     // when > 0: this many steps, whatever `epochs` says
  model::OptimizerConfig optimizer;      // momentum 0.9 by default
  model::ScheduleConfig schedule;        // constant lr 0.05 by default
};

struct RunConfig {
  std::string file;                  // where the config came from (for messages)
  uint64_t seed = 1;                 // model init, shuffles and sharding derive from it
  kernels::Device device = kernels::Device::kAuto;  // YAML: auto | cpu | cuda
  int log_every = 100;               // steps between progress lines (with the consensus distance)
  int consensus_every = 0;           // also log Ξ every this many steps (0 = only at progress lines)
  int eval_every = 0;                // log the local model's test accuracy every this many steps (0 = only at the end)
  int device_index = -1;             // the CUDA device; -1 = local rank (LOCAL_RANK, SLURM_LOCALID, ...) modulo the visible devices
  int threads = 0;                   // BLAS threads per peer; 0 = 1 when several peers share the host, else all
  // The training thread runs this many nice levels below the peer's communication threads
  // (heartbeats, probes, exchanges); -1 = 10 when more of the run's peers share this host than it
  // has CPUs, else 0.
  int trainer_nice = -1;
  Init init = Init::kSame;           // identical or per-peer initial models
  int metrics_port = -1;             // Prometheus /metrics: -1 off, 0 any free port, P: P + rank
  std::string metrics_host = "127.0.0.1";
  std::string keys_dir;              // CurveZMQ: peer-R.key / *.pub directory (empty = no encryption)
  std::string checkpoint_dir;        // checkpoints go here (shared by the peers: files are per rank)
  int checkpoint_every = 0;          // steps between checkpoints (0 = none)
  double slowdown = 1;               // benchmarks (--slowdown): each step takes this many times longer
  double min_step_ms = 0;            // tests, benchmarks (--min-step-ms): each step takes at least this long
  // Without security: connections that sent no valid message yet, beyond this many, are closed
  // (a client holding thousands open costs memory and descriptors); 0 = no cap.
  int max_unverified_connections = 256;
  PeersConfig peers;
  topology::Graph topology;
  AlgorithmConfig algorithm;
  DataConfig data;
  TrainConfig train;
};

// Throws gossip::Error with "file:line: field 'a.b': problem" on any bad input.
RunConfig load_config(const std::string& path);
RunConfig parse_config(const std::string& yaml_text, const std::string& file_name);

std::string algorithm_name(Algorithm a);

// One peer's overrides of the YAML (gossip-peer's and gossip-launch's flags, gossip::PeerOptions).
struct ConfigOverrides {
  std::string device;              // "auto", "cpu" or "cuda" ("": the YAML's)
  std::optional<double> epochs;    // optimizer.epochs, in its range 0..1e6
  double slowdown = 1;             // 1..1000
  double min_step_ms = 0;          // 0..60000
};
// Applies `o` to `cfg`; an override out of its range is a gossip::Error from `who`, naming it.
void apply_overrides(RunConfig& cfg, const ConfigOverrides& o, const std::string& who);

// The settings every peer of a run must have alike for their exchanges to work and their models
// to stay one (algorithm, topology, wire format, checksum setting, the steps of the collectives,
// the algorithm's own parameters): "name=value" items joined by ';', no blanks, named as in the
// YAML. A joiner sends them with its request and is refused where they differ from the run's.
std::string shared_settings(const RunConfig& cfg);
// A nonzero 64-bit digest of shared_settings, which every heartbeat carries (static peers started
// with different YAMLs see it in each other's heartbeats).
uint64_t shared_settings_digest(const RunConfig& cfg);

// How many nice levels below its communication threads the training thread of the peer at
// `own_endpoint` runs (a joiner's endpoint is not in the list): cfg.trainer_nice, or when that is
// -1, 10 when more of the run's peers share that endpoint's host than `cpus`, else 0.
int trainer_nice(const RunConfig& cfg, const std::string& own_endpoint, bool joiner, int cpus);

using gossip::binds_any_port;  // common/endpoint.h

}  // namespace gossip::peer
