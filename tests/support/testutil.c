/* See testutil.h. */
#include "tests/support/testutil.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *evd_test_shared_dir(void)
{
    static char path[PATH_MAX];
    const char *env = getenv("EVALD_SHARED_DIR");
    int n;
    if (env != NULL && *env != '\0')
        n = snprintf(path, sizeof(path), "%s", env);
    else
        n = snprintf(path, sizeof(path), "%s/../shared", EVALD_SOURCE_DIR);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        fprintf(stderr, "shared folder path is longer than %d bytes\n", PATH_MAX - 1);
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return NULL;
    return path;
}

json_t *evd_test_load_json(const char *path)
{
    json_error_t jerr;
    json_t *v = json_load_file(path, JSON_DECODE_ANY, &jerr);
    if (v == NULL)
        fprintf(stderr, "could not load %s: %s (line %d)\n", path, jerr.text, jerr.line);
    return v;
}

json_t *evd_test_seed_reference(void)
{
    static json_t *seed;
    if (seed != NULL)
        return seed;
    const char *dir = evd_test_shared_dir();
    if (dir == NULL)
        return NULL;
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/spec/seed/eval-api-reference.json", dir);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        fprintf(stderr, "seed path under %s is longer than %d bytes\n", dir, PATH_MAX - 1);
        return NULL;
    }
    seed = evd_test_load_json(path);
    return seed;
}

json_t *evd_test_seed_function(const char *name)
{
    json_t *seed = evd_test_seed_reference();
    if (seed == NULL)
        return NULL;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(seed, "functions"), i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "name")) ?: "", name) == 0)
            return f;
    }
    return NULL;
}

void evd_test_skip_note(const char *what)
{
    fprintf(stderr, "SKIPPED: %s (../shared is absent, as on a user's machine)\n", what);
}

int evd_test_run_suite(void *suite)
{
    SRunner *sr = srunner_create((Suite *)suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
