/*
 * tf_condition.c - delete conditions: parse the stored tree, test a cell.
 */
#include "views/tf_condition.h"

#include <stdlib.h>
#include <string.h>

enum { OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_IN, OP_NOT_IN };
enum { COMB_AND, COMB_OR, COMB_NOT };
#define MAX_DEPTH 64
#define MAX_NODES 100000

typedef struct node {
	bool expr;
	uint8_t op;		/* value: OP_*, expr: COMB_* */
	size_t field;		/* value: index into fields */
	const uint8_t *val;	/* value: into the payload copy; NULL = null */
	size_t nval;
	size_t nmembers;	/* IN / NOT_IN */
	uint64_t *members;	/* nmembers + 1 starts within val */
	size_t nkids;
	struct node **kids;
} node;

struct tf_cond {
	uint8_t *payload;	/* owned copy: nodes point into it */
	node *root;
	char **fields;
	size_t nfields;
	size_t nodes;
};

static void node_free(node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkids; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->members);
	free(n);
}

void tf_cond_free(tf_cond *c)
{
	if (!c)
		return;
	node_free(c->root);
	for (size_t i = 0; i < c->nfields; i++)
		free(c->fields[i]);
	free(c->fields);
	free(c->payload);
	free(c);
}

static tf_status field_index(tf_cond *c, tf_span name, size_t *out, tf_error *err)
{
	char **v;

	for (size_t i = 0; i < c->nfields; i++)
		if (strlen(c->fields[i]) == name.n && !memcmp(c->fields[i], name.p, name.n)) {
			*out = i;
			return TF_OK;
		}
	if (!(v = realloc(c->fields, (c->nfields + 1) * sizeof(*v))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	c->fields = v;
	if (!(v[c->nfields] = strndup((const char *)name.p, name.n)))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	*out = c->nfields++;
	return TF_OK;
}

static tf_status parse_members(tf_reader *r, node *n, tf_error *err)
{
	uint64_t size;
	tf_span offs;
	tf_status rc;

	if ((rc = tf_get_u64(r, &size, "set offsets size", err)) != TF_OK ||
	    (rc = tf_get_span(r, size, &offs, "set offsets", err)) != TF_OK)
		return rc;
	if (offs.n % 8)
		return tf_err(err, TF_E_CORRUPT, "set offsets of %zu bytes", offs.n);
	n->nmembers = offs.n / 8;
	if (!(n->members = malloc((n->nmembers + 1) * sizeof(uint64_t))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n->nmembers; i++) {
		n->members[i] = tf_le64(offs.p + 8 * i);
		if (n->members[i] > n->nval || (i && n->members[i] < n->members[i - 1]))
			return tf_err(err, TF_E_CORRUPT, "set member %zu out of range", i);
	}
	n->members[n->nmembers] = n->nval;
	return TF_OK;
}

static tf_status parse_node(tf_cond *c, tf_reader *r, unsigned depth, node **out, tf_error *err);

static tf_status parse_value(tf_cond *c, tf_reader *r, node *n, tf_error *err)
{
	uint32_t len;
	uint64_t size;
	tf_span name, val;
	tf_status rc;

	if ((rc = tf_get_u8(r, &n->op, "condition op", err)) != TF_OK ||
	    (rc = tf_get_u32(r, &len, "field name size", err)) != TF_OK ||
	    (rc = tf_get_span(r, len, &name, "field name", err)) != TF_OK ||
	    (rc = tf_get_u64(r, &size, "value size", err)) != TF_OK ||
	    (rc = tf_get_span(r, size, &val, "value", err)) != TF_OK)
		return rc;
	if (n->op > OP_NOT_IN)
		return tf_err(err, TF_E_UNSUPPORTED, "condition op %u", n->op);
	n->val = val.n ? val.p : NULL;
	n->nval = val.n;
	if ((rc = field_index(c, name, &n->field, err)) != TF_OK)
		return rc;
	return n->op >= OP_IN ? parse_members(r, n, err) : TF_OK;
}

static tf_status parse_expr(tf_cond *c, tf_reader *r, unsigned depth, node *n, tf_error *err)
{
	uint64_t count;
	tf_status rc;

	if ((rc = tf_get_u8(r, &n->op, "combination op", err)) != TF_OK ||
	    (rc = tf_get_u64(r, &count, "children", err)) != TF_OK)
		return rc;
	if (n->op > COMB_NOT || count == 0 || count > r->n || (n->op == COMB_NOT && count != 1))
		return tf_err(err, TF_E_CORRUPT, "combination %u of %llu children", n->op,
			      (unsigned long long)count);
	if (!(n->kids = calloc((size_t)count, sizeof(*n->kids))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	while (n->nkids < count) {
		rc = parse_node(c, r, depth + 1, &n->kids[n->nkids], err);
		if (n->kids[n->nkids])
			n->nkids++;	/* freed with its parent, even half parsed */
		if (rc != TF_OK)
			return rc;
	}
	return TF_OK;
}

static tf_status parse_node(tf_cond *c, tf_reader *r, unsigned depth, node **out, tf_error *err)
{
	uint8_t type;
	tf_status rc;

	if (depth > MAX_DEPTH || ++c->nodes > MAX_NODES)
		return tf_err(err, TF_E_CORRUPT, "condition too deep or too large");
	if ((rc = tf_get_u8(r, &type, "node type", err)) != TF_OK)
		return rc;
	if (type > 1)
		return tf_err(err, TF_E_CORRUPT, "node type %u", type);
	if (!(*out = calloc(1, sizeof(**out))))
		return tf_err(err, TF_E_NOMEM, "out of memory");
	(*out)->expr = type == 0;
	return type == 0 ? parse_expr(c, r, depth, *out, err) : parse_value(c, r, *out, err);
}

tf_status tf_cond_parse(tf_span payload, tf_cond **out, tf_error *err)
{
	tf_cond *c = calloc(1, sizeof(*c));
	tf_reader r;
	tf_status rc;

	if (!c || !(c->payload = malloc(payload.n ? payload.n : 1))) {
		free(c);
		return tf_err(err, TF_E_NOMEM, "out of memory");
	}
	memcpy(c->payload, payload.p, payload.n);
	r = tf_reader_of(tf_span_of(c->payload, payload.n));
	rc = parse_node(c, &r, 0, &c->root, err);
	/* An update's values may follow an update condition; a delete has nothing. */
	if (rc != TF_OK) {
		tf_cond_free(c);
		return tf_err_prefix(err, "delete condition");
	}
	*out = c;
	return TF_OK;
}

size_t tf_cond_nfields(const tf_cond *c) { return c->nfields; }
const char *tf_cond_field(const tf_cond *c, size_t i) { return c->fields[i]; }

/* ---- evaluation ---------------------------------------------------------------------------- */

static int cmp_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	int r = memcmp(a, b, na < nb ? na : nb);

	return r ? r : (na > nb) - (na < nb);
}

/* Compare the first value of the cell with the condition's, as type t. */
static int cmp_number(tf_datatype t, const uint8_t *a, const uint8_t *b)
{
	unsigned size = tf_datatype_size(t);
	uint64_t ua = tf_le_n(a, size), ub = tf_le_n(b, size);
	float fa, fb;
	double da, db;

	if (t == TF_DT_FLOAT32) {
		memcpy(&fa, a, 4), memcpy(&fb, b, 4);
		return fa < fb ? -1 : fa > fb ? 1 : fa == fb ? 0 : 2;	/* 2: unordered (NaN) */
	}
	if (t == TF_DT_FLOAT64) {
		memcpy(&da, a, 8), memcpy(&db, b, 8);
		return da < db ? -1 : da > db ? 1 : da == db ? 0 : 2;
	}
	if (tf_datatype_is_signed(t) || tf_datatype_is_datetime(t)) {
		int64_t sa = size == 8 ? (int64_t)ua : (int64_t)(ua << (64 - 8 * size)) >> (64 - 8 * size);
		int64_t sb = size == 8 ? (int64_t)ub : (int64_t)(ub << (64 - 8 * size)) >> (64 - 8 * size);
		return (sa > sb) - (sa < sb);
	}
	return (ua > ub) - (ua < ub);
}

static bool bytewise(tf_datatype t, bool var)
{
	return var || t == TF_DT_CHAR || tf_datatype_is_var_string(t) || t == TF_DT_BLOB ||
	       t == TF_DT_GEOM_WKB || t == TF_DT_GEOM_WKT || t == TF_DT_ANY;
}

static bool member_of(const node *n, const tf_cond_value *v)
{
	for (size_t i = 0; i < n->nmembers; i++) {
		size_t len = (size_t)(n->members[i + 1] - n->members[i]);
		if (len == v->n && !memcmp(n->val + n->members[i], v->p, len))
			return true;
	}
	return false;
}

static bool test_value(const node *n, const tf_cond_value *v)
{
	bool null = v->null || !v->p;
	int r;

	if (v->absent)
		return false;	/* added by evolution: fails (query_condition.cc) */
	if (n->op == OP_IN || n->op == OP_NOT_IN)
		return !null && member_of(n, v) == (n->op == OP_IN);
	if (n->op == OP_EQ && (null || !n->val))
		return null && !n->val;
	if (n->op == OP_NE && (null || !n->val))
		return !null && !n->val;
	if (null || !n->val)
		return false;
	if (bytewise(v->type, v->var))
		r = cmp_bytes(v->p, v->n, n->val, n->nval);
	else if (v->n < tf_datatype_size(v->type) || n->nval < tf_datatype_size(v->type))
		return false;
	else
		r = cmp_number(v->type, v->p, n->val);
	switch (n->op) {
	case OP_LT: return r == -1;
	case OP_LE: return r == -1 || r == 0;
	case OP_GT: return r == 1;
	case OP_GE: return r == 1 || r == 0;
	case OP_EQ: return r == 0;
	default: return r != 0;	/* NE, NaN included */
	}
}

static bool eval(const node *n, const tf_cond_value *values)
{
	bool acc;

	if (!n->expr)
		return test_value(n, &values[n->field]);
	if (n->op == COMB_NOT)
		return !eval(n->kids[0], values);
	acc = n->op == COMB_AND;
	for (size_t i = 0; i < n->nkids; i++)
		if (eval(n->kids[i], values) != acc)
			return !acc;
	return acc;
}

bool tf_cond_keeps(const tf_cond *c, const tf_cond_value *values)
{
	return eval(c->root, values);
}
