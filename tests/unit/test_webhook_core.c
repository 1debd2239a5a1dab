/*
 * Unit tests of the webhooks module's pure parts: sealing secrets, signatures,
 * the destination policy (allowlist, addresses, URLs) and the backoff schedule.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/testutil.h"
#include "webhooks/policy.h"
#include "webhooks/seal.h"
#include "webhooks/webhooks.h"

static const char KEY_HEX[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

START_TEST(key_parse_accepts_only_64_hex)
{
    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(KEY_HEX, key));
    ck_assert_int_eq(key[0], 0x00);
    ck_assert_int_eq(key[31], 0x1f);
    char upper[65];
    strcpy(upper, KEY_HEX);
    upper[62] = 'A';
    ck_assert(evd_webhook_key_parse(upper, key));
    ck_assert_int_eq(key[31], 0xaf);
    ck_assert(!evd_webhook_key_parse(NULL, key));
    ck_assert(!evd_webhook_key_parse("", key));
    ck_assert(!evd_webhook_key_parse("0011", key));
    char bad[66];
    strcpy(bad, KEY_HEX);
    bad[10] = 'g';
    ck_assert(!evd_webhook_key_parse(bad, key));
    strcpy(bad, KEY_HEX);
    strcat(bad, "0");
    ck_assert(!evd_webhook_key_parse(bad, key));
}
END_TEST

START_TEST(seal_round_trips_and_detects_tampering)
{
    unsigned char key[EVD_WEBHOOK_KEY_LEN], other[EVD_WEBHOOK_KEY_LEN];
    ck_assert(evd_webhook_key_parse(KEY_HEX, key));
    memcpy(other, key, sizeof(key));
    other[5] ^= 1;
    const char *secret = "whsec_Canary-Secret-0123456789";
    char *a = evd_webhook_seal(key, "sub_1", secret, strlen(secret));
    char *b = evd_webhook_seal(key, "sub_1", secret, strlen(secret));
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert(strncmp(a, "v1:", 3) == 0);
    ck_assert_msg(strcmp(a, b) != 0, "two seals of one secret must differ (fresh nonce)");
    ck_assert_ptr_null(strstr(a, "Canary"));

    size_t len = 0;
    char *plain = evd_webhook_unseal(key, "sub_1", a, &len);
    ck_assert_ptr_nonnull(plain);
    ck_assert_uint_eq(len, strlen(secret));
    ck_assert_str_eq(plain, secret);
    evd_webhook_secret_free(plain, len);

    /* Another key, another subscription id, or a changed byte: refused. */
    ck_assert_ptr_null(evd_webhook_unseal(other, "sub_1", a, &len));
    ck_assert_ptr_null(evd_webhook_unseal(key, "sub_2", a, &len));
    char *t = strdup(a);
    size_t n = strlen(t);
    t[n - 40] = t[n - 40] == '0' ? '1' : '0'; /* inside the ciphertext */
    ck_assert_ptr_null(evd_webhook_unseal(key, "sub_1", t, &len));
    strcpy(t, a);
    t[n - 1] = t[n - 1] == '0' ? '1' : '0'; /* the tag */
    ck_assert_ptr_null(evd_webhook_unseal(key, "sub_1", t, &len));
    free(t);
    const char *malformed[] = {"", "v1:", "v2:00:00:00", "v1:zz:00:00", a + 3};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++)
        ck_assert_ptr_null(evd_webhook_unseal(key, "sub_1", malformed[i], &len));
    free(a);
    free(b);
}
END_TEST

START_TEST(signature_matches_an_independent_hmac)
{
    /* Expected value from `openssl dgst -sha256 -hmac whsec_0123456789abcdef` over
     * "1767225604." followed by the body. */
    const char *body = "{\"evaluation_id\":\"eval_1\",\"status\":\"completed\","
                       "\"timestamp\":1767225603900,\"eligible\":true}";
    char sig[EVD_WEBHOOK_SIG_MAX];
    const char *secret = "whsec_0123456789abcdef";
    ck_assert(evd_webhook_sign(secret, strlen(secret), 1767225604, body, strlen(body), sig));
    ck_assert_str_eq(sig, "t=1767225604,v1="
                          "334bbc3829e7fcc0904cac43b0a95e55a49e809d80c52032d75691ed8b8d753f");
    char other[EVD_WEBHOOK_SIG_MAX];
    ck_assert(evd_webhook_sign(secret, strlen(secret), 1767225605, body, strlen(body), other));
    ck_assert_str_ne(sig, other);
}
END_TEST

struct addr_case {
    const char *addr;
    bool is_public;
};

static const struct addr_case addr_cases[] = {
    {"8.8.8.8", true},
    {"93.184.216.34", true},
    {"172.15.255.255", true},
    {"172.32.0.1", true},
    {"100.63.255.255", true},
    {"2606:4700::1111", true},
    {"::ffff:8.8.8.8", true},
    {"0.0.0.0", false},
    {"10.1.2.3", false},
    {"100.64.0.1", false},
    {"127.0.0.1", false},
    {"127.255.0.9", false},
    {"169.254.169.254", false},
    {"172.16.0.1", false},
    {"172.31.255.254", false},
    {"192.168.0.10", false},
    {"192.0.2.5", false},
    {"198.18.0.1", false},
    {"224.0.0.1", false},
    {"255.255.255.255", false},
    {"::", false},
    {"::1", false},
    {"::ffff:127.0.0.1", false},
    {"::ffff:10.0.0.1", false},
    {"64:ff9b::a9fe:a9fe", false},
    {"2002:a00:1::", false},
    {"fc00::1", false},
    {"fd00:ec2::254", false},
    {"fe80::1", false},
    {"febf::1", false},
    {"ff02::1", false},
    {"2001:db8::1", false},
};

START_TEST(address_classification)
{
    const struct addr_case *c = &addr_cases[_i];
    bool literal = false;
    ck_assert_msg(evd_webhook_literal_public(c->addr, &literal) == c->is_public, "%s", c->addr);
    ck_assert(literal);
    /* The socket-address form agrees with the literal form. */
    struct sockaddr_storage ss = {0};
    if (strchr(c->addr, ':')) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, c->addr, &in6->sin6_addr), 1);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, c->addr, &in->sin_addr), 1);
    }
    ck_assert_msg(evd_webhook_addr_public((struct sockaddr *)&ss) == c->is_public, "%s", c->addr);
}
END_TEST

START_TEST(names_are_not_literals)
{
    bool literal = true;
    ck_assert(!evd_webhook_literal_public("example.com", &literal));
    ck_assert(!literal);
    struct sockaddr sa = {.sa_family = AF_UNIX};
    ck_assert(!evd_webhook_addr_public(&sa));
    ck_assert(!evd_webhook_addr_public(NULL));
}
END_TEST

struct trust_case {
    const char *allow;
    const char *host;
    enum evd_webhook_trust want;
};

static const struct trust_case trust_cases[] = {
    {NULL, "example.com", EVD_WEBHOOK_PUBLIC_ONLY},
    {"", "127.0.0.1", EVD_WEBHOOK_PUBLIC_ONLY},
    {"127.0.0.1", "127.0.0.1", EVD_WEBHOOK_TRUSTED},
    {"127.0.0.1", "127.0.0.2", EVD_WEBHOOK_DENIED},
    {"127.0.0.1", "example.com", EVD_WEBHOOK_DENIED},
    {" hooks.example.com , 127.0.0.1 ", "HOOKS.Example.com", EVD_WEBHOOK_TRUSTED},
    {"*.example.com", "a.example.com", EVD_WEBHOOK_PUBLIC_ONLY},
    {"*.example.com", "b.a.example.com", EVD_WEBHOOK_PUBLIC_ONLY},
    {"*.example.com", "example.com", EVD_WEBHOOK_DENIED},
    {"*.example.com", "badexample.com", EVD_WEBHOOK_DENIED},
    {"*.example.com,a.example.com", "a.example.com", EVD_WEBHOOK_TRUSTED},
    {"[::1]", "::1", EVD_WEBHOOK_TRUSTED},
    {"::1", "0:0:0:0:0:0:0:1", EVD_WEBHOOK_TRUSTED},
    {"*.0.0.1", "127.0.0.1", EVD_WEBHOOK_DENIED},
    {"localhost", "localhost", EVD_WEBHOOK_TRUSTED},
};

START_TEST(allowlist_trust)
{
    const struct trust_case *c = &trust_cases[_i];
    struct evd_webhook_policy *p = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_webhook_policy_parse(c->allow, &p, &err), EVD_OK);
    ck_assert_msg(evd_webhook_policy_host(p, c->host) == c->want, "allow=%s host=%s",
                  c->allow ? c->allow : "(unset)", c->host);
    evd_webhook_policy_free(p);
}
END_TEST

START_TEST(allowlist_refuses_bad_entries)
{
    const char *bad[] = {"http://example.com", "example.com:8080", "exa mple.com",
                         "*example.com",       "a.*.example.com",  "..",
                         "example.com/path"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct evd_webhook_policy *p = NULL;
        struct evd_err err = {0};
        ck_assert_msg(evd_webhook_policy_parse(bad[i], &p, &err) == EVD_EINVAL, "%s", bad[i]);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(err.msg, "EVALD_WEBHOOK_ALLOW_HOSTS") != NULL, "%s", err.msg);
    }
}
END_TEST

struct url_case {
    const char *allow;
    const char *url;
    enum evd_code want;
    const char *host_or_message; /* the host on success, a fragment of the message else */
};

static const struct url_case url_cases[] = {
    {NULL, "https://hooks.example.com/evald?x=1", EVD_OK, "hooks.example.com"},
    {NULL, "HTTP://Hooks.Example.COM:8443/a", EVD_OK, "hooks.example.com"},
    {NULL, "http://93.184.216.34/", EVD_OK, "93.184.216.34"},
    {NULL, "ftp://example.com/x", EVD_EINVAL, "http or https"},
    {NULL, "example.com/x", EVD_EINVAL, "http or https"},
    {NULL, "http://", EVD_EINVAL, "url"},
    {NULL, "http://exa mple.com/", EVD_EINVAL, "spaces"},
    {NULL, "http://user:pw@example.com/", EVD_EINVAL, "user name or password"},
    {NULL, "http://127.0.0.1:8080/", EVD_EINVAL, "loopback, private or link-local"},
    {NULL, "http://[::1]/", EVD_EINVAL, "loopback"},
    {NULL, "http://localhost/", EVD_EINVAL, "loopback"},
    {NULL, "http://api.localhost/", EVD_EINVAL, "loopback"},
    {NULL, "http://10.0.0.7/", EVD_EINVAL, "private"},
    {NULL, "http://169.254.169.254/latest/meta-data", EVD_EINVAL, "link-local"},
    {NULL, "http://[fd00:ec2::254]/", EVD_EINVAL, "private"},
    {NULL, "http://2130706433/", EVD_EINVAL, "loopback"}, /* 127.0.0.1 spelled as a number */
    {"127.0.0.1", "http://127.0.0.1:9/hook", EVD_OK, "127.0.0.1"},
    {"127.0.0.1", "http://10.0.0.7/", EVD_EINVAL, "not allowed by EVALD_WEBHOOK_ALLOW_HOSTS"},
    {"127.0.0.1", "https://example.com/", EVD_EINVAL, "not allowed"},
    {"*.example.com", "https://a.example.com/", EVD_OK, "a.example.com"},
    {"*.example.com", "https://example.com/", EVD_EINVAL, "not allowed"},
    {"[::1]", "http://[::1]:8080/", EVD_OK, "::1"},
};

START_TEST(url_check)
{
    const struct url_case *c = &url_cases[_i];
    struct evd_webhook_policy *p = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_webhook_policy_parse(c->allow, &p, &err), EVD_OK);
    char host[256] = "";
    enum evd_code rc = evd_webhook_url_check(p, c->url, host, sizeof(host), &err);
    ck_assert_msg(rc == c->want, "%s: got %d (%s)", c->url, rc, err.msg);
    if (rc == EVD_OK) {
        ck_assert_str_eq(host, c->host_or_message);
    } else {
        ck_assert_msg(strncmp(err.msg, "url", 3) == 0, "%s", err.msg);
        ck_assert_msg(strstr(err.msg, c->host_or_message) != NULL, "%s: %s", c->url, err.msg);
    }
    evd_webhook_policy_free(p);
}
END_TEST

START_TEST(url_length_is_bounded)
{
    char *url = malloc(2100);
    strcpy(url, "https://example.com/");
    memset(url + 20, 'a', 2060);
    url[2080] = '\0';
    struct evd_err err = {0};
    char host[256];
    ck_assert_int_eq(evd_webhook_url_check(NULL, url, host, sizeof(host), &err), EVD_EINVAL);
    ck_assert(strstr(err.msg, "2048") != NULL);
    free(url);
}
END_TEST

START_TEST(backoff_doubles_with_jitter_up_to_the_cap)
{
    /* The middle of the jitter range is the plain schedule. */
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 1, 0.5), 5000);
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 2, 0.5), 10000);
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 3, 0.5), 20000);
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 11, 0.5), EVD_WEBHOOK_BACKOFF_CAP_MS);
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 40, 0.5), EVD_WEBHOOK_BACKOFF_CAP_MS);
    ck_assert_int_eq(evd_webhook_backoff_ms(5000, 1000000, 0.5), EVD_WEBHOOK_BACKOFF_CAP_MS);
    /* Jitter stays within ±25 %. */
    ck_assert_int_eq(evd_webhook_backoff_ms(4000, 1, 0.0), 3000);
    ck_assert_int_le(evd_webhook_backoff_ms(4000, 1, 0.999999), 5000);
    ck_assert_int_ge(evd_webhook_backoff_ms(4000, 1, 0.999999), 4999);
    /* Retries keep going for at least the retry window with the default base. */
    long long total = 0;
    int attempts = 0;
    while (total < EVD_WEBHOOK_RETRY_WINDOW_MS)
        total += evd_webhook_backoff_ms(5000, ++attempts, 0.0);
    ck_assert_int_gt(attempts, 20);
    ck_assert_int_lt(attempts, 60);
}
END_TEST

struct events_case {
    const char *json; /* NULL = absent */
    bool evaluation_id;
    const char *error; /* NULL = accepted; else the whole message */
};

static const struct events_case events_cases[] = {
    {NULL, false, NULL},
    {NULL, true, NULL},
    {"[\"evaluation.completed\"]", false, NULL},
    {"[\"evaluation.completed\"]", true, NULL},
    {"[\"experiment.completed\"]", false, NULL},
    {"[\"experiment.completed\", \"evaluation.completed\"]", false, NULL},
    {"[]", false, "events must be a non-empty array of event types"},
    {"null", false, "events must be a non-empty array of event types"},
    {"{}", false, "events must be a non-empty array of event types"},
    {"\"evaluation.completed\"", false, "events must be a non-empty array of event types"},
    {"[1]", false, "events[0] must be a string"},
    {"[\"evaluation.completed\", null]", false, "events[1] must be a string"},
    {"[\"evaluation.completed\", \"foo\"]", false,
     "events[1] is not a known event type: foo (expected evaluation.completed or "
     "experiment.completed)"},
    {"[\"Evaluation.Completed\"]", false,
     "events[0] is not a known event type: Evaluation.Completed (expected "
     "evaluation.completed or experiment.completed)"},
    {"[\"eval::completed\"]", false,
     "events[0] is not a known event type: eval::completed (expected evaluation.completed or "
     "experiment.completed)"},
    {"[\"evaluation.completed\", \"evaluation.completed\"]", false,
     "events[1] repeats evaluation.completed"},
    {"[\"experiment.completed\"]", true,
     "events cannot include experiment.completed when evaluation_id is set: an evaluation "
     "filter matches that evaluation's event only"},
    {"[\"evaluation.completed\", \"experiment.completed\"]", true,
     "events cannot include experiment.completed when evaluation_id is set: an evaluation "
     "filter matches that evaluation's event only"},
};

START_TEST(events_filter_is_validated)
{
    const struct events_case *c = &events_cases[_i];
    json_t *events = c->json ? json_loads(c->json, JSON_DECODE_ANY, NULL) : NULL;
    ck_assert(c->json == NULL || events != NULL);
    struct evd_err err = {0};
    enum evd_code rc = evd_webhook_events_check(events, c->evaluation_id, &err);
    if (c->error == NULL) {
        ck_assert_msg(rc == EVD_OK, "%s: %s", c->json, err.msg);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->error);
    }
    json_decref(events);
}
END_TEST

START_TEST(events_filter_refuses_an_embedded_nul)
{
    /* "evaluation.completed\0x" is not the known type, whatever strcmp would say. */
    json_t *events = json_array();
    json_array_append_new(events, json_stringn("evaluation.completed\0x", 22));
    struct evd_err err = {0};
    ck_assert_int_eq(evd_webhook_events_check(events, false, &err), EVD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "events[0] is not a known event type"));
    json_decref(events);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("webhook_core");
    TCase *tc = tcase_create("webhooks");
    tcase_add_test(tc, key_parse_accepts_only_64_hex);
    tcase_add_test(tc, seal_round_trips_and_detects_tampering);
    tcase_add_test(tc, signature_matches_an_independent_hmac);
    tcase_add_loop_test(tc, address_classification, 0,
                        (int)(sizeof(addr_cases) / sizeof(addr_cases[0])));
    tcase_add_test(tc, names_are_not_literals);
    tcase_add_loop_test(tc, allowlist_trust, 0,
                        (int)(sizeof(trust_cases) / sizeof(trust_cases[0])));
    tcase_add_test(tc, allowlist_refuses_bad_entries);
    tcase_add_loop_test(tc, url_check, 0, (int)(sizeof(url_cases) / sizeof(url_cases[0])));
    tcase_add_test(tc, url_length_is_bounded);
    tcase_add_test(tc, backoff_doubles_with_jitter_up_to_the_cap);
    tcase_add_loop_test(tc, events_filter_is_validated, 0,
                        (int)(sizeof(events_cases) / sizeof(events_cases[0])));
    tcase_add_test(tc, events_filter_refuses_an_embedded_nul);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
