// one
#include "two.h"
#include "inc/two.h"
