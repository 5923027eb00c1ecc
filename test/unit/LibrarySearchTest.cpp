//===- LibrarySearchTest.cpp - where CUDA's libraries are looked for ------===//
//
// runtime/io/LibrarySearch's order (STRATA_CUDA_LIBS, the library path,
// $CUDA_HOME/lib64, the nvidia/*/lib folders of the python3 on PATH) and
// its one-line message, on folders made here holding a stand-in library
// (FakeCudaLibrary.cpp) or a file that is no library.
//
//===----------------------------------------------------------------------===//
#include "runtime/base/LibrarySearch.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>

using namespace strata::runtime;
namespace fs = std::filesystem;

namespace {

/// A fresh tree: STRATA_CUDA_LIBS' folder, a toolkit, a virtual
/// environment with a wheel's lib folder; the stand-in copied under a name
/// of this test's own (the loader matches an already loaded library by its
/// bare name, so each test's is new).
struct Tree {
  fs::path root, libs, toolkit, venv, wheel;
  std::string soname;

  explicit Tree(const std::string &name) {
    root = fs::temp_directory_path() /
           ("strata-libsearch-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(root);
    libs = root / "site-libs";
    toolkit = root / "cuda";
    venv = root / "venv";
    wheel = venv / "lib" / "python3.12" / "site-packages" / "nvidia" / "cu13" / "lib";
    for (const fs::path &folder : {libs, toolkit / "lib64", venv / "bin", wheel})
      fs::create_directories(folder);
    std::ofstream(venv / "bin" / "python3") << "#!/bin/sh\n";
    fs::permissions(venv / "bin" / "python3", fs::perms::owner_all);
    soname = "libstrata-fake-" + name + ".so.13";
  }
  ~Tree() { fs::remove_all(root); }

  void library(const fs::path &folder) const {
    fs::copy_file(STRATA_FAKE_CUDA_LIBRARY, folder / soname);
  }
  void garbage(const fs::path &folder) const {
    std::ofstream(folder / soname) << "not a library";
  }
  LibrarySearch search(bool withLibs = true) const {
    LibrarySearch s;
    s.strataCudaLibs = withLibs ? "/nonexistent-strata-folder:" + libs.string() : "";
    s.cudaHome = toolkit.string();
    s.path = "/nonexistent-strata-bin:" + (venv / "bin").string();
    s.useLoaderPath = false;
    return s;
  }
  FoundLibrary open(const LibrarySearch &s, std::string &error) const {
    return openCudaLibrary(s, {soname}, "the test needs its library", error);
  }
};

bool works(const FoundLibrary &found) {
  auto fn = reinterpret_cast<int (*)()>(dlsym(found.handle, "strataFakeCudaLibrary"));
  return fn && fn() == 23;
}

} // namespace

TEST(LibrarySearch, StrataCudaLibsComesFirst) {
  Tree tree("first");
  tree.library(tree.libs);
  tree.library(tree.toolkit / "lib64");
  tree.library(tree.wheel);
  std::string error;
  FoundLibrary found = tree.open(tree.search(), error);
  ASSERT_NE(found.handle, nullptr) << error;
  EXPECT_TRUE(works(found));
  EXPECT_EQ(found.how, "STRATA_CUDA_LIBS");
  EXPECT_EQ(fs::path(found.path), tree.libs / tree.soname);
}

TEST(LibrarySearch, ThenTheToolkitThenPythonsWheels) {
  Tree tree("toolkit");
  tree.library(tree.toolkit / "lib64");
  tree.library(tree.wheel);
  std::string error;
  FoundLibrary found = tree.open(tree.search(), error);
  ASSERT_NE(found.handle, nullptr) << error;
  EXPECT_EQ(found.how, "CUDA_HOME");
  EXPECT_EQ(fs::path(found.path), tree.toolkit / "lib64" / tree.soname);

  Tree wheels("wheels");
  wheels.library(wheels.wheel);
  found = wheels.open(wheels.search(false), error);
  ASSERT_NE(found.handle, nullptr) << error;
  EXPECT_TRUE(works(found));
  EXPECT_EQ(found.how, (wheels.venv / "bin" / "python3").string() + "'s wheels");
  EXPECT_EQ(fs::path(found.path), wheels.wheel / wheels.soname);
}

TEST(LibrarySearch, AVirtualEnvironmentsLinkedPythonFindsItsOwnWheels) {
  // A venv's bin/python3 links to the system's; the wheels are the venv's.
  Tree tree("venv-link");
  fs::remove(tree.venv / "bin" / "python3");
  fs::create_symlink("/bin/sh", tree.venv / "bin" / "python3");
  tree.library(tree.wheel);
  std::string error;
  FoundLibrary found = tree.open(tree.search(false), error);
  ASSERT_NE(found.handle, nullptr) << error;
  EXPECT_EQ(fs::path(found.path), tree.wheel / tree.soname);
}

TEST(LibrarySearch, AFileThatIsNoLibraryIsPassedAndNamed) {
  Tree tree("garbage");
  tree.garbage(tree.libs);
  tree.library(tree.toolkit / "lib64");
  std::string error;
  FoundLibrary found = tree.open(tree.search(), error);
  ASSERT_NE(found.handle, nullptr) << error;
  EXPECT_EQ(found.how, "CUDA_HOME");

  Tree only("garbage-only");
  only.garbage(only.libs);
  found = only.open(only.search(), error);
  EXPECT_EQ(found.handle, nullptr);
  EXPECT_NE(error.find("a copy there would not load: " + (only.libs / only.soname).string()),
            std::string::npos)
      << error;
}

TEST(LibrarySearch, NotFoundIsOneLineNamingEveryPlace) {
  Tree tree("nowhere");
  std::string error;
  FoundLibrary found = tree.open(tree.search(), error);
  EXPECT_EQ(found.handle, nullptr);
  EXPECT_EQ(found.path, "");
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(error, "the test needs its library (" + tree.soname +
                       ") is not in any place looked: /nonexistent-strata-folder, " +
                       tree.libs.string() + ", " + (tree.toolkit / "lib64").string() +
                       ", " + tree.wheel.string() +
                       " (STRATA_CUDA_LIBS=FOLDER:... names where it is)");

  // A python3 without nvidia wheels is named as such.
  fs::remove_all(tree.venv / "lib");
  tree.open(tree.search(), error);
  EXPECT_NE(error.find((tree.toolkit / "lib64").string() + ", no nvidia wheels beside " +
                       (tree.venv / "bin" / "python3").string() + " (STRATA_CUDA_LIBS="),
            std::string::npos)
      << error;

  // The library path, when searched, is named too; no python3 at all.
  LibrarySearch s = tree.search(false);
  s.useLoaderPath = true;
  s.path = "/nonexistent-strata-bin";
  tree.open(s, error);
  EXPECT_NE(error.find("not in any place looked: the library path, " +
                       (tree.toolkit / "lib64").string() +
                       ", no python3 on PATH for wheels"),
            std::string::npos)
      << error;
}

TEST(LibrarySearch, TheEnvironmentIsRead) {
  // The test's own values, the caller's put back after.
  std::string saved[2];
  bool had[2];
  const char *names[2] = {"STRATA_CUDA_LIBS", "CUDA_HOME"};
  for (int i = 0; i < 2; ++i)
    if ((had[i] = std::getenv(names[i]) != nullptr))
      saved[i] = std::getenv(names[i]);
  setenv("STRATA_CUDA_LIBS", "/a:/b", 1);
  setenv("CUDA_HOME", "/opt/cuda-x", 1);
  LibrarySearch s = LibrarySearch::fromEnvironment();
  EXPECT_EQ(s.strataCudaLibs, "/a:/b");
  EXPECT_EQ(s.cudaHome, "/opt/cuda-x");
  std::vector<LibrarySearch::Place> places = s.places();
  ASSERT_GE(places.size(), 4u);
  EXPECT_EQ(places[0].folder, "/a");
  EXPECT_EQ(places[1].folder, "/b");
  EXPECT_EQ(places[2].folder, "");
  EXPECT_EQ(places[3].folder, "/opt/cuda-x/lib64");
  unsetenv("STRATA_CUDA_LIBS");
  unsetenv("CUDA_HOME");
  EXPECT_EQ(LibrarySearch::fromEnvironment().places()[1].folder, "/usr/local/cuda/lib64");
  for (int i = 0; i < 2; ++i)
    if (had[i])
      setenv(names[i], saved[i].c_str(), 1);
}
