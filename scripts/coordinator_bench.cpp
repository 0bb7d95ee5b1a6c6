// Rank 0's cost per control message in a Horovod-0.9-style negotiation (ddlsim measurement).
//
// Every worker rank sends rank 0 one small request per "ready tensor" (a tensor name and a few
// integers, as Horovod's serialised requests are) and a zero-byte DONE; rank 0 takes them one
// by one (MPI_Probe on any source, MPI_Get_count, MPI_Recv, parse into a hash table of counts)
// until every worker is DONE, then sends every worker one response per fused buffer and a
// DONE. Written for ddlsim from the description of the protocol in docs/design.md; prints one
// JSON object with rank 0's seconds per received and per sent message.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int tensors = argc > 1 ? std::atoi(argv[1]) : 200;    // requests per worker per cycle
  const int responses = argc > 2 ? std::atoi(argv[2]) : 20;   // responses per cycle
  const int cycles = argc > 3 ? std::atoi(argv[3]) : 200;
  const int tag = 7;
  std::vector<std::string> names;
  for (int t = 0; t < tensors; ++t) {
    names.push_back("DistributedOptimizer_Allreduce/HorovodAllreduce_gradients_tower_0/v/cg/"
                    "resnet_v1_" + std::to_string(t) + "/conv2d/Conv2D_grad/tuple/control_0");
  }
  double recv_s = 0, send_s = 0;
  long received = 0, sent = 0;
  std::unordered_map<std::string, int> counts;
  for (int c = 0; c < cycles; ++c) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      double t0 = now_s();
      int done = 1;
      while (done < size) {
        MPI_Status st;
        MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
        int len;
        MPI_Get_count(&st, MPI_BYTE, &len);
        std::vector<char> buf(len > 0 ? len : 1);
        MPI_Recv(buf.data(), len, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, &st);
        ++received;
        if (len == 0) { ++done; continue; }
        std::string name(buf.data(), strnlen(buf.data(), len));
        if (++counts[name] == size - 1) counts.erase(name);
      }
      double t1 = now_s();
      std::string resp = names[0] + "|ALLREDUCE|float32|" + std::to_string(c);
      for (int r = 0; r <= responses; ++r) {
        const char* data = r < responses ? resp.c_str() : nullptr;
        int len = r < responses ? static_cast<int>(resp.size()) + 1 : 0;
        for (int w = 1; w < size; ++w) {
          MPI_Send(data, len, MPI_BYTE, w, tag, MPI_COMM_WORLD);
          ++sent;
        }
      }
      double t2 = now_s();
      recv_s += t1 - t0;
      send_s += t2 - t1;
    } else {
      for (int t = 0; t <= tensors; ++t) {
        const char* data = t < tensors ? names[t].c_str() : nullptr;
        int len = t < tensors ? static_cast<int>(names[t].size()) + 1 : 0;
        MPI_Send(data, len, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
      }
      while (true) {
        MPI_Status st;
        MPI_Probe(0, tag, MPI_COMM_WORLD, &st);
        int len;
        MPI_Get_count(&st, MPI_BYTE, &len);
        std::vector<char> buf(len > 0 ? len : 1);
        MPI_Recv(buf.data(), len, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st);
        if (len == 0) break;
      }
    }
  }
  if (rank == 0) {
    std::printf("{\"ranks\": %d, \"tensors_per_cycle\": %d, \"responses_per_cycle\": %d, "
                "\"cycles\": %d, \"received\": %ld, \"sent\": %ld, "
                "\"recv_s_per_message\": %.4g, \"send_s_per_message\": %.4g}\n",
                size, tensors, responses, cycles, received, sent, recv_s / received,
                send_s / sent);
  }
  MPI_Finalize();
  return 0;
}
