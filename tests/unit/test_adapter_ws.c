/* Unit tests for adapter/ws.c: URL parsing, the upgrade handshake, frame encoding and the
 * incremental decoder of server frames (RFC 6455 examples where the RFC has them). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/ws.h"
#include "tests/support/testutil.h"

/* ---- URL -------------------------------------------------------------------------- */

struct url_case {
    const char *url;
    int ok;
    const char *host;
    unsigned port;
    const char *path, *host_header, *error_part;
};

static const struct url_case url_cases[] = {
    {"ws://127.0.0.1:49134", 1, "127.0.0.1", 49134, "/", "127.0.0.1:49134", NULL},
    {"ws://127.0.0.1:49134/", 1, "127.0.0.1", 49134, "/", "127.0.0.1:49134", NULL},
    {"ws://engine.local", 1, "engine.local", 80, "/", "engine.local", NULL},
    {"ws://[::1]:49134/w?x=1", 1, "::1", 49134, "/w?x=1", "[::1]:49134", NULL},
    {"ws://[::1]", 1, "::1", 80, "/", "[::1]", NULL},
    {"ws://h:1?q", 1, "h", 1, "/?q", "h:1", NULL},
    {"ws://h:2/p#frag", 1, "h", 2, "/p", "h:2", NULL},
    {"wss://127.0.0.1:49134", 0, NULL, 0, NULL, NULL, "wss:// is not supported"},
    {"http://127.0.0.1:49134", 0, NULL, 0, NULL, NULL, "must start with ws://"},
    {"", 0, NULL, 0, NULL, NULL, "III_URL must not be empty"},
    {"ws://", 0, NULL, 0, NULL, NULL, "needs a host"},
    {"ws://:80", 0, NULL, 0, NULL, NULL, "needs a host"},
    {"ws://h:0", 0, NULL, 0, NULL, NULL, "invalid port"},
    {"ws://h:65536", 0, NULL, 0, NULL, NULL, "invalid port"},
    {"ws://h:12a", 0, NULL, 0, NULL, NULL, "invalid port"},
    {"ws://h:", 0, NULL, 0, NULL, NULL, "invalid port"},
    {"ws://user:pw@h:1", 0, NULL, 0, NULL, NULL, "credentials"},
    {"ws://[::1:80", 0, NULL, 0, NULL, NULL, "unterminated IPv6"},
    {"ws://h/a b", 0, NULL, 0, NULL, NULL, "spaces or control"},
};

START_TEST(urls_parse)
{
    const struct url_case *c = &url_cases[_i];
    struct evd_ws_url u;
    struct evd_err err = {0};
    enum evd_code rc = evd_ws_url_parse(c->url, &u, &err);
    if (!c->ok) {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_msg(strstr(err.msg, c->error_part) != NULL, "%s: %s", c->url, err.msg);
        ck_assert_msg(strstr(err.msg, "III_URL") != NULL, "names the setting: %s", err.msg);
        return;
    }
    ck_assert_msg(rc == EVD_OK, "%s: %s", c->url, err.msg);
    ck_assert_str_eq(u.host, c->host);
    ck_assert_uint_eq(u.port, c->port);
    ck_assert_str_eq(u.path, c->path);
    ck_assert_str_eq(u.host_header, c->host_header);
}
END_TEST

/* ---- handshake ---------------------------------------------------------------------- */

START_TEST(accept_matches_rfc_example)
{
    char out[29];
    evd_ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", out);
    ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
END_TEST

START_TEST(keys_are_fresh_base64_of_16_bytes)
{
    char a[25], b[25];
    evd_ws_key_new(a);
    evd_ws_key_new(b);
    ck_assert_uint_eq(strlen(a), 24);
    ck_assert_str_eq(a + 22, "=="); /* 16 bytes encode to 22 characters + padding */
    ck_assert_str_ne(a, b);
    for (int i = 0; i < 22; i++)
        ck_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", a[i]));
}
END_TEST

START_TEST(request_names_every_upgrade_header)
{
    struct evd_ws_url u;
    ck_assert_int_eq(evd_ws_url_parse("ws://127.0.0.1:49134", &u, NULL), EVD_OK);
    struct evd_buf b = {0};
    ck_assert_int_eq(evd_ws_handshake_request(&u, "dGhlIHNhbXBsZSBub25jZQ==", &b), 0);
    ck_assert(strncmp(b.data, "GET / HTTP/1.1\r\n", 16) == 0);
    ck_assert(strstr(b.data, "\r\nHost: 127.0.0.1:49134\r\n"));
    ck_assert(strstr(b.data, "\r\nUpgrade: websocket\r\n"));
    ck_assert(strstr(b.data, "\r\nConnection: Upgrade\r\n"));
    ck_assert(strstr(b.data, "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
    ck_assert(strstr(b.data, "\r\nSec-WebSocket-Version: 13\r\n"));
    ck_assert(!strstr(b.data, "Sec-WebSocket-Extensions")); /* no permessage-deflate */
    ck_assert_str_eq(b.data + b.len - 4, "\r\n\r\n");
    evd_buf_free(&b);
}
END_TEST

static const char KEY[] = "dGhlIHNhbXBsZSBub25jZQ==";

struct head_case {
    const char *head;
    int want; /* 1 accepted, 0 incomplete, -1 refused */
    const char *error_part;
};

static const struct head_case heads[] = {
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
     1, NULL},
    /* Header names and the Upgrade value are case-insensitive; Connection is a list. */
    {"HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n"
     "sec-websocket-accept:   s3pPLMBiTxaQ9kYGzzhZRbK+xOo=  \r\nDate: x\r\n\r\n",
     1, NULL},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n", 0, NULL},
    {"", 0, NULL},
    {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", -1, "HTTP 400"},
    {"HTTP/1.0 101 Switching\r\n\r\n", -1, "HTTP/1.1"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
     -1, "wrong Sec-WebSocket-Accept"},
    {"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
     -1, "Upgrade: websocket"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: close\r\n"
     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
     -1, "Connection: Upgrade"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", -1,
     "lacks Sec-WebSocket-Accept"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
     "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
     -1, "extension"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: x\r\n\r\n",
     -1, "subprotocol"},
};

START_TEST(handshake_answers_are_checked)
{
    const struct head_case *c = &heads[_i];
    struct evd_err err = {0};
    size_t head_len = 0;
    int r = evd_ws_handshake_check(c->head, strlen(c->head), KEY, &head_len, &err);
    ck_assert_msg(r == c->want, "case %d: got %d (%s)", _i, r, err.msg);
    if (r == 1)
        ck_assert_uint_eq(head_len, strlen(c->head));
    if (r < 0)
        ck_assert_msg(strstr(err.msg, c->error_part) != NULL, "case %d: %s", _i, err.msg);
}
END_TEST

START_TEST(handshake_leaves_following_frames)
{
    const char head[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Accept: "
                        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    char buf[512];
    size_t n = strlen(head);
    memcpy(buf, head, n);
    memcpy(buf + n, "\x81\x02hi", 4);
    size_t head_len = 0;
    ck_assert_int_eq(evd_ws_handshake_check(buf, n + 4, KEY, &head_len, NULL), 1);
    ck_assert_uint_eq(head_len, n);
    /* Every prefix of the head is "need more", never an error. */
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(evd_ws_handshake_check(buf, k, KEY, &head_len, NULL), 0);
}
END_TEST

START_TEST(oversized_head_is_refused)
{
    size_t n = EVD_WS_MAX_HEAD + 10;
    char *buf = malloc(n);
    memcpy(buf, "HTTP/1.1 101 x\r\n", 16);
    memset(buf + 16, 'a', n - 16);
    struct evd_err err = {0};
    size_t head_len = 0;
    ck_assert_int_eq(evd_ws_handshake_check(buf, n, KEY, &head_len, &err), -1);
    ck_assert(strstr(err.msg, "over") != NULL);
    free(buf);
}
END_TEST

/* ---- encoding ---------------------------------------------------------------------------- */

START_TEST(masked_text_frame_matches_rfc_example)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    static const uint8_t want[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                   0x7f, 0x9f, 0x4d, 0x51, 0x58};
    struct evd_buf b = {0};
    ck_assert_int_eq(evd_ws_frame_encode(&b, EVD_WS_OP_TEXT, true, "Hello", 5, mask), 0);
    ck_assert_uint_eq(b.len, sizeof(want));
    ck_assert(memcmp(b.data, want, sizeof(want)) == 0);
    evd_buf_free(&b);
}
END_TEST

/* Decodes a client frame (masked) for the checks below; returns payload length. */
static size_t unmask(const uint8_t *f, size_t n, uint8_t *out, int *opcode, bool *fin)
{
    *fin = (f[0] & 0x80) != 0;
    *opcode = f[0] & 0x0f;
    ck_assert(f[1] & 0x80); /* client frames are always masked */
    uint64_t len = f[1] & 0x7f;
    size_t h = 2;
    if (len == 126) {
        len = ((uint64_t)f[2] << 8) | f[3];
        h = 4;
    } else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = (len << 8) | f[2 + i];
        h = 10;
    }
    const uint8_t *mask = f + h;
    h += 4;
    ck_assert_uint_eq(n, h + len);
    for (size_t i = 0; i < len; i++)
        out[i] = f[h + i] ^ mask[i & 3];
    return (size_t)len;
}

START_TEST(lengths_use_the_shortest_encoding)
{
    static const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 70000};
    static const size_t heads_[] = {6, 6, 6, 8, 8, 14, 14};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint8_t *payload = malloc(sizes[k] + 1), *back = malloc(sizes[k] + 1);
        for (size_t i = 0; i < sizes[k]; i++)
            payload[i] = (uint8_t)(i * 7);
        struct evd_buf b = {0};
        ck_assert_int_eq(evd_ws_frame_append(&b, EVD_WS_OP_BINARY, payload, sizes[k]), 0);
        ck_assert_uint_eq(b.len, heads_[k] + sizes[k]);
        int op;
        bool fin;
        ck_assert_uint_eq(unmask((uint8_t *)b.data, b.len, back, &op, &fin), sizes[k]);
        ck_assert_int_eq(op, EVD_WS_OP_BINARY);
        ck_assert(fin);
        ck_assert(sizes[k] == 0 || memcmp(back, payload, sizes[k]) == 0);
        evd_buf_free(&b);
        free(payload);
        free(back);
    }
}
END_TEST

START_TEST(close_frame_carries_code_and_bounded_reason)
{
    struct evd_buf b = {0};
    char reason[300];
    memset(reason, 'r', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    ck_assert_int_eq(evd_ws_close_append(&b, 1001, reason), 0);
    uint8_t back[200];
    int op;
    bool fin;
    size_t n = unmask((uint8_t *)b.data, b.len, back, &op, &fin);
    ck_assert_int_eq(op, EVD_WS_OP_CLOSE);
    ck_assert_uint_eq(n, 125); /* a control frame's limit */
    ck_assert_int_eq((back[0] << 8) | back[1], 1001);
    evd_buf_free(&b);
}
END_TEST

START_TEST(encode_respects_the_buffer_limit)
{
    struct evd_buf b = {.limit = 100};
    char big[200] = {0};
    ck_assert_int_eq(evd_ws_frame_append(&b, EVD_WS_OP_TEXT, "ok", 2), 0);
    size_t before = b.len;
    ck_assert_int_eq(evd_ws_frame_append(&b, EVD_WS_OP_TEXT, big, sizeof(big)), -1);
    ck_assert_uint_eq(b.len, before); /* nothing half-written */
    evd_buf_free(&b);
}
END_TEST

/* ---- decoding ----------------------------------------------------------------------------- */

struct dec {
    struct evd_ws_decoder d;
    struct evd_ws_event ev;
    size_t used;
    int close_code;
    struct evd_err err;
};

static enum evd_ws_result feed(struct dec *t, const void *in, size_t len)
{
    memset(&t->err, 0, sizeof(t->err));
    t->close_code = 0;
    return evd_ws_decode(&t->d, in, len, &t->used, &t->ev, &t->close_code, &t->err);
}

START_TEST(whole_text_frame_decodes_in_place)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 1024, 1024);
    static const uint8_t f[] = {0x81, 0x05, 'H', 'e', 'l', 'l', 'o', 0x89};
    ck_assert_int_eq(feed(&t, f, sizeof(f)), EVD_WS_EVENT);
    ck_assert_uint_eq(t.used, 7); /* the trailing byte belongs to the next frame */
    ck_assert_int_eq(t.ev.opcode, EVD_WS_OP_TEXT);
    ck_assert_uint_eq(t.ev.len, 5);
    ck_assert(memcmp(t.ev.data, "Hello", 5) == 0);
    /* Every prefix needs more and consumes nothing. */
    for (size_t k = 0; k < 7; k++) {
        ck_assert_int_eq(feed(&t, f, k), EVD_WS_MORE);
        ck_assert_uint_eq(t.used, 0);
    }
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(fragments_reassemble_around_a_ping)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 1024, 1024);
    static const uint8_t first[] = {0x01, 0x03, 'H', 'e', 'l'};
    static const uint8_t ping[] = {0x89, 0x02, 'p', '!'};
    static const uint8_t last[] = {0x80, 0x02, 'l', 'o'};
    ck_assert_int_eq(feed(&t, first, sizeof(first)), EVD_WS_FRAME);
    ck_assert_uint_eq(t.used, sizeof(first));
    ck_assert_int_eq(feed(&t, ping, sizeof(ping)), EVD_WS_EVENT);
    ck_assert_int_eq(t.ev.opcode, EVD_WS_OP_PING);
    ck_assert(t.ev.len == 2 && memcmp(t.ev.data, "p!", 2) == 0);
    ck_assert_int_eq(feed(&t, last, sizeof(last)), EVD_WS_EVENT);
    ck_assert_int_eq(t.ev.opcode, EVD_WS_OP_TEXT);
    ck_assert(t.ev.len == 5 && memcmp(t.ev.data, "Hello", 5) == 0);
    /* The decoder is ready for a new message. */
    static const uint8_t again[] = {0x82, 0x01, 'x'};
    ck_assert_int_eq(feed(&t, again, sizeof(again)), EVD_WS_EVENT);
    ck_assert_int_eq(t.ev.opcode, EVD_WS_OP_BINARY);
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(extended_lengths_decode)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 1 << 20, 1 << 20);
    size_t sizes[] = {126, 65535, 65536, 100000};
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        uint8_t *f = calloc(1, n + 10);
        size_t h;
        f[0] = 0x82;
        if (n <= 0xffff) {
            f[1] = 126;
            f[2] = (uint8_t)(n >> 8);
            f[3] = (uint8_t)n;
            h = 4;
        } else {
            f[1] = 127;
            for (int i = 0; i < 8; i++)
                f[2 + i] = (uint8_t)((uint64_t)n >> (8 * (7 - i)));
            h = 10;
        }
        f[h + n - 1] = 0x5a;
        ck_assert_int_eq(feed(&t, f, h + n - 1), EVD_WS_MORE);
        ck_assert_int_eq(feed(&t, f, h + n), EVD_WS_EVENT);
        ck_assert_uint_eq(t.ev.len, n);
        ck_assert_int_eq(t.ev.data[n - 1], 0x5a);
        free(f);
    }
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(close_frames_decode)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 1024, 1024);
    static const uint8_t with_reason[] = {0x88, 0x05, 0x03, 0xe9, 'b', 'y', 'e'};
    ck_assert_int_eq(feed(&t, with_reason, sizeof(with_reason)), EVD_WS_EVENT);
    ck_assert_int_eq(t.ev.opcode, EVD_WS_OP_CLOSE);
    ck_assert_int_eq(t.ev.close_code, 1001);
    ck_assert(t.ev.len == 3 && memcmp(t.ev.data, "bye", 3) == 0);
    static const uint8_t empty[] = {0x88, 0x00};
    ck_assert_int_eq(feed(&t, empty, sizeof(empty)), EVD_WS_EVENT);
    ck_assert_int_eq(t.ev.close_code, EVD_WS_CLOSE_NO_STATUS);
    evd_ws_decoder_free(&t.d);
}
END_TEST

struct bad_case {
    uint8_t bytes[16];
    size_t len;
    int close_code;
    const char *error_part;
};

static const struct bad_case bad[] = {
    {{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}, 8, 1002, "masked server frame"},
    {{0xc1, 0x01, 'x'}, 3, 1002, "reserved bits"},
    {{0x83, 0x01, 'x'}, 3, 1002, "unknown data opcode"},
    {{0x8b, 0x00}, 2, 1002, "unknown control opcode"},
    {{0x09, 0x00}, 2, 1002, "fragmented control"},
    {{0x89, 0x7e, 0x00, 0x7e}, 4, 1002, "control frame over 125"},
    {{0x80, 0x01, 'x'}, 3, 1002, "continuation without a message"},
    {{0x81, 0x7e, 0x00, 0x05}, 4, 1002, "not minimally encoded"},
    {{0x81, 0x7f, 0, 0, 0, 0, 0, 0, 0x00, 0x10}, 10, 1002, "not minimally encoded"},
    {{0x81, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, 1002, "over 2^63"},
    {{0x88, 0x01, 0x03}, 3, 1002, "close frame of one byte"},
    {{0x88, 0x02, 0x03, 0xed}, 4, 1002, "invalid close code"}, /* 1005 is never sent */
    {{0x88, 0x02, 0x00, 0x10}, 4, 1002, "invalid close code"},
    {{0x82, 0x7e, 0x04, 0x01}, 4, 1009, "frame over the size limit"}, /* 1025 > 1024 */
};

START_TEST(protocol_violations_are_refused)
{
    const struct bad_case *c = &bad[_i];
    struct dec t;
    evd_ws_decoder_init(&t.d, 1024, 4096);
    ck_assert_int_eq(feed(&t, c->bytes, c->len), EVD_WS_ERROR);
    ck_assert_int_eq(t.close_code, c->close_code);
    ck_assert_msg(strstr(t.err.msg, c->error_part) != NULL, "case %d: %s", _i, t.err.msg);
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(new_message_inside_a_fragmented_one_is_refused)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 1024, 1024);
    static const uint8_t first[] = {0x01, 0x01, 'a'};
    static const uint8_t other[] = {0x81, 0x01, 'b'};
    ck_assert_int_eq(feed(&t, first, sizeof(first)), EVD_WS_FRAME);
    ck_assert_int_eq(feed(&t, other, sizeof(other)), EVD_WS_ERROR);
    ck_assert_int_eq(t.close_code, 1002);
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(reassembled_message_is_bounded)
{
    struct dec t;
    evd_ws_decoder_init(&t.d, 100, 150);
    uint8_t f[102] = {0x01, 100};
    ck_assert_int_eq(feed(&t, f, sizeof(f)), EVD_WS_FRAME);
    f[0] = 0x00; /* continuation, not final */
    ck_assert_int_eq(feed(&t, f, sizeof(f)), EVD_WS_ERROR);
    ck_assert_int_eq(t.close_code, 1009);
    ck_assert(strstr(t.err.msg, "message over the size limit"));
    evd_ws_decoder_free(&t.d);
    /* A single whole frame is bounded by max_message too. */
    evd_ws_decoder_init(&t.d, 200, 50);
    uint8_t g[62] = {0x81, 60};
    ck_assert_int_eq(feed(&t, g, sizeof(g)), EVD_WS_ERROR);
    ck_assert_int_eq(t.close_code, 1009);
    evd_ws_decoder_free(&t.d);
}
END_TEST

START_TEST(uuids_are_version_4)
{
    char a[37], b[37];
    evd_ws_uuid4(a);
    evd_ws_uuid4(b);
    ck_assert_uint_eq(strlen(a), 36);
    ck_assert_str_ne(a, b);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            ck_assert_int_eq(a[i], '-');
        else
            ck_assert(strchr("0123456789abcdef", a[i]));
    }
    ck_assert_int_eq(a[14], '4');
    ck_assert(strchr("89ab", a[19]));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adapter_ws");
    TCase *tc = tcase_create("url_handshake");
    tcase_add_loop_test(tc, urls_parse, 0, sizeof(url_cases) / sizeof(url_cases[0]));
    tcase_add_test(tc, accept_matches_rfc_example);
    tcase_add_test(tc, keys_are_fresh_base64_of_16_bytes);
    tcase_add_test(tc, request_names_every_upgrade_header);
    tcase_add_loop_test(tc, handshake_answers_are_checked, 0, sizeof(heads) / sizeof(heads[0]));
    tcase_add_test(tc, handshake_leaves_following_frames);
    tcase_add_test(tc, oversized_head_is_refused);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("frames");
    tcase_add_test(tf, masked_text_frame_matches_rfc_example);
    tcase_add_test(tf, lengths_use_the_shortest_encoding);
    tcase_add_test(tf, close_frame_carries_code_and_bounded_reason);
    tcase_add_test(tf, encode_respects_the_buffer_limit);
    tcase_add_test(tf, whole_text_frame_decodes_in_place);
    tcase_add_test(tf, fragments_reassemble_around_a_ping);
    tcase_add_test(tf, extended_lengths_decode);
    tcase_add_test(tf, close_frames_decode);
    tcase_add_loop_test(tf, protocol_violations_are_refused, 0, sizeof(bad) / sizeof(bad[0]));
    tcase_add_test(tf, new_message_inside_a_fragmented_one_is_refused);
    tcase_add_test(tf, reassembled_message_is_bounded);
    tcase_add_test(tf, uuids_are_version_4);
    suite_add_tcase(s, tf);
    return evd_test_run_suite(s);
}
