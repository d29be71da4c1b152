#include "helper.h"
#include <criterion/new/assert.h>
TestSuite(barrier, .timeout = 60);
Test(barrier, placeholder) { cr_assert(true); }
