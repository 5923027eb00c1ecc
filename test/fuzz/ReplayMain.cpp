//===- ReplayMain.cpp - a fuzz harness run over saved inputs
//------------------===//
//
// Without libFuzzer (the ordinary build), each harness is linked with this
// main and runs once over every file of the folders or files it is given:
// the corpus and the regression inputs, so that `make test` checks that
// every input a fuzzer ever kept is still read without a crash.
//
//===----------------------------------------------------------------------===//
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    fs::path path = argv[i];
    if (!fs::exists(path))
      continue; // a harness with no regression inputs yet
    if (fs::is_directory(path)) {
      for (const auto &entry : fs::directory_iterator(path))
        if (entry.is_regular_file())
          inputs.push_back(entry.path());
    } else {
      inputs.push_back(path);
    }
  }
  for (const fs::path &input : inputs) {
    std::ifstream file(input, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("%s: %zu inputs read without a crash\n",
              fs::path(argv[0]).filename().c_str(), inputs.size());
  return 0;
}
