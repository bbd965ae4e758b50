/*
 * tf_schema.h - a TileDB array schema: the payload of the schema's
 * generic tile (FORMAT-NOTES §7), every format version from 1 on.
 *
 * What tilefs needs from it: each attribute's and dimension's datatype,
 * cell_val_num, nullability and pipeline; the coords, offsets and validity
 * pipelines; dense or sparse, capacity and tile extents (cells per tile).
 * A parsed schema is plain read-only data.
 */
#ifndef TF_SCHEMA_H
#define TF_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tf_bytes.h"
#include "tf_pipeline.h"
#include "tf_status.h"

typedef struct tf_field {
	char *name;
	tf_datatype type;
	uint32_t cell_val_num;		/* TF_CELL_VAR for var-sized */
	bool nullable;
	tf_pipeline *filters;		/* as stored; see tf_schema_dim_filters */
	/* dimensions only */
	uint8_t domain[16];		/* lower ‖ upper bound, fixed-size dims */
	bool has_extent;
	uint8_t extent[8];		/* tile extent, sizeof(type) bytes */
} tf_field;

typedef struct tf_schema {
	uint32_t version;		/* as stored (UINT32_MAX: an experimental build) */
	uint32_t layout_version;	/* the version whose layout parsed it */
	bool dense, allows_dups;
	uint8_t tile_order, cell_order;
	uint64_t capacity;
	tf_pipeline *coords, *offsets, *validity;
	size_t nattrs, ndims;
	tf_field *attrs, *dims;
	size_t nenums;			/* enumerations named (format >= 20) */
} tf_schema;

/* Parse a schema payload (the decoded generic tile). */
tf_status tf_schema_parse(tf_span payload, tf_schema **out, tf_error *err);
void tf_schema_free(tf_schema *s);

/* The pipeline of a dimension's tiles: its own, or the coords pipeline when
 * it has none (§7.4, dimension.cc). */
const tf_pipeline *tf_schema_dim_filters(const tf_schema *s, const tf_field *dim);
/* Cells in a dense tile: the product of the tile extents; 0 if unknown. */
uint64_t tf_schema_dense_tile_cells(const tf_schema *s);
/* A readable description: domain, dimensions, attributes, pipelines. */
void tf_schema_print(const tf_schema *s, FILE *out);

/* Largest format version whose layouts this reader knows. */
#define TF_FORMAT_VERSION_MAX 23

#endif
