/*
 * Small helpers over jansson values shared by the layers that validate JSON input
 * (domain, handlers, webhooks, the stub). Pure; thread-safe for values no other thread
 * mutates; returned pointers are borrowed from the value passed in.
 */
#ifndef EVD_COMMON_JSON_H
#define EVD_COMMON_JSON_H

#include <jansson.h>

/*
 * The first member name of `obj` that is not in the NULL-terminated list `known`
 * (borrowed from obj), or NULL when every member is known or obj is not an object.
 * Names compare over their whole length, so a name with an escaped NUL is never known.
 */
const char *evd_json_unknown_member(const json_t *obj, const char *const *known);

#endif
