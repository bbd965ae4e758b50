/*
 * tf_budget.h - sizes and memory budgets as options give them: "256M"
 * parsed, a budget checked against its minimum and the memory this
 * process can have.  Implemented by tf_budget.c; tf_config.h includes it.
 */
#ifndef TF_BUDGET_H
#define TF_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "util/tf_status.h"

/* "256M", "1G", "4096" -> bytes; false on a bad size. */
bool tf_parse_size(const char *s, uint64_t *out);

/*
 * Memory budgets.  A cache must hold the decode units of one read request
 * (16 of 64 KiB: a smaller one failed every TileDB chunk), an index budget
 * at least a small file's index; neither may be more than the memory this
 * process can have (tf_memory_bytes).  Parses option `name`'s text into
 * *out, or fails (TF_E_INVAL) with a message naming the option and the
 * limit it broke.
 */
#define TF_CACHE_SIZE_MIN ((uint64_t)1 << 20)
#define TF_INDEX_CACHE_MIN ((uint64_t)64 << 10)
tf_status tf_parse_budget(const char *name, const char *text, uint64_t min, uint64_t *out, tf_error *err);
/* Physical memory, or the memory limit of our cgroup (and its parents)
 * when lower; 0 if unknown. */
uint64_t tf_memory_bytes(void);

#endif
