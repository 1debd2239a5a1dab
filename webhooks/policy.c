/*
 * The webhook destination policy; see policy.h. URLs are parsed with libcurl's URL
 * API, so evald judges the same host that libcurl will connect to.
 */
#include "webhooks/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define URL_MAX 2048
#define HOST_MAX 256
#define MAX_ENTRIES 64

struct entry {
    bool wildcard; /* "*.suffix": `name` holds "suffix" */
    char name[HOST_MAX];
};

struct evd_webhook_policy {
    size_t n; /* 0 = unset */
    struct entry entries[];
};

/* ---- addresses ---------------------------------------------------------------------- */

struct v4net {
    uint32_t net;
    int bits;
};

/* Everything that is not a public unicast IPv4 address. */
static const struct v4net v4_blocked[] = {
    {0x00000000, 8},  /* 0.0.0.0/8 "this network" */
    {0x0a000000, 8},  /* 10/8 private */
    {0x64400000, 10}, /* 100.64/10 shared address space (CGNAT) */
    {0x7f000000, 8},  /* 127/8 loopback */
    {0xa9fe0000, 16}, /* 169.254/16 link-local, cloud metadata */
    {0xac100000, 12}, /* 172.16/12 private */
    {0xc0000000, 24}, /* 192.0.0/24 IETF protocol assignments */
    {0xc0000200, 24}, /* 192.0.2/24 documentation */
    {0xc0a80000, 16}, /* 192.168/16 private */
    {0xc6120000, 15}, /* 198.18/15 benchmarking */
    {0xc6336400, 24}, /* 198.51.100/24 documentation */
    {0xcb007100, 24}, /* 203.0.113/24 documentation */
    {0xe0000000, 4},  /* 224/4 multicast */
    {0xf0000000, 4},  /* 240/4 reserved, broadcast */
};

static bool v4_public(const unsigned char b[4])
{
    uint32_t a = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    for (size_t i = 0; i < sizeof(v4_blocked) / sizeof(v4_blocked[0]); i++) {
        uint32_t mask = 0xffffffffu << (32 - v4_blocked[i].bits);
        if ((a & mask) == v4_blocked[i].net)
            return false;
    }
    return true;
}

static bool v6_public(const unsigned char b[16])
{
    static const unsigned char zero[12] = {0};
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0)
        return v4_public(b + 12);
    if (memcmp(b, zero, 12) == 0) /* ::, ::1 and the deprecated IPv4-compatible form */
        return false;
    if (b[0] == 0x20 && b[1] == 0x02) /* 2002::/16 6to4 carries an IPv4 address */
        return v4_public(b + 2);
    if ((b[0] & 0xfe) == 0xfc) /* fc00::/7 unique local */
        return false;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 link-local */
        return false;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) /* fec0::/10 site-local (deprecated) */
        return false;
    if (b[0] == 0xff) /* ff00::/8 multicast */
        return false;
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) /* 2001:db8::/32 */
        return false;
    if (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, zero, 6) == 0) /* 100::/64 discard */
        return false;
    return true;
}

bool evd_webhook_addr_public(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return v4_public((const unsigned char *)&in->sin_addr);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        return v6_public(in6->sin6_addr.s6_addr);
    }
    return false;
}

bool evd_webhook_literal_public(const char *text, bool *is_literal)
{
    unsigned char b[16];
    if (inet_pton(AF_INET, text, b) == 1) {
        *is_literal = true;
        return v4_public(b);
    }
    if (inet_pton(AF_INET6, text, b) == 1) {
        *is_literal = true;
        return v6_public(b);
    }
    *is_literal = false;
    return false;
}

/* ---- host names ---------------------------------------------------------------------- */

static void lower_copy(char *dst, size_t n, const char *src, size_t len)
{
    size_t i = 0;
    for (; i < len && i + 1 < n; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

/* Removes the brackets of an IPv6 literal in place. */
static void unbracket(char *host)
{
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253 || s[0] == '.' || s[n - 1] == '.' || strstr(s, "..") != NULL)
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-_") == n;
}

/* Two IP literals of the same address compare equal whatever their spelling. */
static bool same_host(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
        return memcmp(x, y, 16) == 0;
    return strcmp(a, b) == 0;
}

static bool is_localhost(const char *host)
{
    size_t n = strlen(host);
    return strcmp(host, "localhost") == 0 || (n > 10 && strcmp(host + n - 10, ".localhost") == 0);
}

/* ---- policy -------------------------------------------------------------------------- */

enum evd_code evd_webhook_policy_parse(const char *allow_hosts, struct evd_webhook_policy **out,
                                       struct evd_err *err)
{
    *out = NULL;
    size_t cap = 0;
    for (const char *s = allow_hosts; s && *s; s++)
        cap += *s == ',';
    cap = allow_hosts && *allow_hosts ? cap + 1 : 0;
    if (cap > MAX_ENTRIES)
        return evd_err_set(err, EVD_EINVAL, "EVALD_WEBHOOK_ALLOW_HOSTS has more than %d entries",
                           MAX_ENTRIES);
    struct evd_webhook_policy *p = calloc(1, sizeof(*p) + cap * sizeof(struct entry));
    if (p == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *s = allow_hosts;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        while (len > 0 && isspace((unsigned char)*s)) {
            s++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)s[len - 1]))
            len--;
        if (len > 0) {
            struct entry *e = &p->entries[p->n];
            char item[HOST_MAX];
            if (len >= sizeof(item)) {
                evd_webhook_policy_free(p);
                return evd_err_set(err, EVD_EINVAL,
                                   "EVALD_WEBHOOK_ALLOW_HOSTS: an entry is longer than %d "
                                   "characters",
                                   HOST_MAX - 1);
            }
            lower_copy(item, sizeof(item), s, len);
            unbracket(item);
            bool literal = false;
            evd_webhook_literal_public(item, &literal);
            e->wildcard = strncmp(item, "*.", 2) == 0;
            snprintf(e->name, sizeof(e->name), "%s", e->wildcard ? item + 2 : item);
            if (!literal && !valid_name(e->name)) {
                evd_err_set(err, EVD_EINVAL,
                            "EVALD_WEBHOOK_ALLOW_HOSTS: \"%s\" is not a host name, an IP address "
                            "or a *.domain pattern",
                            item);
                evd_webhook_policy_free(p);
                return EVD_EINVAL;
            }
            p->n++;
        }
        s = comma ? comma + 1 : NULL;
    }
    *out = p;
    return EVD_OK;
}

void evd_webhook_policy_free(struct evd_webhook_policy *p)
{
    free(p);
}

enum evd_webhook_trust evd_webhook_policy_host(const struct evd_webhook_policy *p, const char *host)
{
    if (p == NULL || p->n == 0)
        return EVD_WEBHOOK_PUBLIC_ONLY;
    char h[HOST_MAX];
    lower_copy(h, sizeof(h), host, strlen(host));
    unbracket(h);
    bool literal = false;
    evd_webhook_literal_public(h, &literal);
    enum evd_webhook_trust best = EVD_WEBHOOK_DENIED;
    for (size_t i = 0; i < p->n; i++) {
        const struct entry *e = &p->entries[i];
        if (!e->wildcard && same_host(h, e->name))
            return EVD_WEBHOOK_TRUSTED;
        size_t hl = strlen(h), sl = strlen(e->name);
        if (e->wildcard && !literal && hl > sl + 1 && h[hl - sl - 1] == '.' &&
            strcmp(h + hl - sl, e->name) == 0)
            best = EVD_WEBHOOK_PUBLIC_ONLY;
    }
    return best;
}

enum evd_code evd_webhook_url_host(const char *url, char *host, size_t hostsz, struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    char *h = NULL, *user = NULL, *password = NULL;
    CURLU *u = NULL;
    size_t len = strlen(url);
    if (len > URL_MAX)
        return evd_err_set(err, EVD_EINVAL, "url must be at most %d characters", URL_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
            return evd_err_set(err, EVD_EINVAL,
                               "url must not contain spaces or control characters");
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return evd_err_set(err, EVD_EINVAL, "url must be an http or https URL");
    u = curl_url();
    if (u == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK || h == NULL || h[0] == '\0') {
        rc = evd_err_set(err, EVD_EINVAL, "url is not a valid http or https URL");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK) {
        rc = evd_err_set(err, EVD_EINVAL,
                         "url must not contain a user name or password (the secret signs the "
                         "deliveries)");
        goto out;
    }
    if (strlen(h) >= hostsz || strlen(h) >= HOST_MAX) {
        rc = evd_err_set(err, EVD_EINVAL, "url has a host name longer than %d characters",
                         HOST_MAX - 1);
        goto out;
    }
    lower_copy(host, hostsz, h, strlen(h));
    unbracket(host);
out:
    curl_free(h);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    return rc;
}

enum evd_code evd_webhook_url_check(const struct evd_webhook_policy *p, const char *url, char *host,
                                    size_t hostsz, struct evd_err *err)
{
    char name[HOST_MAX];
    enum evd_code rc = evd_webhook_url_host(url, name, sizeof(name), err);
    if (rc != EVD_OK)
        return rc;
    enum evd_webhook_trust trust = evd_webhook_policy_host(p, name);
    if (trust == EVD_WEBHOOK_DENIED)
        return evd_err_set(err, EVD_EINVAL,
                           "url host %s is not allowed by EVALD_WEBHOOK_ALLOW_HOSTS", name);
    bool literal = false;
    bool pub = evd_webhook_literal_public(name, &literal);
    if (trust == EVD_WEBHOOK_PUBLIC_ONLY && ((literal && !pub) || is_localhost(name)))
        return evd_err_set(err, EVD_EINVAL,
                           "url host %s is a loopback, private or link-local address; name it in "
                           "EVALD_WEBHOOK_ALLOW_HOSTS to allow it",
                           name);
    snprintf(host, hostsz, "%s", name);
    return EVD_OK;
}
