//===- MpiShim.h - the MPI calls strata makes, as a C interface -*- C++ -*-===//
//
// strata-run links no MPI: MPI is needed only under a launcher (mpirun,
// srun), and a machine without it still runs plans. The few MPI calls the
// mpi transport makes are this C interface, which libstrata-mpi.so
// implements over the MPI it was built with (MpiShim.cpp) and strata-run
// loads with dlopen when a launcher's environment is present
// (MpiTransport.cpp). Plain C types only, so MPI's handles, whose types
// differ between MPI implementations, stay inside the shim. The calls
// are not thread-safe; the transport serializes them.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_MPISHIM_H
#define STRATA_RUNTIME_COMM_MPISHIM_H

#include <cstdint>

extern "C" {

/// Starts MPI with MPI_THREAD_SERIALIZED, errors returned to the caller;
/// this process's rank and the world's size. 0, or nonzero with why in
/// `error` (of `errorBytes`).
int strata_mpi_start(int *rank, int *size, char *error, int errorBytes);
/// Starts a send or a receive of `bytes` (at most 2^31 - 1); `*request`
/// is the shim's until strata_mpi_test reports it done. 0 or MPI's error.
int strata_mpi_isend(const void *data, uint64_t bytes, int to, int tag,
                     void **request);
int strata_mpi_irecv(void *data, uint64_t bytes, int from, int tag,
                     void **request);
/// Whether `request` is done (`*done`); once done, the request is freed
/// and `*bytes` is what a receive received. 0 or MPI's error.
int strata_mpi_test(void *request, int *done, uint64_t *bytes);
/// MPI_Finalize.
void strata_mpi_finish();
/// Ends every process of the job.
void strata_mpi_abort();
}

/// Every function of the shim, for the loader to look up by name.
#define STRATA_MPI_SHIM_FUNCTIONS(X)                                           \
  X(strata_mpi_start)                                                          \
  X(strata_mpi_isend)                                                          \
  X(strata_mpi_irecv)                                                          \
  X(strata_mpi_test)                                                           \
  X(strata_mpi_finish)                                                         \
  X(strata_mpi_abort)

#endif
