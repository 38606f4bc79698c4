#include "common/hostlist.h"

#include <cstdlib>
#include <sstream>

#include "common/error.h"

namespace gossip {
namespace {

// Splits at the commas outside brackets.
std::vector<std::string> split_top_level(const std::string& text, const std::string& what) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw Error(what, "'" + text + "': unbalanced ']'");
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw Error(what, "'" + text + "': unbalanced '['");
  parts.push_back(cur);
  return parts;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// "01-03,7" → 01 02 03 7.
std::vector<std::string> expand_ranges(const std::string& inside, const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(inside);
  std::string range;
  while (std::getline(in, range, ',')) {
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9)
      throw Error("host list", "'" + text + "': '" + range + "' is not a number or a range of numbers");
    const long a = std::atol(lo.c_str()), b = std::atol(hi.c_str());
    if (b < a) throw Error("host list", "'" + text + "': range " + range + " runs backwards");
    if (b - a > 100000) throw Error("host list", "'" + text + "': range " + range + " is too long");
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(s);
    }
  }
  if (out.empty()) throw Error("host list", "'" + text + "': empty brackets");
  return out;
}

// One name with any number of bracket groups.
void expand_name(const std::string& name, const std::string& text, std::vector<std::string>& out) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    out.push_back(name);
    return;
  }
  const size_t close = name.find(']', open);
  const std::string head = name.substr(0, open), tail = name.substr(close + 1);
  for (const std::string& v : expand_ranges(name.substr(open + 1, close - open - 1), text))
    expand_name(head + v + tail, text, out);
}

int parse_count(const std::string& s, const std::string& what, const std::string& text) {
  if (!all_digits(s) || s.size() > 6 || std::atoi(s.c_str()) < 1)
    throw Error(what, "'" + text + "': '" + s + "' is not a positive count");
  return std::atoi(s.c_str());
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& text) {
  std::vector<std::string> hosts;
  for (const std::string& name : split_top_level(text, "host list")) {
    if (name.empty()) throw Error("host list", "'" + text + "': an empty host name");
    expand_name(name, text, hosts);
  }
  return hosts;
}

std::vector<int> expand_task_counts(const std::string& text) {
  std::vector<int> counts;
  for (const std::string& part : split_top_level(text, "task counts")) {
    const size_t paren = part.find("(x");
    if (paren == std::string::npos) {
      counts.push_back(parse_count(part, "task counts", text));
      continue;
    }
    if (part.back() != ')') throw Error("task counts", "'" + text + "': '" + part + "' should read N(xM)");
    const int n = parse_count(part.substr(0, paren), "task counts", text);
    const int times = parse_count(part.substr(paren + 2, part.size() - paren - 3), "task counts", text);
    counts.insert(counts.end(), times, n);
  }
  return counts;
}

std::vector<RankPlace> block_layout(const std::vector<std::string>& hosts, const std::vector<int>& counts) {
  std::vector<RankPlace> places;
  for (size_t h = 0; h < hosts.size() && h < counts.size(); ++h)
    for (int i = 0; i < counts[h]; ++i) places.push_back({hosts[h], i});
  return places;
}

HostFile parse_hostfile(const std::string& text, const std::string& where) {
  HostFile f;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string host, option;
    if (!(words >> host)) continue;
    int slots = 1;
    const std::string at = where + ":" + std::to_string(number);
    if (const size_t colon = host.find(':'); colon != std::string::npos) {
      slots = parse_count(host.substr(colon + 1), at, line);
      host.erase(colon);
    }
    while (words >> option) {
      if (option.rfind("slots=", 0) == 0) slots = parse_count(option.substr(6), at, line);
      else if (option.rfind("max_slots=", 0) != 0) throw Error(at, "unknown host file option '" + option + "'");
    }
    f.hosts.push_back(host);
    f.slots.push_back(slots);
  }
  if (f.hosts.empty()) throw Error(where, "the host file names no host");
  return f;
}

EnvReader process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

namespace {

std::optional<int> env_int(const EnvReader& env, const std::string& name) {
  const std::optional<std::string> v = env(name);
  if (!v || !all_digits(*v)) return std::nullopt;
  return std::atoi(v->c_str());
}

// The environment's word on this process's own place, when it gives one: it must agree.
void check_own_place(const std::vector<RankPlace>& places, std::optional<int> rank, std::optional<int> local,
                     const std::string& what) {
  if (!rank || !local) return;
  if (*rank >= static_cast<int>(places.size()))
    throw Error(what, "this is rank " + std::to_string(*rank) + " of a layout of " + std::to_string(places.size()));
  if (places[*rank].local != *local)
    throw Error(what, "rank " + std::to_string(*rank) + " is local rank " + std::to_string(*local) +
                          " on its host, but a block layout puts it at " + std::to_string(places[*rank].local) + " on " +
                          places[*rank].host + " (start the ranks in blocks: srun --distribution=block, mpirun --map-by slot)");
}

std::vector<RankPlace> on_this_host(int n) {
  std::vector<RankPlace> places;
  for (int i = 0; i < n; ++i) places.push_back({"127.0.0.1", i});
  return places;
}

std::vector<RankPlace> slurm_layout(const EnvReader& env) {
  const std::string what = "peers.hosts: slurm";
  std::optional<std::string> nodes = env("SLURM_STEP_NODELIST"), counts = env("SLURM_STEP_TASKS_PER_NODE");
  if (!nodes || !counts) nodes = env("SLURM_JOB_NODELIST"), counts = env("SLURM_TASKS_PER_NODE");
  if (!nodes) throw Error(what, "SLURM_JOB_NODELIST is not set: start the peers with srun (or name a host file)");
  if (!counts) throw Error(what, "SLURM_TASKS_PER_NODE is not set (Slurm sets it beside SLURM_JOB_NODELIST)");
  const std::vector<std::string> hosts = expand_hostlist(*nodes);
  const std::vector<int> per_host = expand_task_counts(*counts);
  if (hosts.size() != per_host.size())
    throw Error(what, "the node list '" + *nodes + "' names " + std::to_string(hosts.size()) + " hosts, the task counts '" +
                          *counts + "' " + std::to_string(per_host.size()));
  std::vector<RankPlace> places = block_layout(hosts, per_host);
  check_own_place(places, env_int(env, "SLURM_PROCID"), env_int(env, "SLURM_LOCALID"), what);
  return hosts.size() == 1 ? on_this_host(static_cast<int>(places.size())) : places;
}

std::vector<RankPlace> mpi_layout(const std::string& hostfile, const EnvReader& env,
                                  const std::function<std::string(const std::string&)>& read_file) {
  const std::string what = "peers.hosts: mpi";
  const std::optional<int> size = env_int(env, "OMPI_COMM_WORLD_SIZE");
  if (!size) throw Error(what, "OMPI_COMM_WORLD_SIZE is not set: start the peers with mpirun (Open MPI)");
  const std::optional<int> local_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!local_size || *local_size == *size) return on_this_host(*size);
  if (hostfile.empty())
    throw Error(what, "the " + std::to_string(*size) + " ranks run on several hosts: name the host file given to mpirun "
                      "(peers.hostfile)");
  const HostFile f = parse_hostfile(read_file(hostfile), hostfile);
  std::vector<RankPlace> places = block_layout(f.hosts, f.slots);
  if (static_cast<int>(places.size()) < *size)
    throw Error(what, hostfile + " has " + std::to_string(places.size()) + " slots for " + std::to_string(*size) + " ranks");
  places.resize(*size);
  check_own_place(places, env_int(env, "OMPI_COMM_WORLD_RANK"), env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK"), what);
  return places;
}

}  // namespace

std::vector<RankPlace> job_layout(const std::string& source, const std::string& hostfile, const EnvReader& env,
                                  const std::function<std::string(const std::string&)>& read_file) {
  if (source == "slurm") return slurm_layout(env);
  if (source == "mpi") return mpi_layout(hostfile, env, read_file);
  const HostFile f = parse_hostfile(read_file(source), source);
  return block_layout(f.hosts, f.slots);
}

}  // namespace gossip
