// One YAML started by a cluster's own launcher: the peers take their ranks and their neighbours'
// endpoints from the launcher's environment (`peers: {hosts: mpi | slurm, base_port: P}`), with no
// gossip flag but --config, no rendezvous directory and no shared file system.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>

#include "process_util.h"

namespace gossip {
namespace {

using testing::run_command;
using testing::TempDir;

// A small run of four ring peers; every rank listens on 127.0.0.1 (all ranks are on this host).
std::string yaml(const std::string& hosts, int base_port) {
  return "seed: 4\ndevice: cpu\nlog_every: 50\n"
         "peers: {hosts: " + hosts + ", base_port: " + std::to_string(base_port) + "}\n"
         "topology: ring\nalgorithm: {kind: gossip, global_average_every: 10}\nmodel: {hidden: [16]}\n"
         "data: {dataset: synthetic, synthetic: {train: 2000, test: 400, dims: 16, classes: 4}}\n"
         "optimizer: {lr: 0.05, batch: 32, epochs: 1}\n";
}

// A port range of our own for this process (peers listen on base + 0..3).
int base_port() { return 21000 + static_cast<int>(::getpid() % 4000) * 2; }

// Every rank printed its final line (with its params_crc), and all hold one model.
void expect_four_peers_with_one_model(const std::string& log) {
  const std::vector<double> ranks = testing::capture_all(log, R"(final: peer (\d+) .* params_crc [0-9a-f]+)");
  EXPECT_EQ(std::set<double>(ranks.begin(), ranks.end()), (std::set<double>{0, 1, 2, 3})) << log;
  EXPECT_EQ(testing::crcs_in(log).size(), 1u) << log;
}

TEST(Cluster, MpirunStartsTheRanksOfOneYaml) {
  if (run_command("sh -c 'command -v mpirun'", 10).exit_code != 0) GTEST_SKIP() << "mpirun is not installed (openmpi-bin)";
  TempDir dir;
  const std::string config = dir.write("mpi.yaml", yaml("mpi", base_port()));
  // Open MPI's own runtime stays on loopback too; as root it must be told that is fine.
  const auto r = run_command("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                             "--oversubscribe --mca oob_tcp_if_include lo --mca btl self -np 4 " +
                                 testing::bin("gossip-peer") + " --config " + config + " 2>&1",
                             220);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_four_peers_with_one_model(r.output);
  EXPECT_NE(r.output.find("bound tcp://127.0.0.1:" + std::to_string(base_port() + 3)), std::string::npos) << r.output;
}

// tests/slurm_single_node.sh configures and starts munge, slurmctld and slurmd on this machine
// (one node, its state in a temporary directory), runs `srun -n 4 gossip-peer --config X.yaml`
// and stops them; it exits 77 with the reason when Slurm cannot start here.
TEST(Cluster, SrunOnASingleNodeSlurm) {
  TempDir dir;
  const std::string config = dir.write("slurm.yaml", yaml("slurm", base_port()));
  const auto r = run_command("bash " + std::string(GOSSIP_SOURCE_DIR) + "/tests/slurm_single_node.sh " + dir.path() +
                                 " " + testing::bin("gossip-peer") + " " + config + " 2>&1",
                             280);
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_four_peers_with_one_model(r.output);
}

}  // namespace
}  // namespace gossip
