#include "common/hostlist.h"

#include <gtest/gtest.h>

#include <map>

#include "common/error.h"

namespace gossip {
namespace {

using Strings = std::vector<std::string>;

TEST(Hostlist, SlurmsCompressedSyntaxExpandsInOrderKeepingThePadding) {
  EXPECT_EQ(expand_hostlist("node01"), Strings{"node01"});
  EXPECT_EQ(expand_hostlist("node[01-03,7],gpu"), (Strings{"node01", "node02", "node03", "node7", "gpu"}));
  EXPECT_EQ(expand_hostlist("n[8-10]"), (Strings{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Strings{"n098", "n099", "n100", "n101"}));
  // Two bracket groups: the first varies slowest; the text between and after them is kept.
  EXPECT_EQ(expand_hostlist("r[1-2]-n[1-2].ib"), (Strings{"r1-n1.ib", "r1-n2.ib", "r2-n1.ib", "r2-n2.ib"}));
  for (const char* bad : {"n[1-", "n1]", "n[]", "n[a-b]", "n[3-1]", "a,,b", "n[1-9999999]"})
    EXPECT_THROW(expand_hostlist(bad), Error) << bad;
}

TEST(Hostlist, TaskCountsExpandRepeats) {
  EXPECT_EQ(expand_task_counts("4"), std::vector<int>{4});
  EXPECT_EQ(expand_task_counts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  for (const char* bad : {"", "0", "2(x)", "2(x3", "x", "2(y3)"}) EXPECT_THROW(expand_task_counts(bad), Error) << bad;
}

TEST(Hostlist, BlockLayoutNumbersEachHostsRanksFromZero) {
  const std::vector<RankPlace> p = block_layout({"a", "b"}, {2, 3});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[1].host, "a");
  EXPECT_EQ(p[1].local, 1);
  EXPECT_EQ(p[2].host, "b");
  EXPECT_EQ(p[2].local, 0);
  EXPECT_EQ(p[4].local, 2);
}

TEST(Hostlist, HostFilesInOpenMpisAndTheShortForm) {
  const HostFile f = parse_hostfile("# cluster\nnode1 slots=4\n\nnode2:2  # two GPUs\nnode3 max_slots=8\n", "hosts.txt");
  EXPECT_EQ(f.hosts, (Strings{"node1", "node2", "node3"}));
  EXPECT_EQ(f.slots, (std::vector<int>{4, 2, 1}));
  try {
    parse_hostfile("a\nb speed=3\n", "hosts.txt");
    FAIL() << "an unknown option was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hosts.txt:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hostfile("# nothing\n", "hosts.txt"), Error);
  EXPECT_THROW(parse_hostfile("a slots=0\n", "hosts.txt"), Error);
}

EnvReader env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}
std::string no_file(const std::string& path) { throw Error(path, "cannot read the host file"); }

TEST(JobLayout, SlurmAcrossHostsAndOnOne) {
  const std::vector<RankPlace> p = job_layout(
      "slurm", "", env_of({{"SLURM_JOB_NODELIST", "c[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_PROCID", "3"},
                           {"SLURM_LOCALID", "1"}}),
      no_file);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[3].host, "c2");
  EXPECT_EQ(p[3].local, 1);
  // A step's own list wins over the allocation's (srun -n 2 inside a larger allocation).
  const std::vector<RankPlace> step = job_layout(
      "slurm", "", env_of({{"SLURM_JOB_NODELIST", "c[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"},
                           {"SLURM_STEP_NODELIST", "c1"}, {"SLURM_STEP_TASKS_PER_NODE", "2"}}),
      no_file);
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[1].host, "127.0.0.1");  // every rank on one host: loopback
  // Under a cyclic distribution rank 1 is the first (local 0) on c2; the block layout puts it
  // second on c1: an error, rather than peers dialling the wrong ranks.
  EXPECT_THROW(job_layout("slurm", "",
                          env_of({{"SLURM_JOB_NODELIST", "c[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"},
                                  {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}}),
                          no_file),
               Error);
  EXPECT_THROW(job_layout("slurm", "", env_of({}), no_file), Error);
  EXPECT_THROW(job_layout("slurm", "", env_of({{"SLURM_JOB_NODELIST", "c[1-3]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}}),
                          no_file),
               Error);
}

TEST(JobLayout, OpenMpiOnOneHostNeedsNoFileAcrossHostsItsHostFile) {
  const std::vector<RankPlace> one = job_layout(
      "mpi", "", env_of({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}), no_file);
  ASSERT_EQ(one.size(), 4u);
  EXPECT_EQ(one[2].host, "127.0.0.1");
  EXPECT_EQ(one[2].local, 2);
  const auto many = env_of({{"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_THROW(job_layout("mpi", "", many, no_file), Error);  // several hosts and no host file
  const auto file = [](const std::string&) { return std::string("h1 slots=2\nh2 slots=2\n"); };
  const std::vector<RankPlace> p = job_layout("mpi", "hosts.txt", many, file);
  ASSERT_EQ(p.size(), 3u);  // the ranks fill the first slots
  EXPECT_EQ(p[2].host, "h2");
  EXPECT_EQ(p[2].local, 0);
  EXPECT_THROW(job_layout("mpi", "", env_of({}), no_file), Error);
}

TEST(JobLayout, AHostFileOfOurOwn) {
  const auto file = [](const std::string&) { return std::string("10.0.0.1 slots=2\n10.0.0.2\n"); };
  const std::vector<RankPlace> p = job_layout("hosts.txt", "", env_of({}), file);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].host, "10.0.0.2");
  EXPECT_THROW(job_layout("missing.txt", "", env_of({}), no_file), Error);
}

}  // namespace
}  // namespace gossip
