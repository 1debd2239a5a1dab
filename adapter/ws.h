/*
 * A WebSocket client codec (RFC 6455), pure: URL parsing, the HTTP/1.1 upgrade
 * handshake (Sec-WebSocket-Key / Accept), masked frame encoding and an incremental
 * decoder of the server's frame stream that reassembles fragmented messages within
 * fixed bounds. No sockets and no threads here (adapter/conn.c does the I/O), so the
 * whole codec is unit-tested byte by byte.
 * Thread-safety: a decoder belongs to one thread; everything else is reentrant.
 */
#ifndef EVD_ADAPTER_WS_H
#define EVD_ADAPTER_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/util.h"

enum {
    EVD_WS_OP_CONT = 0x0,
    EVD_WS_OP_TEXT = 0x1,
    EVD_WS_OP_BINARY = 0x2,
    EVD_WS_OP_CLOSE = 0x8,
    EVD_WS_OP_PING = 0x9,
    EVD_WS_OP_PONG = 0xA,
};

/* Close codes used by the adapter. */
enum {
    EVD_WS_CLOSE_NORMAL = 1000,
    EVD_WS_CLOSE_GOING_AWAY = 1001,
    EVD_WS_CLOSE_PROTOCOL = 1002,
    EVD_WS_CLOSE_NO_STATUS = 1005,
    EVD_WS_CLOSE_TOO_BIG = 1009,
};

/* Largest response head accepted during the handshake. */
#define EVD_WS_MAX_HEAD 16384

struct evd_ws_url {
    char host[256];        /* without brackets for IPv6 */
    unsigned port;         /* 80 when absent */
    char path[1024];       /* "/" when absent; includes any query */
    char host_header[300]; /* value of the Host header */
};

/* Parses "ws://host[:port][/path]"; EVD_EINVAL naming III_URL otherwise (wss:// and
 * credentials in the URL are refused). */
enum evd_code evd_ws_url_parse(const char *url, struct evd_ws_url *out, struct evd_err *err);

/* A fresh Sec-WebSocket-Key: base64 of 16 random bytes (24 characters + NUL). */
void evd_ws_key_new(char key[25]);
/* The Sec-WebSocket-Accept a server must answer for `key`:
 * base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), 28 characters + NUL. */
void evd_ws_accept_for(const char *key, char out[29]);

/* Appends the upgrade request for `u` and `key` to *out; 0, or -1 when out of memory. */
int evd_ws_handshake_request(const struct evd_ws_url *u, const char *key, struct evd_buf *out);

/*
 * Checks the server's answer in buf[0..len). Returns 1 when the head is complete and
 * accepts the upgrade for `key` (*head_len = bytes of the head, frames may follow),
 * 0 when more bytes are needed, -1 with *err when the server refused or answered
 * something that is not a valid upgrade (status, Upgrade, Connection, Accept,
 * unrequested extension or subprotocol, head over EVD_WS_MAX_HEAD).
 */
int evd_ws_handshake_check(const char *buf, size_t len, const char *key, size_t *head_len,
                           struct evd_err *err);

/*
 * Appends one client frame (always masked with `mask`) to *out. Returns 0, or -1
 * when out of memory or over out->limit.
 */
int evd_ws_frame_encode(struct evd_buf *out, int opcode, bool fin, const void *payload, size_t len,
                        const uint8_t mask[4]);
/* As evd_ws_frame_encode with a random mask. */
int evd_ws_frame_append(struct evd_buf *out, int opcode, const void *payload, size_t len);
/* A Close frame with `code` and a short reason (truncated to fit 123 bytes). */
int evd_ws_close_append(struct evd_buf *out, int code, const char *reason);

/* ---- decoder ---------------------------------------------------------------------- */

struct evd_ws_decoder {
    size_t max_frame;   /* payload bound of one frame */
    size_t max_message; /* bound of a reassembled message */
    struct evd_buf msg; /* data of the fragmented message in progress */
    int msg_opcode;     /* its opcode (TEXT or BINARY), 0 when none */
};

enum evd_ws_result {
    EVD_WS_MORE,  /* need more bytes; nothing consumed */
    EVD_WS_FRAME, /* a frame was consumed without completing an event (a fragment) */
    EVD_WS_EVENT, /* a frame was consumed and *ev is filled */
    EVD_WS_ERROR, /* protocol violation: *err, and *close_code to send */
};

struct evd_ws_event {
    int opcode;          /* TEXT, BINARY, PING, PONG or CLOSE */
    const uint8_t *data; /* borrowed: valid until the next decode call or _free */
    size_t len;
    int close_code; /* CLOSE: the peer's code, EVD_WS_CLOSE_NO_STATUS when absent */
};

/* Initialises a decoder with its bounds. */
void evd_ws_decoder_init(struct evd_ws_decoder *d, size_t max_frame, size_t max_message);
void evd_ws_decoder_free(struct evd_ws_decoder *d);

/*
 * Decodes at most one server frame from in[0..len). *used is the number of bytes
 * consumed (0 with EVD_WS_MORE). Server frames must be unmasked, without reserved bits,
 * with control frames unfragmented and at most 125 bytes.
 */
enum evd_ws_result evd_ws_decode(struct evd_ws_decoder *d, const uint8_t *in, size_t len,
                                 size_t *used, struct evd_ws_event *ev, int *close_code,
                                 struct evd_err *err);

/* An RFC 4122 version-4 UUID, lower-case with hyphens (36 characters + NUL). */
void evd_ws_uuid4(char out[37]);

#endif
