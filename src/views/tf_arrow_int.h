/*
 * tf_arrow_int.h - what the Arrow writer's two files share: Arrow's enums,
 * a flatbuffer in the making (fb) and a table's field (fbf), and the
 * columns of a writer (struct tf_arrow).  Included by tf_arrow.c (flatbuffers,
 * the schema, the file's head and tail) and tf_arrow_batch.c (record
 * batches); nothing else includes it.
 */
#ifndef TF_ARROW_INT_H
#define TF_ARROW_INT_H

#include "views/tf_arrow.h"
#include "views/tf_cells.h"

/* Arrow's enums (Schema.fbs, Message.fbs). */
enum { V5 = 4 };
enum { MSG_SCHEMA = 1, MSG_RECORD_BATCH = 3 };
enum { T_INT = 2, T_FLOAT = 3, T_BINARY = 4, T_UTF8 = 5, T_BOOL = 6, T_TIMESTAMP = 10, T_LIST = 12,
       T_FIXED_LIST = 16 };

/* A flatbuffer in the making: positions are from its start (which lies
 * 8-aligned in the file, so alignment here is alignment there). */
typedef struct fb {
	tf_buf b;
	tf_status rc;
	tf_error *err;
} fb;

/* A table's field: id in its schema, size 1, 2, 4 or 8 (REF: an offset
 * to link later; at receives where it lies). */
#define REF 0
typedef struct fbf {
	unsigned id, size;
	uint64_t v;
	size_t at;
} fbf;

typedef enum { K_FIXED, K_BOOL, K_BYTES } col_kind;

typedef struct acol {
	char *name;
	tf_datatype type;
	bool nullable;
	col_kind kind;
	bool list;		/* values in a List (var-sized numbers) */
	uint32_t fixed;		/* values in a FixedSizeList of this many (0: none) */
	unsigned width;		/* bytes per stored value (K_FIXED, K_BOOL) */
	unsigned wide;		/* K_BYTES of UTF-16/32 (2, 4): converted */
	uint8_t arrow;		/* the values' Arrow type */
} acol;

struct tf_arrow {
	acol *cols;
	size_t ncols;
	tf_arrow_limits lim;
	bool var;		/* a var-sized column */
	bool spans;		/* every column takes spans (tf_arrow_put_span) */
};

/* tf_arrow.c */
void fb_u64(fb *f, uint64_t v);
void fb_link(fb *f, size_t at, size_t to);
size_t fb_table(fb *f, fbf *fl, size_t n);
size_t fb_vector(fb *f, size_t n, size_t align);
void fb_message(fb *f, uint8_t type, uint64_t body, size_t *hdr);
tf_status fb_frame(fb *f, tf_buf *out, tf_error *err);

#endif
