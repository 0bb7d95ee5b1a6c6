// Host-side cost of Horovod-on-MPI's allreduce (ddlsim measurement).
//
// 1. MPI_Reduce_local(MPI_SUM, float) on one core: bytes of input summed per second, the rate
//    at which a rank folds a received chunk into its buffer (Open MPI's op component; run with
//    and without its AVX component).
// 2. MPI_Allreduce(MPI_SUM, float) of a large buffer across the ranks: algorithm bandwidth
//    (bytes of the buffer per second), with the transport the launcher selects.
// 3. memcpy of the buffer on one core (copy_Bps: bytes of the buffer per second; STREAM's
//    "Copy" counts read + written bytes, twice this): the core's streaming rate, to which the
//    other two are compared.
// Prints one JSON object (rank 0). Written for ddlsim; usage: allreduce_bench MIB REPS
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long mib = argc > 1 ? std::atol(argv[1]) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const long n = mib * 1024 * 1024 / 4;
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  // 1. local reduction and 3. copy, rank 0 alone (the others wait at the barrier)
  double local_s = 1e30, copy_s = 1e30;
  if (rank == 0) {
    std::memcpy(b.data(), a.data(), n * sizeof(float));  // warm
    for (int r = 0; r < reps; ++r) {
      const double t = now_s();
      std::memcpy(b.data(), a.data(), n * sizeof(float));
      copy_s = std::min(copy_s, now_s() - t);
    }
    MPI_Reduce_local(a.data(), b.data(), (int)n, MPI_FLOAT, MPI_SUM);  // warm
    for (int r = 0; r < reps; ++r) {
      const double t = now_s();
      MPI_Reduce_local(a.data(), b.data(), (int)n, MPI_FLOAT, MPI_SUM);
      local_s = std::min(local_s, now_s() - t);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // 2. allreduce across all ranks
  double all_s = 1e30;
  MPI_Allreduce(MPI_IN_PLACE, b.data(), (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // warm
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t = now_s();
    MPI_Allreduce(MPI_IN_PLACE, b.data(), (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double dt = now_s() - t, slowest;
    MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    all_s = std::min(all_s, slowest);
  }
  if (rank == 0) {
    const double bytes = (double)n * 4;
    std::printf("{\"ranks\": %d, \"mib\": %ld, \"reps\": %d, \"reduce_local_Bps\": %.4g, "
                "\"allreduce_algbw_Bps\": %.4g, \"copy_Bps\": %.4g}\n", size, mib, reps, bytes / local_s,
                bytes / all_s, bytes / copy_s);
  }
  MPI_Finalize();
  return 0;
}
