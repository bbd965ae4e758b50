/*
 * hdf5.h - an HDF5 filter plugin run as a tilefs filter stage.
 *
 * The few HDF5 types a plugin's entry points use are declared here, as
 * HDF5 defines them (H5PLextern.h, H5Zpublic.h; HDF5 1.8.11 and later),
 * so that tilefs never links libhdf5 (netcdf-c does the same in
 * netcdf_filter_hdf5_build.h):
 *   H5PL_type_t H5PLget_plugin_type(void)    0 = H5PL_TYPE_FILTER
 *   const void *H5PLget_plugin_info(void)     an H5Z_class2_t
 *   size_t filter(flags, cd_nelmts, cd_values[], nbytes, *buf_size, **buf)
 *
 * The stage (its class is named "hdf5:ID", layout TF_OPTS_CD_VALUES) writes
 * no metadata: metadata of earlier filters passes through it untouched, and
 * its data is exactly the plugin's output for the stage's data (encode: the
 * plugin run forward over the data parts, joined; decode: run with
 * H5Z_FLAG_REVERSE).  Empty data stays empty without calling the plugin
 * (an HDF5 filter cannot return 0 bytes: 0 means failure).
 *
 * Buffers: the filter function takes *buf (nbytes valid, *buf_size
 * allocated, from malloc) and may free it and replace it with one of its
 * own (malloc, or H5allocate_memory, which is malloc in release builds of
 * libhdf5 such as Debian's).  We always free exactly the pointer *buf holds
 * when it returns, success or failure.  Its output size is checked against
 * the buffer it hands back (malloc_usable_size: plugins leave *buf_size
 * stale), the stage's limit and, for the first stage, the chunk header's
 * original length before a byte is copied out.
 *
 * Calls into one plugin are serialized (HDF5 itself never calls a filter
 * from two threads at once) and run on the filter's own thread (a
 * callout.h callout), on copies: tf_hdf5_filter_stop releases every caller
 * waiting for it with TF_E_IO, so a plugin that never returns holds no
 * caller for ever.
 */
#ifndef TF_HDF5_H
#define TF_HDF5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filters/tf_filter.h"

#define TF_H5PL_TYPE_FILTER 0		/* H5PL_TYPE_FILTER */
#define TF_H5Z_CLASS_T_VERS 1		/* H5Z_CLASS_T_VERS */
#define TF_H5Z_FLAG_REVERSE 0x0100u	/* H5Z_FLAG_REVERSE */
#define TF_H5Z_FILTER_MAX 65535		/* H5Z_FILTER_MAX */

typedef int64_t tf_hid_t;		/* hid_t (64 bits since HDF5 1.10; never called) */
typedef size_t (*tf_h5z_func_t)(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[],
				size_t nbytes, size_t *buf_size, void **buf);

typedef struct tf_h5z_class2 {		/* H5Z_class2_t */
	int version;			/* TF_H5Z_CLASS_T_VERS */
	int id;				/* H5Z_filter_t */
	unsigned encoder_present, decoder_present;
	const char *name;
	int (*can_apply)(tf_hid_t dcpl, tf_hid_t type, tf_hid_t space);
	int (*set_local)(tf_hid_t dcpl, tf_hid_t type, tf_hid_t space);
	tf_h5z_func_t filter;
} tf_h5z_class2;

typedef int (*tf_h5pl_type_fn)(void);		/* H5PLget_plugin_type */
typedef const void *(*tf_h5pl_info_fn)(void);	/* H5PLget_plugin_info */

typedef struct tf_hdf5_filter tf_hdf5_filter;

/* Verify a plugin's entry points (already found with dlsym) and make its
 * class; err says why a plugin is refused. */
tf_status tf_hdf5_filter_new(tf_h5pl_type_fn type, tf_h5pl_info_fn info, tf_hdf5_filter **out,
			     tf_error *err);
/* Release every caller waiting on the plugin and fail later calls (TF_E_IO). */
void tf_hdf5_filter_stop(tf_hdf5_filter *h);
/* Stop and free; false if a call is still inside the plugin (abandoned):
 * then the plugin's code must stay loaded. */
bool tf_hdf5_filter_free(tf_hdf5_filter *h);
const tf_filter_class *tf_hdf5_filter_class(const tf_hdf5_filter *h);

#endif
