/* tf_pipeline_int.h - the pipeline's representation, shared by
 * tf_pipeline.c (serialized form, running) and tf_spec.c (text form). */
#ifndef TF_PIPELINE_INT_H
#define TF_PIPELINE_INT_H

#include "tf_pipeline.h"

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

#endif
