#include "runtime/b/B.h"
