#include "runtime/high/High.h"
#include "runtime/low/Other.h"
