// Rendezvous through a shared directory, for peers that bind port 0: each publishes the endpoint
// it bound in DIR/peer-ID, and its neighbours read it there. A directory may be reused (an
// earlier run, mpirun started again, --resume), so every file names its run, its process and its
// host, and a reader ignores the files that cannot be this run's:
//
//     tcp://127.0.0.1:40123
//     run 1952317441
//     pid 81723
//     host node07
//
// A file is stale when its run id differs from ours (both known), or when it was written on this
// host by a process that is gone. The run id comes from the environment (see run_id below); when
// there is none, only the process check applies, and a file of a dead run on another host is
// taken until its peer rewrites it (the transport re-reads the files while it waits to hear).
#pragma once

#include <optional>
#include <string>

namespace gossip::peer {

std::string rendezvous_path(const std::string& dir, int id);

// Writes DIR/peer-ID atomically (a temporary file renamed). Throws gossip::Error when the file
// belongs to a live process of this host that is not us (another run uses the directory now).
void publish_endpoint(const std::string& dir, int id, const std::string& endpoint, const std::string& run_id);

// The endpoint peer `id` published for this run; nullopt when there is no usable file yet. A
// stale file sets *stale to why (naming the file), so a time-out can say what it found.
std::optional<std::string> read_published(const std::string& dir, int id, const std::string& run_id,
                                          std::string* stale = nullptr);

// This run's id from the environment: GOSSIP_RUN_ID (gossip-launch sets it for its peers), else
// Slurm's job and step (SLURM_JOB_ID.SLURM_STEP_ID), else Open MPI's job (PMIX_NAMESPACE or
// OMPI_MCA_ess_base_jobid); "" when none is set.
std::string run_id_from_environment();

}  // namespace gossip::peer
