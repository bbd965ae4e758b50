/*
 * tf_pipeline_attr.h - a pipeline as netCDF shows one: the _Filter
 * attribute and the _Codecs attribute.  Implemented by tf_pipeline_attr.c.
 */
#ifndef TF_PIPELINE_ATTR_H
#define TF_PIPELINE_ATTR_H

#include "util/tf_datatype.h"
#include "format/tf_pipeline.h"

/*
 * The pipeline as netCDF's _Filter attribute shows it (ncdump -s), malloc'd
 * (NULL only when out of memory): per filter its id (the TileDB id; an HDF5
 * plugin's HDF5 id) and its parameters as unsigned 32-bit integers, in the
 * numeric form's order, with ',' between them and '|' between filters:
 * "2,4294967295|9".  Per the seed's encoding rules, a signed value is its
 * 32-bit two's complement pattern, a float its IEEE bits, and a double or a
 * 64-bit integer two values, its little-endian low half first.
 */
char *tf_pipeline_filter_attr(const tf_pipeline *p);
/*
 * The pipeline as netCDF's _Codecs attribute shows it: a JSON array with one
 * object per filter in write order, "id" first: a NumCodecs id where one
 * names the same codec (zstd, lz4, zlib, bz2, delta, shuffle, bitshuffle),
 * with NumCodecs' parameter names, else "tiledb.NAME" (built-in), or
 * "tilefs.NAME" (a tilefs plugin) or "hdf5.ID" (an HDF5 plugin without a
 * NumCodecs id) with the filter's own options.  `type` is the tile's
 * datatype (element sizes and dtypes are left out when it is TF_DT_ANY).
 * malloc'd; NULL only when out of memory.
 */
char *tf_pipeline_codecs_json(const tf_pipeline *p, tf_datatype type);

#endif
