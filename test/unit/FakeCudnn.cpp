// A shared library standing in for libcudnn.so.9 where no GPU is: the
// entry points strata's cuDNN table looks up (runtime/cuda/Cudnn.h), with
// cudnnGetVersion answering STRATA_FAKE_CUDNN_VERSION (9.19.0 when unset),
// so a test can show what strata does with a cuDNN too old to use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" {

size_t cudnnGetVersion() {
  const char *version = std::getenv("STRATA_FAKE_CUDNN_VERSION");
  return version ? size_t(std::strtoull(version, nullptr, 10)) : 91900;
}
const char *cudnnGetErrorString(int) { return "CUDNN_STATUS_FAKE"; }
int cudnnCreate(void **handle) {
  *handle = nullptr;
  return 0;
}
int cudnnDestroy(void *) { return 0; }
int cudnnSetStream(void *, void *) { return 0; }
int cudnnBackendCreateDescriptor(int, void **descriptor) {
  *descriptor = nullptr;
  return 0;
}
int cudnnBackendDestroyDescriptor(void *) { return 0; }
int cudnnBackendFinalize(void *) { return 0; }
int cudnnBackendSetAttribute(void *, int, int, int64_t, const void *) {
  return 0;
}
int cudnnBackendGetAttribute(void *, int, int, int64_t, int64_t *count,
                             void *) {
  if (count)
    *count = 0;
  return 0;
}
int cudnnBackendExecute(void *, void *, void *) { return 0; }
}
