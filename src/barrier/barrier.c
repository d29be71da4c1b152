/* placeholder */
#include "../core/internal.h"
