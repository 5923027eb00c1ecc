//===- LibrarySearch.h - CUDA's libraries where GPU nodes keep them -*- C++ -*-===//
//
// The cuda backend loads cuBLASLt and NCCL with dlopen, and the kernel
// generator NVRTC. A GPU node keeps them in different places: the toolkit's
// lib64, a module system's folder on LD_LIBRARY_PATH, or PyTorch's CUDA
// wheels (site-packages/nvidia/*/lib). They are looked for, in this order:
//
//   1. every folder of STRATA_CUDA_LIBS (a ':'-separated list);
//   2. dlopen's own path (LD_LIBRARY_PATH, the rpath, ldconfig's cache);
//   3. $CUDA_HOME/lib64 (/usr/local/cuda/lib64 when CUDA_HOME is unset);
//   4. the nvidia/*/lib folders of the python3 first on PATH (its
//      prefix's lib/python3.*/site-packages, and those of the prefix it
//      links to).
//
// A library found nowhere is one line naming every place looked.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_BASE_LIBRARYSEARCH_H
#define STRATA_RUNTIME_BASE_LIBRARYSEARCH_H

#include <string>
#include <vector>

namespace strata::runtime {

/// Where to look: read from the environment, or set by a test.
struct LibrarySearch {
  std::string strataCudaLibs; // STRATA_CUDA_LIBS
  std::string cudaHome;       // CUDA_HOME ("" for /usr/local/cuda)
  std::string path;           // PATH, for python3
  bool useLoaderPath = true;  // step 2 (a test can leave it out)

  static LibrarySearch fromEnvironment();

  /// The folders of steps 1, 3 and 4, in search order, each with the step
  /// that named it; step 2 is dlopen's and has no folder.
  struct Place {
    std::string folder; // "" for dlopen's own path
    std::string origin; // "STRATA_CUDA_LIBS", "the library path", ...
  };
  std::vector<Place> places() const;
};

/// A library opened by the search.
struct FoundLibrary {
  void *handle = nullptr;
  std::string path; // the file dlopen loaded, as the loader names it
  std::string how;  // which step found it
  /// "PATH (found by HOW)", as reports name it.
  std::string where() const { return path + " (found by " + how + ")"; }
};

/// NVRTC's names, newest first: the kernel generator loads it, and
/// strata-run --cuda-info reports it.
inline const std::vector<std::string> kNvrtcNames = {
    "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

/// Opens the first of `sonames` (e.g. {"libcublasLt.so.13",
/// "libcublasLt.so"}) the search finds. On failure returns "" in
/// found.path with `error` one line: what `needed` is, every place looked,
/// the first loader error of a file that was there but would not load,
/// and STRATA_CUDA_LIBS as the way out. Handles stay open for the process.
FoundLibrary openCudaLibrary(const LibrarySearch &search,
                             const std::vector<std::string> &sonames,
                             const std::string &needed, std::string &error);

} // namespace strata::runtime

#endif
