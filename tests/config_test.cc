#include "peer/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"

namespace gossip::peer {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "test.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsForAnEmptyMapping) {
  RunConfig c = parse_config("seed: 3", "t.yaml");
  EXPECT_EQ(c.seed, 3u);
  EXPECT_EQ(c.peers.count(), 1);
  EXPECT_EQ(c.train.batch, 64);
  EXPECT_EQ(c.train.model.hidden, (std::vector<int>{256, 256}));
  EXPECT_EQ(c.algorithm.kind, Algorithm::kNone);
}

TEST(Config, Watchers) {
  EXPECT_EQ(parse_config("seed: 3", "t.yaml").algorithm.watchers, 3);
  EXPECT_EQ(parse_config("algorithm: {kind: gossip, watchers: 0}", "t.yaml").algorithm.watchers, 0);
  EXPECT_NE(error_of("algorithm: {kind: gossip, watchers: -1}").find("watchers"), std::string::npos);
}

TEST(Config, WatchersAndIndirectProbes) {
  EXPECT_EQ(parse_config("seed: 3", "t.yaml").algorithm.indirect_probes, 3);
  EXPECT_EQ(parse_config("algorithm: {kind: gossip, indirect_probes: 0}", "t.yaml").algorithm.indirect_probes, 0);
  EXPECT_NE(error_of("algorithm: {kind: gossip, indirect_probes: -2}").find("indirect_probes"), std::string::npos);
}

// Cluster peers: the endpoints come from the job's environment (here Open MPI's on one host and
// Slurm's on two), each rank at base_port + its index on its host.
TEST(Config, PeersFromTheClustersHostList) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  const RunConfig mpi = parse_config("peers: {hosts: mpi, base_port: 29500}", "t.yaml");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ASSERT_EQ(mpi.peers.count(), 3);
  EXPECT_EQ(mpi.peers.list[2].endpoint, "tcp://127.0.0.1:29502");
  ::setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
  ::setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
  const RunConfig slurm = parse_config("peers: {hosts: slurm, base_port: 7000, count: 4}", "t.yaml");
  const std::string wrong_count = error_of("peers: {hosts: slurm, base_port: 7000, count: 5}");
  ::unsetenv("SLURM_JOB_NODELIST");
  ::unsetenv("SLURM_TASKS_PER_NODE");
  ASSERT_EQ(slurm.peers.count(), 4);
  EXPECT_EQ(slurm.peers.list[1].endpoint, "tcp://n1:7001");
  EXPECT_EQ(slurm.peers.list[2].endpoint, "tcp://n2:7000");
  EXPECT_NE(wrong_count.find("the job has 4 ranks"), std::string::npos) << wrong_count;
  const std::string outside = error_of("seed: 1\npeers: {hosts: slurm, base_port: 7000}");
  EXPECT_NE(outside.find("test.yaml:2"), std::string::npos) << outside;
  EXPECT_NE(outside.find("SLURM_JOB_NODELIST is not set"), std::string::npos) << outside;
  EXPECT_NE(error_of("peers: {hosts: mpi}").find("base_port"), std::string::npos);
  EXPECT_NE(error_of("peers: {hosts: /nonexistent/hosts.txt, base_port: 1}").find("/nonexistent/hosts.txt"),
            std::string::npos);
}

// The training thread yields to the communication threads where the peers on its host outnumber
// the CPUs (auto), or as far as the YAML says.
TEST(Config, TrainerNiceCountsThePeersOnTheHost) {
  const RunConfig four = parse_config("peers: {count: 4, host: 127.0.0.1, base_port: 0}", "t.yaml");
  EXPECT_EQ(four.trainer_nice, -1);
  EXPECT_EQ(trainer_nice(four, four.peers.list[0].endpoint, false, 2), 10);
  EXPECT_EQ(trainer_nice(four, four.peers.list[0].endpoint, false, 4), 0);
  EXPECT_EQ(trainer_nice(four, "tcp://127.0.0.1:0", true, 4), 10);  // a joiner is one more
  EXPECT_EQ(trainer_nice(four, "tcp://10.0.0.9:5000", true, 1), 0);  // alone on its host
  RunConfig hosts = parse_config("peers: [{id: 0, endpoint: tcp://n1:7000}, {id: 1, endpoint: tcp://n1:7001}, "
                                 "{id: 2, endpoint: tcp://n2:7000}, {id: 3, endpoint: ipc:///tmp/p3}]",
                                 "t.yaml");
  EXPECT_EQ(trainer_nice(hosts, "tcp://n1:7000", false, 1), 10);
  EXPECT_EQ(trainer_nice(hosts, "tcp://n1:7000", false, 2), 0);
  EXPECT_EQ(trainer_nice(hosts, "tcp://n2:7000", false, 1), 0);
  EXPECT_EQ(trainer_nice(hosts, "ipc:///tmp/p3", false, 1), 0);
  hosts.trainer_nice = 5;
  EXPECT_EQ(trainer_nice(hosts, "tcp://n2:7000", false, 64), 5);
  EXPECT_EQ(parse_config("trainer_nice: 0", "t.yaml").trainer_nice, 0);
  EXPECT_NE(error_of("trainer_nice: 20").find("trainer_nice"), std::string::npos);
  EXPECT_NE(error_of("trainer_nice: -2").find("trainer_nice"), std::string::npos);
}

TEST(Config, DataCacheDirectory) {
  ::setenv("GOSSIP_CACHE_DIR", "/tmp/from-env", 1);
  EXPECT_EQ(parse_config("seed: 3", "t.yaml").data.cache_dir, "/tmp/from-env");
  ::unsetenv("GOSSIP_CACHE_DIR");
  EXPECT_EQ(parse_config("data: {cache_dir: /tmp/c}", "t.yaml").data.cache_dir, "/tmp/c");
  EXPECT_EQ(parse_config("data: {cache_dir: none}", "t.yaml").data.cache_dir, "");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(parse_config("data: {cache_dir: ~/c}", "t.yaml").data.cache_dir, "/home/u/c");
  ::setenv("HOME", home.c_str(), 1);
}

TEST(Config, FullConfig) {
  RunConfig c = parse_config(R"(
peers: {count: 4, host: 127.0.0.1, base_port: 29500}
topology: {kind: torus, rows: 2}
algorithm: {kind: gossip, global_average_every: 6}
model: {hidden: [32, 16]}
data: {dataset: synthetic, sharding: dirichlet, dirichlet_alpha: 0.1, synthetic: {train: 100, test: 10, dims: 4, classes: 3}}
optimizer: {lr: 0.1, momentum: 0.5, nesterov: true, label_smoothing: 0.1, batch: 8, epochs: 2, schedule: {kind: step, step_every: 10, gamma: 0.5}}
)", "t.yaml");
  EXPECT_EQ(c.peers.count(), 4);
  EXPECT_EQ(c.peers.list[3].endpoint, "tcp://127.0.0.1:29503");
  EXPECT_EQ(c.topology.kind, topology::Kind::kTorus);
  EXPECT_EQ(c.topology.torus_rows, 2);
  EXPECT_EQ(c.algorithm.global_average_every, 6);
  EXPECT_EQ(c.train.model.hidden, (std::vector<int>{32, 16}));
  EXPECT_EQ(c.data.synthetic_classes, 3);
  EXPECT_TRUE(c.train.optimizer.nesterov);
  EXPECT_EQ(c.train.optimizer.label_smoothing, 0.1);
  EXPECT_EQ(c.train.schedule.kind, model::ScheduleKind::kStep);
}

// Each malformed input gives one error naming file, line and field.
struct BadCase {
  const char* yaml;
  const char* must_contain;
};

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, NamesFileLineAndField) {
  std::string e = error_of(GetParam().yaml);
  ASSERT_FALSE(e.empty()) << "accepted: " << GetParam().yaml;
  EXPECT_NE(e.find("test.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find(GetParam().must_contain), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfig,
    ::testing::Values(
        BadCase{"seed: 1\noptimizer: {lr: fast}\n", "optimizer.lr"},
        BadCase{"seed: 1\noptimizer:\n  learning_rte: 0.1\n", "optimizer.learning_rte"},
        BadCase{"topology: hypercube\n", "unknown topology 'hypercube'"},
        BadCase{"algorithm: {kind: push_sum, max_staleness: unbounded}\n", "needs overlap: true"},
        BadCase{"peers: {count: 0}\n", "peers.count"},
        BadCase{"peers:\n  - {id: 0, endpoint: tcp://127.0.0.1:5000}\n  - {id: 0, endpoint: tcp://127.0.0.1:5001}\n",
                "duplicate peer id"},
        BadCase{"peers:\n  - {endpoint: tcp://127.0.0.1:5000}\n  - {endpoint: tcp://127.0.0.1:5000}\n",
                "duplicate endpoint"},
        BadCase{"peers:\n  - {endpoint: udp://x}\n", "must start with tcp:// or ipc://"},
        BadCase{"peers:\n  - {endpoint: \"tcp://127.0.0.1:70000\"}\n", "peers[0].endpoint': endpoint 'tcp://127.0.0.1:70000' has port '70000'"},
        BadCase{"peers: {count: 2, host: \"node 1\", base_port: 5000}\n", "field 'peers.host': endpoint tcp://node 1:5000 has a malformed host 'node 1'"},
        BadCase{"peers: {host: x}\n", "missing field 'count'"},
        BadCase{"algorithm: telepathy\n", "unknown algorithm"},
        BadCase{"algorithm: local_sgd\n", "global_average_every"},
        BadCase{"model: {hidden: [10, -3]}\n", "model.hidden"},
        BadCase{"device: tpu\n", "field 'device'"},
        BadCase{"device_index: -2\n", "device_index"},
        BadCase{"algorithm: {kind: gossip, inner_steps: 5}\n", "inner_steps is for kind: diloco"},
        BadCase{"algorithm: {kind: diloco, global_average_every: 5}\n", "diloco averages every inner_steps"},
        BadCase{"algorithm: {kind: diloco, outer_average: median}\n", "algorithm.outer_average"},
        BadCase{"algorithm: {kind: gossip, compressor: sign}\n", "compressor is for kind: choco"},
        BadCase{"algorithm: {kind: choco, compressor: zip}\n", "algorithm.compressor"},
        BadCase{"algorithm: {kind: choco, ratio: 0.7}\n", "top_k keeps at most half"},
        BadCase{"algorithm: {kind: choco, compressor: sign, ratio: 0.1}\n", "ratio is for the top_k and random_k"},
        BadCase{"algorithm: {kind: choco, consensus_step: 0}\n", "algorithm.consensus_step"},
        BadCase{"topology: one_peer_exponential\nalgorithm: choco\n", "choco keeps public copies of fixed neighbours"},
        BadCase{"topology: random_matching\nalgorithm: choco\n", "random_matching changes them every round"},
        BadCase{"algorithm: {kind: push_sum, gradient_tracking: true}\n", "gradient_tracking is for kind: gossip"},
        BadCase{"algorithm: {kind: gossip, gradient_tracking: 1.5}\n", "algorithm.gradient_tracking"},
        BadCase{"seed: [1, 2\n", "malformed YAML"},
        BadCase{"peers: {count: 3}\ntopology: {kind: edge_list, edges: [[0, 1]]}\n", "disconnected"},
        BadCase{"peers: {count: 3}\ntopology: {kind: edge_list, edges: [[0, 1], [1, 7]]}\n", "outside"},
        BadCase{"peers: {count: 6}\ntopology: {kind: torus, rows: 4}\n", "does not divide"},
        BadCase{"peers: {count: 4}\ntopology: push_sum_one_peer_exponential\nalgorithm: gossip\n", "push_sum"},
        BadCase{"data: {sharding: random}\n", "data.sharding"},
        BadCase{"optimizer: {kind: adam}\n", "field 'optimizer.kind': 'adam' is not one of sgd, adamw"},
        BadCase{"optimizer: {kind: adamw, beta2: 1.5}\n", "optimizer.beta2"},
        BadCase{"optimizer: {label_smoothing: 1}\n", "optimizer.label_smoothing"},
        BadCase{"checkpoint: {every: 10}\n", "missing field 'dir'"},
        BadCase{"checkpoint: {dir: /tmp/x, every: 0}\n", "checkpoint.every"},
        BadCase{"algorithm: {kind: gossip, dead_after_s: soon}\n", "algorithm.dead_after_s"},
        BadCase{"algorithm: {kind: gossip, max_norm_ratio: -1}\n", "algorithm.max_norm_ratio"},
        BadCase{"algorithm: {kind: gossip, wire: fp8}\n", "'fp8' is not one of f32, bf16"},
        BadCase{"algorithm: {kind: local_sgd, global_average_every: 4, wire: bf16}\n", "algorithm.wire"},
        BadCase{"algorithm: {kind: gossip, single_copy: maybe}\n", "algorithm.single_copy"},
        BadCase{"security: {keys: /tmp/k}\nalgorithm: {kind: gossip, single_copy: true}\n", "'algorithm.single_copy': not with security"},
        BadCase{"data: {dataset: synthetic, synthetic: {noise: loud}}\n", "data.synthetic.noise"},
        BadCase{"model: {kind: transformer}\n", "field 'model.kind': 'transformer' is not one of mlp, cnn, gpt"},
        BadCase{"model: {kind: cnn, hidden: [32]}\n", "field 'model.hidden': is for kind mlp models"},
        BadCase{"model: {kind: mlp, heads: 2}\n", "field 'model.heads': is for kind gpt models"},
        BadCase{"model: {kind: cnn, net: vgg}\n", "model.net"},
        BadCase{"model: {kind: cnn, net: resnet, width: 12, groups: 8}\n", "groups (8) must divide width (12)"},
        BadCase{"model: {kind: cnn, net: resnet, blocks: 0}\n", "blocks"},
        BadCase{"model: {kind: gpt, blocks: 2}\n", "is for kind cnn models"},
        BadCase{"model: {kind: mlp, zero_init_residual: true}\n", "is for kind cnn models"},
        BadCase{"model: {kind: cnn, net: resnet, zero_init_residual: 2}\n", "true or false"},
        BadCase{"model: {kind: gpt, weight_standardization: true}\n", "is for kind cnn models"},
        BadCase{"model: {kind: cnn, net: resnet, weight_standardization: yes please}\n", "true or false"},
        BadCase{"model: {kind: gpt, heads: 3}\ndata: {dataset: text}\n", "3 heads do not divide dim 128"},
        BadCase{"model: {kind: gpt}\n", "model kind gpt reads text"},
        BadCase{"data: {dataset: text}\n", "dataset text needs a language model"},
        BadCase{"data: {dataset: fashion-mnist, files: [a.txt]}\n", "field 'data.files': is for dataset text"},
        BadCase{"data: {dataset: text, files: []}\nmodel: {kind: gpt}\n", "non-empty list"},
        BadCase{"data: {dataset: text, dir: /x, files: [a]}\nmodel: {kind: gpt}\n", "either dir or files"},
        BadCase{"optimizer: {steps: -5}\n", "optimizer.steps"}));

TEST(Config, ModelPresetsAndTextData) {
  const RunConfig c = parse_config(
      "model: {kind: gpt, layers: 2, heads: 2, dim: 64, context: 32}\ndata: {dataset: text}\n"
      "optimizer: {kind: adamw, steps: 300}\n", "t.yaml");
  EXPECT_EQ(c.train.model.kind, model::ModelKind::kGpt);
  EXPECT_EQ(c.train.model.layers, 2);
  EXPECT_EQ(c.train.model.heads, 2);
  EXPECT_EQ(c.train.model.dim, 64);
  EXPECT_EQ(c.train.model.context, 32);
  EXPECT_EQ(c.train.steps, 300);
  EXPECT_EQ(c.data.dataset, Dataset::kText);
  EXPECT_EQ(c.data.dir, "/usr/share/games/fortunes");  // Debian's fortunes unless given
  const RunConfig files = parse_config("model: {kind: gpt}\ndata: {dataset: text, files: [b.txt, a.txt]}\n", "t.yaml");
  EXPECT_EQ(files.data.text_files, (std::vector<std::string>{"b.txt", "a.txt"}));  // in the order given
  const RunConfig cnn = parse_config("model: {kind: cnn, net: resnet, width: 32, groups: 4}\n", "t.yaml");
  EXPECT_EQ(cnn.train.model.net, model::CnnNet::kResNet);
  EXPECT_EQ(cnn.train.model.width, 32);
  EXPECT_EQ(cnn.train.model.groups, 4);
  EXPECT_EQ(cnn.train.model.blocks, 1);
  EXPECT_EQ(parse_config("model: {kind: cnn, net: resnet, blocks: 3}\n", "t.yaml").train.model.blocks, 3);
  EXPECT_FALSE(cnn.train.model.zero_init_residual);
  EXPECT_TRUE(parse_config("model: {kind: cnn, net: resnet, zero_init_residual: true}\n", "t.yaml")
                  .train.model.zero_init_residual);
  EXPECT_FALSE(cnn.train.model.weight_standardization);
  EXPECT_TRUE(parse_config("model: {kind: cnn, net: resnet, weight_standardization: true}\n", "t.yaml")
                  .train.model.weight_standardization);
  EXPECT_EQ(parse_config("seed: 1\n", "t.yaml").train.model.kind, model::ModelKind::kMlp);
}

// yaml-cpp keeps both entries of a duplicated key and its lookups see the first, so an override
// appended at the end of a file would be ignored: refused, naming both lines.
TEST(Config, DuplicateKeysNameBothLines) {
  const std::string e = error_of("seed: 1\noptimizer:\n  lr: 0.1\n  batch: 32\n  lr: 0.5\n");
  EXPECT_NE(e.find("test.yaml:5: duplicate key 'lr' (first at line 3)"), std::string::npos) << e;
  const std::string top = error_of("seed: 1\nlog_every: 5\nseed: 2\n");
  EXPECT_NE(top.find("test.yaml:3: duplicate key 'seed' (first at line 1)"), std::string::npos) << top;
  const std::string listed = error_of("peers:\n  - {id: 0, endpoint: tcp://a:1, id: 0}\n");
  EXPECT_NE(listed.find("test.yaml:2: duplicate key 'id'"), std::string::npos) << listed;
}

TEST(Config, NanAndInfinityAreNotNumbers) {
  for (const char* bad : {".nan", ".NaN", ".inf", "-.inf"}) {
    const std::string e = error_of(std::string("seed: 1\noptimizer: {lr: ") + bad + "}\n");
    EXPECT_NE(e.find("test.yaml:2: field 'optimizer.lr': '" + std::string(bad) + "' is not a finite number"),
              std::string::npos) << e;
  }
  const std::string e = error_of("algorithm: {kind: gossip, timeout_s: .inf}\n");
  EXPECT_NE(e.find("algorithm.timeout_s"), std::string::npos) << e;
}

TEST(Config, AComplexKeyIsAnErrorWithItsLine) {
  const std::string e = error_of("seed: 1\noptimizer:\n  ? {lr: 1}\n  : 2\n");
  EXPECT_NE(e.find("test.yaml:3: a key must be a plain name"), std::string::npos) << e;
  const std::string list = error_of("seed: 1\n[a, b]: 3\n");
  EXPECT_NE(list.find("test.yaml:2:"), std::string::npos) << list;
}

TEST(Config, SingleCopyIsOffUnlessAsked) {
  EXPECT_FALSE(parse_config("algorithm: gossip", "t.yaml").algorithm.single_copy);
  EXPECT_TRUE(parse_config("algorithm: {kind: push_sum, single_copy: true}", "t.yaml").algorithm.single_copy);
}

TEST(Config, PayloadChecksumsAreAutoUnlessAlways) {
  EXPECT_FALSE(parse_config("algorithm: gossip", "t.yaml").algorithm.checksum_always);
  EXPECT_FALSE(parse_config("algorithm: {kind: gossip, checksum: auto}", "t.yaml").algorithm.checksum_always);
  EXPECT_TRUE(parse_config("algorithm: {kind: push_sum, checksum: always}", "t.yaml").algorithm.checksum_always);
  EXPECT_NE(error_of("algorithm: {kind: gossip, checksum: never}").find("field 'algorithm.checksum': 'never' is not one of auto, always"),
            std::string::npos)
      << error_of("algorithm: {kind: gossip, checksum: never}");
}

TEST(Config, ChunksAre4MiBExceptWhereTheyAreTheUnitOfCompression) {
  EXPECT_EQ(parse_config("algorithm: gossip", "t.yaml").algorithm.chunk_bytes, 4 << 20);
  EXPECT_EQ(parse_config("algorithm: {kind: push_sum, wire: bf16}", "t.yaml").algorithm.chunk_bytes, 4 << 20);
  EXPECT_EQ(parse_config("algorithm: {kind: diloco}", "t.yaml").algorithm.chunk_bytes, 4 << 20);
  EXPECT_EQ(parse_config("algorithm: {kind: diloco, wire: int8}", "t.yaml").algorithm.chunk_bytes, 1 << 20);
  EXPECT_EQ(parse_config("algorithm: {kind: choco}", "t.yaml").algorithm.chunk_bytes, 1 << 20);
  EXPECT_EQ(parse_config("algorithm: {kind: choco, chunk_bytes: 65536}", "t.yaml").algorithm.chunk_bytes, 65536);
  EXPECT_EQ(parse_config("algorithm: {kind: gossip, chunk_bytes: 1048576}", "t.yaml").algorithm.chunk_bytes, 1 << 20);
}

TEST(Config, WireDefaultsToF32AndTakesBf16ForGossip) {
  EXPECT_EQ(parse_config("algorithm: gossip", "t.yaml").algorithm.wire, Dtype::kF32);
  EXPECT_EQ(parse_config("algorithm: {kind: gossip, wire: bf16, global_average_every: 6}", "t.yaml").algorithm.wire,
            Dtype::kBf16);
  EXPECT_EQ(parse_config("algorithm: {kind: push_sum, wire: bf16}", "t.yaml").algorithm.wire, Dtype::kBf16);
  EXPECT_EQ(parse_config("algorithm: {kind: diloco, wire: bf16}", "t.yaml").algorithm.wire, Dtype::kBf16);
  EXPECT_NE(error_of("algorithm: {kind: allreduce, wire: bf16}").find("is for gossip, push_sum and diloco"), std::string::npos);
}

// What a joiner must share with the run: the exchange's settings, not the peer's own (learning
// rate, timeouts, single copy, threads), which may differ from peer to peer.
TEST(Config, SharedSettingsNameWhatEveryPeerMustHaveAlike) {
  auto shared = [](const std::string& yaml) { return shared_settings(parse_config(yaml, "t.yaml")); };
  const std::string ring = shared("topology: ring\nalgorithm: gossip");
  EXPECT_EQ(ring,
            "algorithm.kind=gossip;topology=ring;algorithm.wire=f32;algorithm.checksum=auto;"
            "algorithm.global_average_every=0;log_every=100;consensus_every=0;algorithm.gradient_tracking=false");
  EXPECT_EQ(shared("topology: ring\nalgorithm: {kind: gossip, timeout_s: 9, single_copy: true, max_norm_ratio: 3}\n"
                   "threads: 2\noptimizer: {lr: 0.3, batch: 16}"),
            ring);
  for (const char* other : {"topology: exponential\nalgorithm: gossip", "topology: ring\nalgorithm: {kind: gossip, wire: bf16}",
                            "topology: ring\nalgorithm: {kind: gossip, checksum: always}", "topology: ring\nalgorithm: push_sum",
                            "topology: ring\nalgorithm: {kind: gossip, global_average_every: 8}",
                            "topology: ring\nalgorithm: gossip\nlog_every: 50"})
    EXPECT_NE(shared(other), ring) << other;
  EXPECT_NE(shared("algorithm: {kind: diloco, outer_lr: 0.5}").find("algorithm.inner_steps=50;algorithm.outer_average="
                                                                   "allreduce;algorithm.gossip_rounds=1;algorithm.outer_lr=0.5;"),
            std::string::npos);
  EXPECT_NE(shared("algorithm: {kind: choco, ratio: 0.05}").find("algorithm.compressor=top_k;algorithm.ratio=0.05;"),
            std::string::npos);
  EXPECT_EQ(shared("topology: ring\nalgorithm: {kind: gossip, chunk_bytes: 65536}"), ring) << "f32 gossip reads any chunks";
  EXPECT_NE(shared("algorithm: {kind: choco, chunk_bytes: 65536}").find("algorithm.chunk_bytes=65536"), std::string::npos);
  EXPECT_EQ(shared("topology: ring\nalgorithm: gossip").find(' '), std::string::npos) << "one word in a join request";
}

TEST(Config, QuasiGlobalMomentumIsForSgdWithMomentum) {
  EXPECT_FALSE(parse_config("optimizer: {lr: 0.1}", "t.yaml").train.optimizer.quasi_global);
  EXPECT_TRUE(parse_config("optimizer: {quasi_global_momentum: true}", "t.yaml").train.optimizer.quasi_global);
  EXPECT_NE(error_of("optimizer: {kind: adamw, quasi_global_momentum: true}").find("optimizer.quasi_global_momentum': is for kind: sgd"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer: {momentum: 0, quasi_global_momentum: true}").find("needs momentum > 0"), std::string::npos);
  EXPECT_NE(error_of("optimizer: {quasi_global_momentum: often}").find("optimizer.quasi_global_momentum"), std::string::npos);
}

TEST(Config, Int8WireIsForDilocosAllReduceAverageOnly) {
  EXPECT_EQ(parse_config("algorithm: {kind: diloco, wire: int8}", "t.yaml").algorithm.wire, Dtype::kInt8);
  for (const char* algorithm : {"{kind: gossip, wire: int8}", "{kind: push_sum, wire: int8}",
                                "{kind: diloco, outer_average: gossip, wire: int8}"}) {
    const std::string e = error_of(std::string("algorithm: ") + algorithm);
    EXPECT_NE(e.find("algorithm.wire"), std::string::npos) << algorithm << ": " << e;
    EXPECT_NE(e.find("int8 is for diloco's all-reduce average"), std::string::npos) << algorithm << ": " << e;
  }
}

TEST(Config, ChocoTakesACompressorAndAConsensusStep) {
  const AlgorithmConfig d = parse_config("algorithm: choco", "t.yaml").algorithm;
  EXPECT_EQ(d.kind, Algorithm::kChoco);
  EXPECT_EQ(d.compressor, Dtype::kTopK);
  EXPECT_DOUBLE_EQ(d.ratio, 0.01);
  const AlgorithmConfig a =
      parse_config("topology: exponential\nalgorithm: {kind: choco, compressor: random_k, ratio: 0.2, consensus_step: 0.3}",
                   "t.yaml")
          .algorithm;
  EXPECT_EQ(a.compressor, Dtype::kRandomK);
  EXPECT_DOUBLE_EQ(a.ratio, 0.2);
  EXPECT_DOUBLE_EQ(a.consensus_step, 0.3);
  EXPECT_EQ(parse_config("algorithm: {kind: choco, compressor: int8}", "t.yaml").algorithm.compressor, Dtype::kInt8);
  EXPECT_EQ(algorithm_name(Algorithm::kChoco), "choco");
}

TEST(Config, GradientTrackingIsAGossipOption) {
  EXPECT_FALSE(parse_config("algorithm: gossip", "t.yaml").algorithm.gradient_tracking);
  EXPECT_TRUE(parse_config("algorithm: {kind: gossip, gradient_tracking: true}", "t.yaml").algorithm.gradient_tracking);
}

TEST(Config, MissingFileNamesIt) {
  try {
    load_config("/nonexistent/x.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.yaml"), std::string::npos);
  }
}

// A device, an endless pipe or a directory given as the YAML is an error naming it, not a hang.
TEST(Config, AFileThatIsNoYamlIsNamedNotReadForever) {
  for (const auto& [path, says] : {std::pair{"/dev/zero", "larger than 16 MiB"}, std::pair{"/tmp", "is a directory"}}) {
    try {
      load_config(path);
      ADD_FAILURE() << path << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(path) + ": " + says), std::string::npos) << e.what();
    }
  }
}

TEST(Config, ShippedConfigsParse) {
  namespace fs = std::filesystem;
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(std::string(GOSSIP_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(load_config(entry.path().string())) << entry.path();
    ++parsed;
  }
  EXPECT_GE(parsed, 1);
}

}  // namespace
}  // namespace gossip::peer
