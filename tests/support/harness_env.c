/*
 * See harness_env.h. The table is a fixed array of name/value pairs ended by the first
 * empty slot.
 */
#include "tests/support/harness_env.h"

#include <check.h>
#include <string.h>

#include "harness/harness.h"

static const char *fake_env[16][2];

const char *hs_env_get(void *ctx, const char *name)
{
    (void)ctx;
    for (int i = 0; i < 16 && fake_env[i][0] != NULL; i++)
        if (strcmp(fake_env[i][0], name) == 0)
            return fake_env[i][1];
    return NULL;
}

void hs_env_set(const char *name, const char *value)
{
    int i = 0;
    for (; i < 15 && fake_env[i][0] != NULL; i++)
        if (strcmp(fake_env[i][0], name) == 0)
            break;
    fake_env[i][0] = name;
    fake_env[i][1] = value;
}

void hs_env_clear(void)
{
    memset(fake_env, 0, sizeof(fake_env));
}

struct evd_providers *hs_env_default_providers(void)
{
    struct evd_providers *p = NULL;
    struct evd_err err;
    hs_env_clear();
    hs_env_set("OPENAI_API_KEY", "sk-test-openai-0123456789");
    hs_env_set("ANTHROPIC_API_KEY", "sk-ant-test-abcdef");
    hs_env_set("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/");
    ck_assert_int_eq(evd_providers_load(hs_env_get, NULL, &p, &err), EVD_OK);
    return p;
}
