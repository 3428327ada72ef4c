// a header that includes the prelude too, as headers read alone may
#include "../defaults/prelude.cuh"
