/* tf_pipeline_int.h - the pipeline's representation, shared by
 * tf_pipeline.c (serialized form, running), tf_spec.c (text form) and
 * tf_pipeline_attr.c (netCDF's attribute forms). */
#ifndef TF_PIPELINE_INT_H
#define TF_PIPELINE_INT_H

#include "format/tf_pipeline.h"

typedef struct tf_filter {
	const tf_filter_class *cls;
	tf_filter_opts o;
} tf_filter;

struct tf_pipeline {
	uint32_t max_chunk_size;
	size_t n;
	tf_filter f[TF_MAX_FILTERS];
};

/* Add a filter of class c with options o (checked by the class). */
tf_status tf_pipeline_push(tf_pipeline *p, const tf_filter_class *c, const tf_filter_opts *o,
			   tf_error *err);

/* Prints one filter into buf (n bytes, NUL-terminated when n > 0) as
 * snprintf does: returns the length the whole text needs. */
typedef size_t tf_filter_fmt(char *buf, size_t n, const tf_filter *f);

/* The pipeline as text, malloc'd (NULL only when out of memory): each
 * filter as fmt prints it, in write order, sep between them.  filter_cap
 * bounds what fmt prints for one filter; beyond it the text is cut.  The
 * one printer of both the text form (tf_spec.c) and _Filter. */
char *tf_pipeline_print(const tf_pipeline *p, const char *sep, size_t filter_cap,
			tf_filter_fmt *fmt);

#endif
