//===- MpiShim.cpp - libstrata-mpi.so: the shim over this build's MPI -----===//
#include "runtime/comm/MpiShim.h"

#include <climits>
#include <cstdio>
// The C API only: no C++ bindings to link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

extern "C" {

int strata_mpi_start(int *rank, int *size, char *error, int errorBytes) {
  int provided = 0;
  if (int code =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      code != MPI_SUCCESS) {
    std::snprintf(error, errorBytes, "MPI_Init_thread failed (error %d)", code);
    return code;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    std::snprintf(error, errorBytes,
                  "this MPI cannot be called from a rank's two threads "
                  "(MPI_THREAD_SERIALIZED)");
    MPI_Finalize();
    return 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return 0;
}
}

namespace {

/// A request of the shim's: MPI's, and whether it receives (only a
/// receive's status has a count).
struct Request {
  MPI_Request request;
  bool receive;
};

} // namespace

extern "C" {

int strata_mpi_isend(const void *data, uint64_t bytes, int to, int tag,
                     void **request) {
  if (bytes > uint64_t(INT_MAX))
    return MPI_ERR_COUNT;
  auto *handle = new Request{MPI_REQUEST_NULL, false};
  int code = MPI_Isend(data, int(bytes), MPI_BYTE, to, tag, MPI_COMM_WORLD,
                       &handle->request);
  if (code != MPI_SUCCESS) {
    delete handle;
    return code;
  }
  *request = handle;
  return 0;
}

int strata_mpi_irecv(void *data, uint64_t bytes, int from, int tag,
                     void **request) {
  if (bytes > uint64_t(INT_MAX))
    return MPI_ERR_COUNT;
  auto *handle = new Request{MPI_REQUEST_NULL, true};
  int code = MPI_Irecv(data, int(bytes), MPI_BYTE, from, tag, MPI_COMM_WORLD,
                       &handle->request);
  if (code != MPI_SUCCESS) {
    delete handle;
    return code;
  }
  *request = handle;
  return 0;
}

int strata_mpi_test(void *request, int *done, uint64_t *bytes) {
  auto *handle = static_cast<Request *>(request);
  MPI_Status status;
  *done = 0;
  *bytes = 0;
  if (int code = MPI_Test(&handle->request, done, &status); code != MPI_SUCCESS)
    return code;
  if (*done) {
    int count = 0;
    if (handle->receive)
      MPI_Get_count(&status, MPI_BYTE, &count);
    *bytes = uint64_t(count);
    delete handle;
  }
  return 0;
}

void strata_mpi_finish() { MPI_Finalize(); }

void strata_mpi_abort() { MPI_Abort(MPI_COMM_WORLD, 1); }
}
