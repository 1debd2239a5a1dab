/*
 * Where webhooks may go: the EVALD_WEBHOOK_ALLOW_HOSTS allowlist, the check of a
 * subscription URL when it is created, and the check of every address a delivery
 * connects to (so a name that later resolves to a private address is still refused).
 *
 *   allowlist unset   any host, but only public addresses;
 *   exact entry       (a name or an IP literal) that host, at any address it resolves to;
 *   "*.example.com"   its subdomains, at public addresses only.
 *
 * A policy is immutable once parsed and may be shared by every thread.
 */
#ifndef EVD_WEBHOOKS_POLICY_H
#define EVD_WEBHOOKS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "common/err.h"

struct evd_webhook_policy;

enum evd_webhook_trust {
    EVD_WEBHOOK_DENIED,      /* the allowlist does not name the host */
    EVD_WEBHOOK_PUBLIC_ONLY, /* connect to public addresses only */
    EVD_WEBHOOK_TRUSTED,     /* named exactly by the allowlist: any address */
};

/* Parses the comma-separated allowlist (NULL or "" = unset). EVD_EINVAL naming
 * EVALD_WEBHOOK_ALLOW_HOSTS and the bad entry. *out is freed with _free. */
enum evd_code evd_webhook_policy_parse(const char *allow_hosts, struct evd_webhook_policy **out,
                                       struct evd_err *err);
void evd_webhook_policy_free(struct evd_webhook_policy *p);

/* How far `host` (a name or an IP literal, without brackets, any case) is trusted. */
enum evd_webhook_trust evd_webhook_policy_host(const struct evd_webhook_policy *p,
                                               const char *host);

/* True when an IPv4/IPv6 socket address is a public unicast address: not loopback,
 * private, shared (CGNAT), link-local (cloud metadata), unique-local, multicast,
 * documentation, reserved or unspecified. IPv4-mapped IPv6 is judged as IPv4. */
bool evd_webhook_addr_public(const struct sockaddr *sa);
/* The same for an IP literal; false when `text` is not one. */
bool evd_webhook_literal_public(const char *text, bool *is_literal);

/*
 * Parses a webhook URL: at most 2048 characters, http or https, a host, no user name
 * or password. Writes the lower-case host (brackets removed) into host[hostsz].
 * Messages start with "url".
 */
enum evd_code evd_webhook_url_host(const char *url, char *host, size_t hostsz, struct evd_err *err);

/*
 * Checks a subscription URL: at most 2048 characters, http or https, a host, no
 * user name or password, and a host the policy allows (an IP literal or localhost
 * must be public unless named exactly). On success writes the lower-case host
 * (brackets removed) into host[hostsz]. Messages start with "url".
 */
enum evd_code evd_webhook_url_check(const struct evd_webhook_policy *p, const char *url, char *host,
                                    size_t hostsz, struct evd_err *err);

#endif
