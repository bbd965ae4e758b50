/*
 * tf_keys.h - AES-256 keys: loading, checking, keeping them out of sight.
 *
 * A key is 32 raw bytes or 64 hex characters (one trailing newline allowed).
 * Key files must not be readable by group or others.  Key bytes live in
 * locked memory (never swapped, excluded from core dumps where the system
 * allows) and are wiped when freed.  No function here ever puts key
 * material into an error message.
 */
#ifndef TF_KEYS_H
#define TF_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "util/tf_status.h"

#define TF_KEY_BYTES 32

typedef struct tf_key tf_key;

/* Parse 32 raw bytes or 64 hex digits (plus optional "\n" or "\r\n"). */
tf_status tf_key_from_bytes(const void *text, size_t len, tf_key **out, tf_error *err);
/* Read a key file, refusing one that group or others can read. */
tf_status tf_key_load_file(const char *path, tf_key **out, tf_error *err);
const uint8_t *tf_key_bytes(const tf_key *k);
/* Lock the key's page again, e.g. in a daemon after fork(). */
void tf_key_lock(tf_key *k);
void tf_key_free(tf_key *k);

#endif
