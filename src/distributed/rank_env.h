// Who this process is in a multi-process run, read from the variables every
// launcher sets: torchrun (and attnprof --nproc) set RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT; under Slurm (srun) SLURM_PROCID,
// SLURM_NTASKS and SLURM_LOCALID stand in for the first three when RANK is
// absent and the job script exported MASTER_ADDR and MASTER_PORT. No LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace attnprof::ring {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  uint16_t master_port = 0;
  // torchrun's agent already serves the TCPStore at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True); the workers are all clients then,
  // under the key prefix "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>".
  bool agent_store = false;
  int restart_count = 0;
  std::string launcher;  // "RANK/WORLD_SIZE" or "Slurm", for messages
};

// Reads the environment through `get` (std::getenv in production; a map in
// tests). nullopt when no launcher variables are set (a single-process run).
// Throws std::invalid_argument with a one-line reason when they are set but
// incomplete or malformed ("WORLD_SIZE='two' is not an integer").
std::optional<RankEnv> rank_env_from(const std::function<const char*(const char*)>& get);
std::optional<RankEnv> rank_env_from_process();

}  // namespace attnprof::ring
