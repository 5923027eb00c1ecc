//===- GraphInterfaces.cpp - per-op rules of the graph ops ----------------===//
#include "dialects/graph/GraphInterfaces.h"

#include "dialects/graph/GraphInterfaces.cpp.inc"
