/*
 * WebSocket client codec; see ws.h. Reentrant; the decoder's state belongs to its
 * caller. Every length read from the wire is checked against the decoder's bounds
 * before anything is allocated.
 */
#include "adapter/ws.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static void random_bytes(uint8_t *out, size_t n)
{
    if (RAND_bytes(out, (int)n) == 1)
        return;
    /* The OpenSSL RNG does not fail on a working system; never leave it zeroed. */
    int64_t t = evd_mono_ms() ^ evd_now_ms();
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)((t >> (i % 8)) ^ rand());
}

/* ---- URL ------------------------------------------------------------------------- */

enum evd_code evd_ws_url_parse(const char *url, struct evd_ws_url *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    if (url == NULL || url[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "III_URL must not be empty");
    if (strncmp(url, "wss://", 6) == 0)
        return evd_err_set(err, EVD_EINVAL,
                           "III_URL: wss:// is not supported (the iii engine serves plain ws://)");
    if (strncmp(url, "ws://", 5) != 0)
        return evd_err_set(err, EVD_EINVAL,
                           "III_URL must start with ws://, e.g. "
                           "ws://127.0.0.1:49134");
    const char *p = url + 5;
    const char *end = p + strcspn(p, "/?#");
    if (memchr(p, '@', (size_t)(end - p)) != NULL)
        return evd_err_set(err, EVD_EINVAL, "III_URL must not carry credentials");
    const char *host = p, *host_end, *port = NULL;
    if (*p == '[') {
        host = p + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL)
            return evd_err_set(err, EVD_EINVAL, "III_URL has an unterminated IPv6 address");
        if (host_end + 1 < end) {
            if (host_end[1] != ':')
                return evd_err_set(err, EVD_EINVAL, "III_URL has junk after the IPv6 address");
            port = host_end + 2;
        }
    } else {
        host_end = memchr(p, ':', (size_t)(end - p));
        if (host_end != NULL)
            port = host_end + 1;
        else
            host_end = end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof(out->host))
        return evd_err_set(err, EVD_EINVAL, "III_URL needs a host");
    memcpy(out->host, host, hlen);
    out->port = 80;
    if (port != NULL) {
        unsigned long v = 0;
        size_t digits = 0;
        for (const char *q = port; q < end; q++, digits++) {
            if (!isdigit((unsigned char)*q) || digits >= 5)
                return evd_err_set(err, EVD_EINVAL, "III_URL has an invalid port");
            v = v * 10 + (unsigned long)(*q - '0');
        }
        if (digits == 0 || v == 0 || v > 65535)
            return evd_err_set(err, EVD_EINVAL, "III_URL has an invalid port");
        out->port = (unsigned)v;
    }
    if (*end == '#')
        end += strlen(end); /* a fragment is never sent */
    const char *path = *end == '\0' ? "/" : end;
    size_t plen = strcspn(path, "#");
    if (plen >= sizeof(out->path))
        return evd_err_set(err, EVD_EINVAL, "III_URL path is too long");
    if (*path == '?')
        snprintf(out->path, sizeof(out->path), "/%.*s", (int)plen, path);
    else
        snprintf(out->path, sizeof(out->path), "%.*s", (int)plen, path);
    bool v6 = strchr(out->host, ':') != NULL;
    if (out->port == 80)
        snprintf(out->host_header, sizeof(out->host_header), v6 ? "[%s]" : "%s", out->host);
    else
        snprintf(out->host_header, sizeof(out->host_header), v6 ? "[%s]:%u" : "%s:%u", out->host,
                 out->port);
    for (const char *q = out->path; *q; q++)
        if ((unsigned char)*q <= 0x20 || *q == 0x7f)
            return evd_err_set(err, EVD_EINVAL,
                               "III_URL path must not contain spaces or "
                               "control characters");
    return EVD_OK;
}

/* ---- handshake --------------------------------------------------------------------- */

void evd_ws_key_new(char key[25])
{
    uint8_t raw[16];
    random_bytes(raw, sizeof(raw));
    EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw));
    key[24] = '\0';
}

void evd_ws_accept_for(const char *key, char out[29])
{
    char joined[128];
    int n = snprintf(joined, sizeof(joined), "%s%s", key, WS_GUID);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (n < 0 || (size_t)n >= sizeof(joined) ||
        EVP_Digest(joined, (size_t)n, md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20) {
        out[0] = '\0';
        return;
    }
    EVP_EncodeBlock((unsigned char *)out, md, 20);
    out[28] = '\0';
}

int evd_ws_handshake_request(const struct evd_ws_url *u, const char *key, struct evd_buf *out)
{
    return evd_buf_printf(out,
                          "GET %s HTTP/1.1\r\n"
                          "Host: %s\r\n"
                          "Upgrade: websocket\r\n"
                          "Connection: Upgrade\r\n"
                          "Sec-WebSocket-Key: %s\r\n"
                          "Sec-WebSocket-Version: 13\r\n"
                          "User-Agent: evald/" EVALD_VERSION "\r\n"
                          "\r\n",
                          u->path, u->host_header, key);
}

/* Case-insensitive comparison of a header name at `line` (length n). */
static bool header_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* The trimmed value of a header line (after the colon). */
static void header_value(const char *line, size_t n, size_t name_len, char *out, size_t outsz)
{
    const char *v = line + name_len + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= outsz)
        len = outsz - 1;
    memcpy(out, v, len);
    out[len] = '\0';
}

/* True when the comma-separated list `list` holds `token` (case-insensitive). */
static bool list_has(const char *list, const char *token)
{
    size_t k = strlen(token);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        if (m == k && strncasecmp(p, token, k) == 0)
            return true;
        p += n;
    }
    return false;
}

int evd_ws_handshake_check(const char *buf, size_t len, const char *key, size_t *head_len,
                           struct evd_err *err)
{
    const char *end = NULL;
    for (size_t i = 0; i + 3 < len && i + 4 <= EVD_WS_MAX_HEAD; i++)
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
            end = buf + i + 4;
            break;
        }
    if (end == NULL) {
        if (len >= EVD_WS_MAX_HEAD) {
            evd_err_set(err, EVD_EUPSTREAM, "iii engine handshake answer is over %d bytes",
                        EVD_WS_MAX_HEAD);
            return -1;
        }
        return 0;
    }
    *head_len = (size_t)(end - buf);
    const char *line = buf;
    const char *eol = memchr(line, '\r', (size_t)(end - line));
    size_t n = (size_t)(eol - line);
    int status = 0;
    if (n < 12 || strncmp(line, "HTTP/1.1 ", 9) != 0 || !isdigit((unsigned char)line[9]) ||
        !isdigit((unsigned char)line[10]) || !isdigit((unsigned char)line[11])) {
        evd_err_set(err, EVD_EUPSTREAM, "iii engine did not answer with HTTP/1.1");
        return -1;
    }
    status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (status != 101) {
        evd_err_set(err, EVD_EUPSTREAM, "iii engine refused the WebSocket upgrade: HTTP %d",
                    status);
        return -1;
    }
    bool upgrade = false, connection = false, accept = false;
    char expected[29];
    evd_ws_accept_for(key, expected);
    char value[512];
    for (line = eol + 2; line < end - 2; line = eol + 2) {
        eol = memchr(line, '\r', (size_t)(end - line));
        if (eol == NULL || eol[1] != '\n') {
            evd_err_set(err, EVD_EUPSTREAM, "iii engine sent a malformed handshake header");
            return -1;
        }
        n = (size_t)(eol - line);
        if (header_is(line, n, "Upgrade")) {
            header_value(line, n, 7, value, sizeof(value));
            upgrade = strcasecmp(value, "websocket") == 0;
        } else if (header_is(line, n, "Connection")) {
            header_value(line, n, 10, value, sizeof(value));
            connection = list_has(value, "upgrade");
        } else if (header_is(line, n, "Sec-WebSocket-Accept")) {
            header_value(line, n, 20, value, sizeof(value));
            accept = expected[0] != '\0' && strcmp(value, expected) == 0;
            if (!accept) {
                evd_err_set(err, EVD_EUPSTREAM, "iii engine answered a wrong Sec-WebSocket-Accept");
                return -1;
            }
        } else if (header_is(line, n, "Sec-WebSocket-Extensions")) {
            evd_err_set(err, EVD_EUPSTREAM, "iii engine selected an extension evald did not offer");
            return -1;
        } else if (header_is(line, n, "Sec-WebSocket-Protocol")) {
            evd_err_set(err, EVD_EUPSTREAM,
                        "iii engine selected a subprotocol evald did not offer");
            return -1;
        }
    }
    if (!upgrade || !connection || !accept) {
        evd_err_set(err, EVD_EUPSTREAM, "iii engine handshake lacks %s",
                    !upgrade      ? "Upgrade: websocket"
                    : !connection ? "Connection: Upgrade"
                                  : "Sec-WebSocket-Accept");
        return -1;
    }
    return 1;
}

/* ---- frames ------------------------------------------------------------------------ */

int evd_ws_frame_encode(struct evd_buf *out, int opcode, bool fin, const void *payload, size_t len,
                        const uint8_t mask[4])
{
    uint8_t head[14];
    size_t h = 0;
    head[h++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (len <= 125) {
        head[h++] = (uint8_t)(0x80 | len);
    } else if (len <= 0xffff) {
        head[h++] = 0x80 | 126;
        head[h++] = (uint8_t)(len >> 8);
        head[h++] = (uint8_t)len;
    } else {
        head[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            head[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    memcpy(head + h, mask, 4);
    h += 4;
    size_t start = out->len;
    if (evd_buf_append(out, head, h) != 0)
        return -1;
    if (len > 0 && evd_buf_append(out, payload, len) != 0) {
        out->len = start; /* leave the buffer as it was */
        out->data[start] = '\0';
        return -1;
    }
    uint8_t *p = (uint8_t *)out->data + start + h;
    for (size_t i = 0; i < len; i++)
        p[i] ^= mask[i & 3];
    return 0;
}

int evd_ws_frame_append(struct evd_buf *out, int opcode, const void *payload, size_t len)
{
    uint8_t mask[4];
    random_bytes(mask, sizeof(mask));
    return evd_ws_frame_encode(out, opcode, true, payload, len, mask);
}

int evd_ws_close_append(struct evd_buf *out, int code, const char *reason)
{
    uint8_t body[125];
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    size_t n = reason ? strlen(reason) : 0;
    if (n > sizeof(body) - 2)
        n = sizeof(body) - 2;
    if (n > 0)
        memcpy(body + 2, reason, n);
    return evd_ws_frame_append(out, EVD_WS_OP_CLOSE, body, n + 2);
}

/* ---- decoder ----------------------------------------------------------------------- */

void evd_ws_decoder_init(struct evd_ws_decoder *d, size_t max_frame, size_t max_message)
{
    memset(d, 0, sizeof(*d));
    d->max_frame = max_frame;
    d->max_message = max_message;
}

void evd_ws_decoder_free(struct evd_ws_decoder *d)
{
    evd_buf_free(&d->msg);
    d->msg_opcode = 0;
}

static enum evd_ws_result fail(int *close_code, int code, struct evd_err *err, const char *msg)
{
    *close_code = code;
    evd_err_set(err, EVD_EUPSTREAM, "iii engine protocol error: %s", msg);
    return EVD_WS_ERROR;
}

static bool close_code_valid(int c)
{
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

enum evd_ws_result evd_ws_decode(struct evd_ws_decoder *d, const uint8_t *in, size_t len,
                                 size_t *used, struct evd_ws_event *ev, int *close_code,
                                 struct evd_err *err)
{
    *used = 0;
    if (len < 2)
        return EVD_WS_MORE;
    bool fin = (in[0] & 0x80) != 0;
    int opcode = in[0] & 0x0f;
    if (in[0] & 0x70)
        return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "reserved bits set");
    if (in[1] & 0x80)
        return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "masked server frame");
    uint64_t plen = in[1] & 0x7f;
    size_t h = 2;
    if (plen == 126) {
        if (len < 4)
            return EVD_WS_MORE;
        plen = ((uint64_t)in[2] << 8) | in[3];
        h = 4;
        if (plen < 126)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "length not minimally encoded");
    } else if (plen == 127) {
        if (len < 10)
            return EVD_WS_MORE;
        plen = 0;
        for (int i = 0; i < 8; i++)
            plen = (plen << 8) | in[2 + i];
        h = 10;
        if (plen >> 63)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "frame length over 2^63");
        if (plen <= 0xffff)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "length not minimally encoded");
    }
    bool control = (opcode & 0x08) != 0;
    if (control) {
        if (opcode != EVD_WS_OP_CLOSE && opcode != EVD_WS_OP_PING && opcode != EVD_WS_OP_PONG)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "unknown control opcode");
        if (!fin)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "fragmented control frame");
        if (plen > 125)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "control frame over 125 bytes");
    } else if (opcode != EVD_WS_OP_CONT && opcode != EVD_WS_OP_TEXT && opcode != EVD_WS_OP_BINARY) {
        return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "unknown data opcode");
    }
    if (plen > d->max_frame)
        return fail(close_code, EVD_WS_CLOSE_TOO_BIG, err, "frame over the size limit");
    if ((uint64_t)(len - h) < plen)
        return EVD_WS_MORE;
    const uint8_t *payload = in + h;
    size_t n = (size_t)plen;
    *used = h + n;
    memset(ev, 0, sizeof(*ev));

    if (control) {
        ev->opcode = opcode;
        ev->data = payload;
        ev->len = n;
        if (opcode == EVD_WS_OP_CLOSE) {
            if (n == 1)
                return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "close frame of one byte");
            ev->close_code = EVD_WS_CLOSE_NO_STATUS;
            if (n >= 2) {
                ev->close_code = (payload[0] << 8) | payload[1];
                if (!close_code_valid(ev->close_code))
                    return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "invalid close code");
                ev->data = payload + 2;
                ev->len = n - 2;
            }
        }
        return EVD_WS_EVENT;
    }
    if (opcode == EVD_WS_OP_CONT) {
        if (d->msg_opcode == 0)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err, "continuation without a message");
    } else {
        if (d->msg_opcode != 0)
            return fail(close_code, EVD_WS_CLOSE_PROTOCOL, err,
                        "new message inside a fragmented one");
        if (fin) {
            /* The common case: a whole message in one frame, returned in place. */
            if (n > d->max_message)
                return fail(close_code, EVD_WS_CLOSE_TOO_BIG, err, "message over the size limit");
            ev->opcode = opcode;
            ev->data = payload;
            ev->len = n;
            return EVD_WS_EVENT;
        }
        d->msg_opcode = opcode;
        d->msg.len = 0;
    }
    if (d->msg.len + n > d->max_message)
        return fail(close_code, EVD_WS_CLOSE_TOO_BIG, err, "message over the size limit");
    if (n > 0 && evd_buf_append(&d->msg, payload, n) != 0)
        return fail(close_code, EVD_WS_CLOSE_TOO_BIG, err, "out of memory for a message");
    if (!fin)
        return EVD_WS_FRAME;
    ev->opcode = d->msg_opcode;
    ev->data = (const uint8_t *)(d->msg.data ? d->msg.data : "");
    ev->len = d->msg.len;
    d->msg_opcode = 0;
    d->msg.len = 0; /* the bytes stay valid until the next append */
    return EVD_WS_EVENT;
}

/* ---- ids --------------------------------------------------------------------------- */

void evd_ws_uuid4(char out[37])
{
    uint8_t r[16];
    random_bytes(r, sizeof(r));
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}
