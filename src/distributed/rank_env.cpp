#include "distributed/rank_env.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace attnprof::ring {
namespace {

int64_t parse_int(const char* name, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE)
    throw std::invalid_argument(std::string(name) + "='" + text + "' is not an integer");
  if (v < lo || v > hi)
    throw std::invalid_argument(std::string(name) + "=" + text + " is out of range (" + std::to_string(lo) + " to " +
                                std::to_string(hi) + ")");
  return v;
}

}  // namespace

std::optional<RankEnv> rank_env_from(const std::function<const char*(const char*)>& get) {
  const bool torchrun = get("RANK") != nullptr;
  const bool slurm = !torchrun && get("SLURM_PROCID") && get("MASTER_ADDR") && get("MASTER_PORT");
  if (!torchrun && !slurm) return std::nullopt;
  const char* rank_var = torchrun ? "RANK" : "SLURM_PROCID";
  const char* world_var = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  const char* local_var = torchrun ? "LOCAL_RANK" : "SLURM_LOCALID";
  RankEnv e;
  e.launcher = torchrun ? "RANK/WORLD_SIZE" : "Slurm";
  for (const char* required : {world_var, "MASTER_ADDR", "MASTER_PORT"})
    if (!get(required) || !*get(required))
      throw std::invalid_argument(std::string(rank_var) + " is set but " + required +
                                  " is not (a launcher sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)");
  constexpr int64_t kMaxWorld = 1 << 20;
  e.world_size = static_cast<int>(parse_int(world_var, get(world_var), 1, kMaxWorld));
  e.rank = static_cast<int>(parse_int(rank_var, get(rank_var), 0, e.world_size - 1));
  // Without LOCAL_RANK every rank is taken to share one host: local rank = rank.
  e.local_rank = get(local_var) ? static_cast<int>(parse_int(local_var, get(local_var), 0, e.world_size - 1)) : e.rank;
  e.master_addr = get("MASTER_ADDR");
  e.master_port = static_cast<uint16_t>(parse_int("MASTER_PORT", get("MASTER_PORT"), 1, 65535));
  const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && std::string(agent) == "True";
  if (const char* restarts = get("TORCHELASTIC_RESTART_COUNT"))
    e.restart_count = static_cast<int>(parse_int("TORCHELASTIC_RESTART_COUNT", restarts, 0, 1 << 30));
  return e;
}

std::optional<RankEnv> rank_env_from_process() {
  return rank_env_from([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace attnprof::ring
