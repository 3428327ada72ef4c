// top: its text is copied as it is, ${braces} and all
#include "inc/one.h"
#include <stdint.h>
#include "not_here.h"
#include "inc/one.h"
