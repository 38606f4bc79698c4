// Where each rank of a cluster job runs, from the job's own description (no scontrol, no shared
// file system): Slurm's compressed host lists and task counts, Open MPI's environment, or a host
// file. Pure functions (the environment is passed in), so every rank computes the same layout.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gossip {

// "node[01-03,7],gpu-a[1-2]-x" → node01 node02 node03 node7 gpu-a1-x gpu-a2-x. Ranges keep the
// zero padding of their first bound; several bracket groups in one name multiply (the first
// varies slowest, as in Slurm). Throws gossip::Error naming the text when it is malformed.
std::vector<std::string> expand_hostlist(const std::string& text);

// Slurm's SLURM_TASKS_PER_NODE: "2(x3),1" → 2 2 2 1. Throws gossip::Error when malformed.
std::vector<int> expand_task_counts(const std::string& text);

// One rank's place: its host and its index among the ranks of that host.
struct RankPlace {
  std::string host;
  int local = 0;
};

// Block layout (Slurm's default distribution, Open MPI's default mapping by slot): the first
// counts[0] ranks on hosts[0], the next counts[1] on hosts[1], and so on.
std::vector<RankPlace> block_layout(const std::vector<std::string>& hosts, const std::vector<int>& counts);

// A host file: one host per line ("host", "host slots=N" as Open MPI writes them, or "host:N"),
// '#' comments and blank lines ignored. Returns the hosts and their slot counts (1 when none
// given). `where` names the file in errors ("FILE:LINE: ...").
struct HostFile {
  std::vector<std::string> hosts;
  std::vector<int> slots;
};
HostFile parse_hostfile(const std::string& text, const std::string& where);

// Reads an environment variable (std::getenv in programs, a map in tests).
using EnvReader = std::function<std::optional<std::string>(const std::string&)>;
EnvReader process_environment();

// Every rank's place in the job this process belongs to, for `peers: {hosts: SOURCE}`: "slurm"
// (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE), "mpi" (OMPI_COMM_WORLD_SIZE and, across hosts,
// the host file named by `hostfile`), or the path of a host file (`read_file` reads it). When
// every rank runs on one host its address is 127.0.0.1. Checks this process's own place (SLURM_
// LOCALID / OMPI_COMM_WORLD_LOCAL_RANK) against the layout when the environment gives it, so a
// cyclic distribution is an error rather than a run whose peers dial the wrong ranks.
std::vector<RankPlace> job_layout(const std::string& source, const std::string& hostfile, const EnvReader& env,
                                  const std::function<std::string(const std::string&)>& read_file);

}  // namespace gossip
