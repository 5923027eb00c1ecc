#include "runtime/low/Low.h"
