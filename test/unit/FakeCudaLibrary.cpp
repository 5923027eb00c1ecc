// A shared library standing in for one of CUDA's in LibrarySearchTest: the
// search needs a file dlopen loads, not cuBLASLt itself.
extern "C" int strataFakeCudaLibrary() { return 23; }
