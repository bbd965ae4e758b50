/* test_numeric.c - placeholder, replaced by the real suite. */
#include "tf_test.h"

START_TEST(test_placeholder)
{
	ck_assert(1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("numeric");
	TCase *tc = tcase_create("placeholder");

	tcase_add_test(tc, test_placeholder);
	suite_add_tcase(s, tc);
	return s;
}

TF_TEST_MAIN(suite)
