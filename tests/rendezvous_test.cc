// Rendezvous files: each names its run, process and host, and a reader ignores those that cannot
// be this run's; then real peers reuse a directory the way mpirun runs do (a rank starting late,
// --resume), and end with one model.
#include "transport/rendezvous.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <set>

#include "common/error.h"
#include "process_util.h"

namespace gossip::peer {
namespace {

using testing::read_file;
using testing::run_command;
using testing::TempDir;

std::string host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST(Rendezvous, AFileOfThisRunIsReadAndOneOfAnotherRunIsNot) {
  TempDir dir;
  publish_endpoint(dir.path(), 2, "tcp://127.0.0.1:40123", "run-a");
  EXPECT_EQ(read_published(dir.path(), 2, "run-a").value_or(""), "tcp://127.0.0.1:40123");
  EXPECT_EQ(read_published(dir.path(), 2, "").value_or(""), "tcp://127.0.0.1:40123") << "no run id: the process check only";
  std::string stale;
  EXPECT_FALSE(read_published(dir.path(), 2, "run-b", &stale));
  EXPECT_NE(stale.find("peer-2 is of run run-a, not this run's run-b"), std::string::npos) << stale;
  EXPECT_FALSE(read_published(dir.path(), 3, "run-a")) << "nothing published";
}

TEST(Rendezvous, AFileOfAProcessThatIsGoneIsStale) {
  TempDir dir;
  const long pid = dead_pid();
  dir.write("peer-0", "tcp://127.0.0.1:40000\nrun -\npid " + std::to_string(pid) + "\nhost " + host() + "\n");
  std::string stale;
  EXPECT_FALSE(read_published(dir.path(), 0, "", &stale));
  EXPECT_NE(stale.find("written by process " + std::to_string(pid) + ", which is gone"), std::string::npos) << stale;
  // On another host the process cannot be checked: the file is taken (until it is rewritten).
  dir.write("peer-1", "tcp://10.1.2.3:40000\nrun -\npid " + std::to_string(pid) + "\nhost elsewhere\n");
  EXPECT_EQ(read_published(dir.path(), 1, "").value_or(""), "tcp://10.1.2.3:40000");
  // Publishing over a stale file is fine.
  publish_endpoint(dir.path(), 0, "tcp://127.0.0.1:40001", "");
  EXPECT_EQ(read_published(dir.path(), 0, "").value_or(""), "tcp://127.0.0.1:40001");
}

TEST(Rendezvous, MalformedFilesAreNotEndpoints) {
  TempDir dir;
  dir.write("peer-0", "tcp://127.0.0.1:40000\n");  // an endpoint alone (older files): taken
  EXPECT_EQ(read_published(dir.path(), 0, "x").value_or(""), "tcp://127.0.0.1:40000");
  dir.write("peer-1", "tcp://evil\n\x1b[2J:1\n");
  EXPECT_FALSE(read_published(dir.path(), 1, ""));
  dir.write("peer-2", "tcp://127.0.0.1:40000\nowner me\n");
  EXPECT_FALSE(read_published(dir.path(), 2, ""));
}

TEST(Rendezvous, ALiveProcessOfThisHostKeepsItsFile) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  dir.write("peer-0", "tcp://127.0.0.1:40000\nrun -\npid " + std::to_string(child) + "\nhost " + host() + "\n");
  try {
    publish_endpoint(dir.path(), 0, "tcp://127.0.0.1:40001", "");
    ADD_FAILURE() << "took the file of a live process";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer-0: belongs to process " + std::to_string(child)), std::string::npos)
        << e.what();
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(Rendezvous, RunIdComesFromTheLauncherSlurmOrOpenMpi) {
  const char* names[] = {"GOSSIP_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"};
  for (const char* n : names) ::unsetenv(n);
  EXPECT_EQ(run_id_from_environment(), "");
  ::setenv("OMPI_MCA_ess_base_jobid", "77", 1);
  EXPECT_EQ(run_id_from_environment(), "ompi-77");
  ::setenv("PMIX_NAMESPACE", "1952317441", 1);
  EXPECT_EQ(run_id_from_environment(), "pmix-1952317441");
  ::setenv("SLURM_JOB_ID", "9", 1);
  ::setenv("SLURM_STEP_ID", "2", 1);
  EXPECT_EQ(run_id_from_environment(), "slurm-9.2");
  ::setenv("GOSSIP_RUN_ID", "a b", 1);
  EXPECT_EQ(run_id_from_environment(), "a_b");
  for (const char* n : names) ::unsetenv(n);
}

// Four peers started the way mpirun starts them (rank from OMPI_COMM_WORLD_RANK, `env` = the
// job's variables), with `late` starting `late_s` later; returns each rank's output and exit code.
std::map<int, std::pair<std::string, int>> start_ranks(const TempDir& dir, const std::string& yaml, const std::string& rdv,
                                                       const std::string& env, const std::string& extra, int late,
                                                       int late_s) {
  std::string script;
  for (int r = 0; r < 4; ++r) {
    const std::string out = dir.path() + "/out." + std::to_string(r);
    script += "(" + std::string(r == late ? "sleep " + std::to_string(late_s) + "; " : "") + "env " + env +
              " OMPI_COMM_WORLD_RANK=" + std::to_string(r) + " " + testing::bin("gossip-peer") + " --config " + yaml +
              " --rendezvous " + rdv + " " + extra + " > " + out + " 2>&1; echo $? > " + out + ".rc) & ";
  }
  run_command("sh -c '" + script + "wait'", 150);
  std::map<int, std::pair<std::string, int>> result;
  for (int r = 0; r < 4; ++r) {
    const std::string out = dir.path() + "/out." + std::to_string(r);
    const std::string rc = read_file(out + ".rc");
    result[r] = {read_file(out), rc.empty() ? -1 : std::stoi(rc)};
  }
  return result;
}

std::set<std::string> models(const std::map<int, std::pair<std::string, int>>& ranks) {
  std::set<std::string> crcs;
  const std::regex crc(R"(final: .* params_crc ([0-9a-f]+))");
  for (const auto& [r, o] : ranks) {
    std::smatch m;
    if (std::regex_search(o.first, m, crc)) crcs.insert(m[1]);
  }
  return crcs;
}

std::string all_output(const std::map<int, std::pair<std::string, int>>& ranks) {
  std::string text;
  for (const auto& [r, o] : ranks) text += "--- rank " + std::to_string(r) + " (exit " + std::to_string(o.second) + ")\n" + o.first;
  return text;
}

TEST(RendezvousProcesses, AReusedDirectoryWithALateRankThenResume) {
  TempDir dir;
  const std::string rdv = dir.path() + "/rdv", ckpt = dir.path() + "/ckpt";
  std::filesystem::create_directories(rdv);
  const std::string yaml = dir.write("run.yaml",
      "seed: 4\ndevice: cpu\nlog_every: 50\npeers: {count: 4, host: 127.0.0.1, base_port: 0}\ntopology: ring\n"
      "algorithm: {kind: gossip, timeout_s: 30}\nmodel: {hidden: [32]}\n"
      "data: {dataset: synthetic, synthetic: {train: 6000, test: 1000, dims: 32, classes: 8, noise: 4}}\n"
      "optimizer: {lr: 0.01, momentum: 0.9, batch: 32, epochs: 4}\ncheckpoint: {dir: " + ckpt + ", every: 40}\n");
  // The first run, as one mpirun job.
  auto first = start_ranks(dir, yaml, rdv, "PMIX_NAMESPACE=1001", "", -1, 0);
  for (const auto& [r, o] : first) ASSERT_EQ(o.second, 0) << all_output(first);
  // The same directory again, with no run id at all (files of processes that are gone are
  // ignored) and rank 3 starting 4 s late: its old file names a port nobody listens on.
  auto second = start_ranks(dir, yaml, rdv, "GOSSIP_UNUSED=1", "", 3, 4);
  for (const auto& [r, o] : second) EXPECT_EQ(o.second, 0) << all_output(second);
  EXPECT_EQ(models(second).size(), 1u) << all_output(second);
  // --resume from the checkpoints in the same directories, as a new mpirun job.
  auto resumed = start_ranks(dir, yaml, rdv, "PMIX_NAMESPACE=1002", "--resume", 2, 4);
  for (const auto& [r, o] : resumed) {
    EXPECT_EQ(o.second, 0) << all_output(resumed);
    EXPECT_NE(o.first.find("resumed from"), std::string::npos) << all_output(resumed);
  }
  EXPECT_EQ(models(resumed).size(), 1u) << all_output(resumed);
}

}  // namespace
}  // namespace gossip::peer
