/* evd_err helpers: formatting is bounded by EVD_ERR_MSG_MAX and never fails. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum evd_code evd_err_set(struct evd_err *err, enum evd_code code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return code;
}

void evd_err_prefix(struct evd_err *err, const char *when, const char *prefix)
{
    if (err == NULL || strncmp(err->msg, when, strlen(when)) != 0)
        return;
    size_t plen = strlen(prefix);
    if (plen >= sizeof(err->msg))
        return;
    size_t len = strnlen(err->msg, sizeof(err->msg) - 1);
    if (len > sizeof(err->msg) - 1 - plen) /* the prefix's room, cut from the end */
        len = sizeof(err->msg) - 1 - plen;
    memmove(err->msg + plen, err->msg, len);
    memcpy(err->msg, prefix, plen);
    err->msg[len + plen] = '\0';
}

void evd_err_clear(struct evd_err *err)
{
    if (err == NULL)
        return;
    err->code = EVD_OK;
    err->msg[0] = '\0';
}

const char *evd_code_name(enum evd_code code)
{
    switch (code) {
    case EVD_OK:
        return "ok";
    case EVD_EINVAL:
        return "invalid_request";
    case EVD_EUNAUTH:
        return "unauthorized";
    case EVD_ENOTFOUND:
        return "not_found";
    case EVD_ECONFLICT:
        return "conflict";
    case EVD_ETOOLARGE:
        return "payload_too_large";
    case EVD_EMEDIA:
        return "unsupported_media_type";
    case EVD_ENOMEM:
    case EVD_EINTERNAL:
        return "internal";
    case EVD_EDB:
    case EVD_EUNAVAIL:
        return "unavailable";
    case EVD_EUPSTREAM:
        return "upstream";
    case EVD_ETIMEOUT:
        return "timeout";
    case EVD_ECANCELLED:
        return "cancelled";
    case EVD_EMISMATCH:
        return "unprocessable";
    }
    return "internal";
}
