//===- LibrarySearch.cpp - CUDA's libraries where GPU nodes keep them -----===//
#include "runtime/base/LibrarySearch.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <set>

namespace strata::runtime {

namespace {

std::string environment(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

std::vector<std::string> splitPathList(const std::string &list) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(':', begin);
    if (end == std::string::npos)
      end = list.size();
    if (end > begin)
      parts.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// The first executable python3 on `path`, or "".
std::string findPython(const std::string &path) {
  for (const std::string &folder : splitPathList(path)) {
    std::string candidate = folder + "/python3";
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::vector<std::string> globFolders(const std::string &pattern) {
  std::vector<std::string> folders;
  glob_t matches{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &matches) == 0)
    for (size_t i = 0; i < matches.gl_pathc; ++i)
      folders.push_back(matches.gl_pathv[i]);
  globfree(&matches);
  return folders;
}

/// The file a handle's library was loaded from.
std::string loadedPath(void *handle, const std::string &fallback) {
  struct link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
      *map->l_name)
    return map->l_name;
  return fallback;
}

} // namespace

LibrarySearch LibrarySearch::fromEnvironment() {
  LibrarySearch search;
  search.strataCudaLibs = environment("STRATA_CUDA_LIBS");
  search.cudaHome = environment("CUDA_HOME");
  search.path = environment("PATH");
  return search;
}

std::vector<LibrarySearch::Place> LibrarySearch::places() const {
  std::vector<Place> places;
  for (const std::string &folder : splitPathList(strataCudaLibs))
    places.push_back({folder, "STRATA_CUDA_LIBS"});
  if (useLoaderPath)
    places.push_back({"", "the library path"});
  std::string home = cudaHome.empty() ? "/usr/local/cuda" : cudaHome;
  places.push_back({home + "/lib64", cudaHome.empty()
                                         ? "the CUDA Toolkit's usual place"
                                         : "CUDA_HOME"});
  std::string python = findPython(path);
  if (!python.empty()) {
    // A virtual environment's bin/python3 links to the system's: its own
    // prefix holds the wheels, so the link's is looked at second.
    std::vector<std::string> prefixes = {parentOf(parentOf(python))};
    char resolved[PATH_MAX];
    if (realpath(python.c_str(), resolved)) {
      std::string other = parentOf(parentOf(resolved));
      if (other != prefixes.front())
        prefixes.push_back(other);
    }
    std::set<std::string> seen;
    for (const std::string &prefix : prefixes)
      for (const char *packages : {"site-packages", "dist-packages"})
        for (const std::string &folder :
             globFolders(prefix + "/lib/python3*/" + packages + "/nvidia/*/lib"))
          if (seen.insert(folder).second)
            places.push_back({folder, python + "'s wheels"});
  }
  return places;
}

FoundLibrary openCudaLibrary(const LibrarySearch &search,
                             const std::vector<std::string> &sonames,
                             const std::string &needed, std::string &error) {
  error.clear();
  std::string firstLoadError;
  std::vector<std::string> looked;
  bool wheels = false;
  for (const LibrarySearch::Place &place : search.places()) {
    wheels |= place.origin.find("'s wheels") != std::string::npos;
    for (const std::string &soname : sonames) {
      std::string file =
          place.folder.empty() ? soname : place.folder + "/" + soname;
      // A folder that lacks the file is no error; one that has a file the
      // loader refuses (a missing dependency, another architecture) is.
      if (!place.folder.empty() && access(file.c_str(), F_OK) != 0)
        continue;
      if (void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL))
        return {handle, loadedPath(handle, file), place.origin};
      if (!place.folder.empty() && firstLoadError.empty())
        if (const char *why = dlerror())
          firstLoadError = why;
    }
    if (place.folder.empty())
      looked.push_back("the library path");
    else
      looked.push_back(place.folder);
  }
  std::string list;
  for (const std::string &place : looked)
    list += (list.empty() ? "" : ", ") + place;
  error = needed + " (" + sonames.front() + ") is not in any place looked: " +
          list;
  if (!wheels) {
    std::string python = findPython(search.path);
    error += python.empty() ? ", no python3 on PATH for wheels"
                            : ", no nvidia wheels beside " + python;
  }
  if (!firstLoadError.empty())
    error += "; a copy there would not load: " + firstLoadError;
  error += " (STRATA_CUDA_LIBS=FOLDER:... names where it is)";
  return {};
}

} // namespace strata::runtime
