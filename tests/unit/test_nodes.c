#include "tf_test.h"
static Suite *nodes_suite(void) { return suite_create("nodes"); }
TF_TEST_MAIN(nodes_suite)
