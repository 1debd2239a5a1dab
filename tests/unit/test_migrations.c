/* The embedded migrations: distinct, increasing versions, each a non-empty SQL file. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/assets.h"
#include "store/db.h"
#include "tests/support/testutil.h"

START_TEST(versions_are_distinct_and_increasing)
{
    struct evd_err err = {0};
    ck_assert_msg(evd_db_check_migrations(&err) == EVD_OK, "%s", err.msg);
    int n = 0, last = 0;
    for (const struct evd_asset *a = evd_migrations; a->path != NULL; a++, n++) {
        ck_assert_int_gt(atoi(a->path), last);
        last = atoi(a->path);
        ck_assert(strstr(a->path, ".sql") != NULL);
        ck_assert_uint_gt(a->len, 0);
    }
    ck_assert_int_eq(n, evd_db_migration_count());
    ck_assert_int_ge(n, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("migrations");
    TCase *tc = tcase_create("migrations");
    tcase_add_test(tc, versions_are_distinct_and_increasing);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
