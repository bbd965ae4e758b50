/* tf_datatype.c - datatype table (FORMAT.md §1.3). */
#include "util/tf_datatype.h"

#include <strings.h>

static const struct {
	const char *name;
	unsigned char size;
} types[TF_DT_COUNT] = {
	{ "int32", 4 }, { "int64", 8 }, { "float32", 4 }, { "float64", 8 },
	{ "char", 1 }, { "int8", 1 }, { "uint8", 1 }, { "int16", 2 },
	{ "uint16", 2 }, { "uint32", 4 }, { "uint64", 8 },
	{ "string_ascii", 1 }, { "string_utf8", 1 }, { "string_utf16", 2 },
	{ "string_utf32", 4 }, { "string_ucs2", 2 }, { "string_ucs4", 4 },
	{ "any", 1 },
	{ "datetime_year", 8 }, { "datetime_month", 8 }, { "datetime_week", 8 },
	{ "datetime_day", 8 }, { "datetime_hr", 8 }, { "datetime_min", 8 },
	{ "datetime_sec", 8 }, { "datetime_ms", 8 }, { "datetime_us", 8 },
	{ "datetime_ns", 8 }, { "datetime_ps", 8 }, { "datetime_fs", 8 },
	{ "datetime_as", 8 },
	{ "time_hr", 8 }, { "time_min", 8 }, { "time_sec", 8 }, { "time_ms", 8 },
	{ "time_us", 8 }, { "time_ns", 8 }, { "time_ps", 8 }, { "time_fs", 8 },
	{ "time_as", 8 },
	{ "blob", 1 }, { "bool", 1 }, { "geom_wkb", 1 }, { "geom_wkt", 1 },
};

bool tf_datatype_valid(unsigned v)
{
	return v < TF_DT_COUNT;
}

unsigned tf_datatype_size(tf_datatype t)
{
	return tf_datatype_valid(t) ? types[t].size : 0;
}

const char *tf_datatype_name(tf_datatype t)
{
	return tf_datatype_valid(t) ? types[t].name : "invalid";
}

bool tf_datatype_parse(const char *name, tf_datatype *out)
{
	for (unsigned i = 0; i < TF_DT_COUNT; i++) {
		if (strcasecmp(name, types[i].name) == 0) {
			*out = (tf_datatype)i;
			return true;
		}
	}
	return false;
}

bool tf_datatype_is_integer(tf_datatype t)
{
	switch (t) {
	case TF_DT_BOOL: case TF_DT_INT8: case TF_DT_UINT8: case TF_DT_INT16:
	case TF_DT_UINT16: case TF_DT_INT32: case TF_DT_UINT32: case TF_DT_INT64:
	case TF_DT_UINT64:
		return true;
	default:
		return false;
	}
}

bool tf_datatype_is_signed(tf_datatype t)
{
	return t == TF_DT_INT8 || t == TF_DT_INT16 || t == TF_DT_INT32 || t == TF_DT_INT64;
}

bool tf_datatype_is_datetime(tf_datatype t)
{
	return t >= TF_DT_DATETIME_YEAR && t <= TF_DT_TIME_AS;
}

bool tf_datatype_is_real(tf_datatype t)
{
	return t == TF_DT_FLOAT32 || t == TF_DT_FLOAT64;
}

bool tf_datatype_is_var_string(tf_datatype t)
{
	return t == TF_DT_STRING_ASCII || t == TF_DT_STRING_UTF8;
}
