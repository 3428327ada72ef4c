// top ${name} x${n}
#include "inc/one.h"
#include <stdint.h>
#include "not_here.h"
const char *s = "$${literal} and $x";
#include "inc/one.h"
