#include "mlir/IR/Builders.h"
