/*
 * Conformance: every draft-07 case of the official JSON-Schema-Test-Suite (a snapshot in
 * ../shared/conformance), with the suite's remotes/ preloaded under http://localhost:1234/.
 * The required cases must all pass; optional/ cases are run and their failures listed
 * without failing the test. Prints SKIPPED and passes when ../shared is absent.
 */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "schema/jsonschema.h"
#include "tests/support/testutil.h"

static char suite_dir[PATH_MAX];

static bool find_suite(void)
{
    const char *shared = evd_test_shared_dir();
    if (shared == NULL)
        return false;
    snprintf(suite_dir, sizeof(suite_dir), "%s/conformance/JSON-Schema-Test-Suite", shared);
    struct stat st;
    return stat(suite_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of dir ending in `suffix` (or directories when NULL). */
static size_t list_dir(const char *dir, const char *suffix, char ***out)
{
    DIR *d = opendir(dir);
    size_t n = 0, cap = 0;
    char **names = NULL;
    if (d == NULL) {
        *out = NULL;
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char full[PATH_MAX];
        snprintf(full, sizeof(full), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        bool want = suffix == NULL ? S_ISDIR(st.st_mode)
                                   : S_ISREG(st.st_mode) && len > strlen(suffix) &&
                                         strcmp(e->d_name + len - strlen(suffix), suffix) == 0;
        if (!want)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            names = realloc(names, cap * sizeof(*names));
            ck_assert_ptr_nonnull(names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof(*names), cmp_str);
    *out = names;
    return n;
}

static void free_list(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Loads a JSON file; big integers (optional/bignum.json) fall back to reals. */
static json_t *load(const char *path)
{
    json_t *v = json_load_file(path, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (v == NULL)
        v = json_load_file(path, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
    if (v == NULL)
        fprintf(stderr, "could not load %s\n", path);
    return v;
}

static void load_remotes(json_t *remotes, const char *dir, const char *rel)
{
    char **files;
    size_t n = list_dir(dir, ".json", &files);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX], uri[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        snprintf(uri, sizeof(uri), "http://localhost:1234/%s%s", rel, files[i]);
        json_t *doc = load(path);
        if (doc != NULL)
            json_object_set_new(remotes, uri, doc);
    }
    free_list(files, n);
    char **dirs;
    n = list_dir(dir, NULL, &dirs);
    for (size_t i = 0; i < n; i++) {
        char sub[PATH_MAX], subrel[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s/%s", dir, dirs[i]);
        snprintf(subrel, sizeof(subrel), "%s%s/", rel, dirs[i]);
        load_remotes(remotes, sub, subrel);
    }
    free_list(dirs, n);
}

struct tally {
    size_t total, passed;
};

/* Runs one suite file; prints each failing case prefixed by `label`. */
static void run_file(const char *path, const char *label, json_t *remotes, struct tally *t)
{
    json_t *groups = load(path);
    ck_assert_msg(groups != NULL, "cannot read %s", path);
    size_t gi;
    json_t *group;
    json_array_foreach(groups, gi, group)
    {
        const char *gdesc = json_string_value(json_object_get(group, "description"));
        json_t *tests = json_object_get(group, "tests");
        struct evd_err err = {0};
        struct evd_jsonschema *v =
            evd_jsonschema_new_with_remotes(json_object_get(group, "schema"), remotes, &err);
        size_t ti;
        json_t *test;
        json_array_foreach(tests, ti, test)
        {
            const char *tdesc = json_string_value(json_object_get(test, "description"));
            bool expect = json_is_true(json_object_get(test, "valid"));
            t->total++;
            if (v == NULL) {
                printf("FAIL %s: %s / %s: schema rejected: %s\n", label, gdesc, tdesc, err.msg);
                continue;
            }
            json_t *data = json_object_get(test, "data");
            struct evd_schema_error errs[4];
            size_t nerr = evd_jsonschema_validate(v, data, errs, 4);
            bool quick = evd_jsonschema_is_valid(v, data);
            if ((nerr == 0) == expect && quick == expect) {
                t->passed++;
                continue;
            }
            printf("FAIL %s: %s / %s: expected %s, got %zu error(s)%s%s%s\n", label, gdesc, tdesc,
                   expect ? "valid" : "invalid", nerr,
                   quick != (nerr == 0) ? " (fast path differs)" : "", nerr ? ", first: " : "",
                   nerr ? errs[0].message : "");
        }
        evd_jsonschema_free(v);
    }
    json_decref(groups);
}

static void run_dir(const char *dir, const char *prefix, json_t *remotes, struct tally *t)
{
    char **files;
    size_t n = list_dir(dir, ".json", &files);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX], label[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        snprintf(label, sizeof(label), "%s%s", prefix, files[i]);
        run_file(path, label, remotes, t);
    }
    free_list(files, n);
}

START_TEST(draft7_required_cases_all_pass)
{
    if (!find_suite()) {
        evd_test_skip_note("JSON-Schema-Test-Suite draft7");
        return;
    }
    json_t *remotes = json_object();
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/remotes", suite_dir);
    load_remotes(remotes, dir, "");
    ck_assert_uint_gt(json_object_size(remotes), 10);

    struct tally t = {0};
    snprintf(dir, sizeof(dir), "%s/tests/draft7", suite_dir);
    run_dir(dir, "", remotes, &t);
    printf("draft7: %zu/%zu passed\n", t.passed, t.total);
    fflush(stdout);
    json_decref(remotes);
    ck_assert_uint_gt(t.total, 900);
    ck_assert_uint_eq(t.passed, t.total);
}
END_TEST

START_TEST(draft7_optional_cases_are_reported)
{
    if (!find_suite()) {
        evd_test_skip_note("JSON-Schema-Test-Suite draft7 optional");
        return;
    }
    json_t *remotes = json_object();
    char dir[PATH_MAX + 48];
    snprintf(dir, sizeof(dir), "%s/remotes", suite_dir);
    load_remotes(remotes, dir, "");

    struct tally t = {0};
    snprintf(dir, sizeof(dir), "%s/tests/draft7/optional", suite_dir);
    run_dir(dir, "optional/", remotes, &t);
    snprintf(dir, sizeof(dir), "%s/tests/draft7/optional/format", suite_dir);
    run_dir(dir, "optional/format/", remotes, &t);
    printf("draft7 optional: %zu/%zu passed (failures above are informational)\n", t.passed,
           t.total);
    fflush(stdout);
    json_decref(remotes);
    ck_assert_uint_gt(t.total, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonschema_suite");
    TCase *tc = tcase_create("draft7");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, draft7_required_cases_all_pass);
    tcase_add_test(tc, draft7_optional_cases_are_reported);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
