/*
 * tf_spec.h - a pipeline's text form: parse it, print it.
 *
 * Text form, filters in write order:
 *     delta(reinterpret=int64) | bitshuffle | zstd(level=7)
 *     tiledb:19 | 8 | 2,7          numeric ids, netCDF style: id,params...
 *     byteshuffle | hdf5:307,9     an HDF5 filter plugin: HDF5 id, cd_values
 * Parameters of the numeric form follow the serialized option order without
 * the compressor byte: level[,reinterpret]; window; scale,offset,byte_width;
 * quality,format,lossless,y_extent,x_extent.  A level may also be given as
 * the unsigned 32-bit pattern of a negative one (4294967295 for -1).  The
 * empty string is the empty pipeline.  tf_pipeline_text() prints the
 * canonical named form.
 *
 * With plugins (filters/plugin.h), a filter may also be a tilefs plugin's
 * name or id, and hdf5:ID[,param...] (or a bare id above 255, which no
 * TileDB filter has) an HDF5 plugin's; their parameters are netCDF filter
 * constants (seed 003): 9, 4294967295, -1 (int32), 23ub, -17b, 27us, -25s,
 * 93u, 1.5f (one u32 each), 1.5d, -9l, 18ul (two u32, low half first).
 *
 * tf_pipeline.h includes this header: whoever holds a pipeline may name one.
 */
#ifndef TF_SPEC_H
#define TF_SPEC_H

#include "util/tf_status.h"

typedef struct tf_pipeline tf_pipeline;	/* tf_pipeline.h */
typedef struct tf_plugins tf_plugins;	/* filters/plugin.h */

tf_status tf_pipeline_parse(const char *spec, tf_pipeline **out, tf_error *err);
/* The same, also knowing the plugins of pl (may be NULL).  The pipeline
 * holds classes of pl: free it before pl. */
tf_status tf_pipeline_parse_with(const char *spec, const tf_plugins *pl, tf_pipeline **out,
				 tf_error *err);
/* Canonical text form, malloc'd (NULL only when out of memory). */
char *tf_pipeline_text(const tf_pipeline *p);

#endif
