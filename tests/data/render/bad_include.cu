#include "inc/bad.h"
