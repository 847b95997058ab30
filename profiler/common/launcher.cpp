#include "profiler/common/launcher.h"

#include <charconv>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "costmodel/errors.h"

extern char** environ;

namespace hetplan::profiler {
namespace {

const std::string* find(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int parse_int(const Environment& env, const char* name, int min_value) {
  const std::string* text = find(env, name);
  if (!text) throw InputError(fmt::format("environment variable {} is not set", name));
  int v = 0;
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, v);
  if (ec != std::errc() || p != end || v < min_value)
    throw InputError(fmt::format("environment variable {}: expected an integer >= {}, found \"{}\"",
                                 name, min_value, *text));
  return v;
}

int parse_int_or(const Environment& env, const char* name, int min_value, int fallback) {
  return find(env, name) ? parse_int(env, name, min_value) : fallback;
}

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

// The order matters: mpirun under Slurm exports both, and OpenMPI's ranks are the ones we run as.
constexpr Scheme kSchemes[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

int slurm_tasks_on_node(const std::string& text, int node_id) {
  // "4(x2),3" means nodes 0 and 1 run 4 tasks, node 2 runs 3.
  int node = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    int tasks = 0, repeat = 1;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), tasks);
    if (ec != std::errc()) return 0;
    if (p != item.data() + item.size()) {
      if (item.size() - (p - item.data()) < 4 || p[0] != '(' || p[1] != 'x' || item.back() != ')')
        return 0;
      auto [q, ec2] = std::from_chars(p + 2, item.data() + item.size() - 1, repeat);
      if (ec2 != std::errc() || q != item.data() + item.size() - 1) return 0;
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
    pos = comma + 1;
  }
  return 0;
}

LaunchInfo detect_launch(const Environment& env) {
  LaunchInfo info;
  for (const Scheme& s : kSchemes) {
    if (!find(env, s.rank) || !find(env, s.size)) continue;
    info.launcher = s.launcher;
    info.size = parse_int(env, s.size, 1);
    info.rank = parse_int(env, s.rank, 0);
    if (info.rank >= info.size)
      throw InputError(fmt::format("environment variable {}: rank {} is not below {} = {}", s.rank,
                                   info.rank, s.size, info.size));
    info.local_rank = parse_int_or(env, s.local_rank, 0, 0);
    if (s.local_size) {
      info.local_size = parse_int_or(env, s.local_size, 1, 1);
    } else if (const std::string* tpn = find(env, "SLURM_STEP_TASKS_PER_NODE")) {
      info.local_size =
          std::max(1, slurm_tasks_on_node(*tpn, parse_int_or(env, "SLURM_NODEID", 0, 0)));
    }
    if (info.local_rank >= info.local_size) info.local_size = info.local_rank + 1;
    break;
  }
  for (const char* id : {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
                         "TORCHELASTIC_RUN_ID"}) {
    if (const std::string* v = find(env, id)) {
      info.job_id = *v;
      if (const std::string* step = find(env, "SLURM_STEP_ID"); step && id[0] == 'S')
        info.job_id += "." + *step;
      break;
    }
  }
  return info;
}

RendezvousAddress rendezvous_address(const LaunchInfo& launch, const Environment& env) {
  RendezvousAddress a;
  const std::string* host = find(env, "HETPLAN_MASTER_ADDR");
  a.host = host ? *host : "127.0.0.1";
  if (find(env, "HETPLAN_MASTER_PORT")) {
    a.port = parse_int(env, "HETPLAN_MASTER_PORT", 1);
    if (a.port > 65535)
      throw InputError(
          fmt::format("environment variable HETPLAN_MASTER_PORT: expected a port "
                      "number up to 65535, found {}",
                      a.port));
  } else {
    a.port = 29500 + static_cast<int>(std::hash<std::string>{}(launch.job_id) % 1000);
  }
  return a;
}

}  // namespace hetplan::profiler
