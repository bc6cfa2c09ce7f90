#include <stdlib.h>
#include <string.h>
#include "shim.h"

// pk_silence turns off HDF5's automatic error printing on the calling thread's default error
// stack. Debian builds libhdf5 thread-safe, where the error stack and its auto-print setting are
// per thread, so callers run it on the locked OS thread before each batch of HDF5 calls.
void pk_silence(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct {
	char *buf;
	size_t n;
	int count;
	char api[64];
	char detail[256];
	int errnum;
} pk_walk_t;

static herr_t pk_walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
	pk_walk_t *w = (pk_walk_t *)data;
	(void)n;
	if (w->count == 0 && e->func_name != NULL) {
		strncpy(w->api, e->func_name, sizeof w->api - 1);
	}
	if (e->desc != NULL) {
		const char *p = strstr(e->desc, "errno = ");
		strncpy(w->detail, e->desc, sizeof w->detail - 1);
		if (p != NULL && w->errnum == 0) {
			w->errnum = atoi(p + strlen("errno = "));
		}
	}
	w->count++;
	return 0;
}

// pk_errmsg writes "API: innermost description" for the calling thread's current error stack,
// or an empty string when the stack is empty, and sets *errnum to the first system error number
// a frame reports ("errno = 28" from the file driver when the disk is full), or 0.
void pk_errmsg(char *buf, size_t n, int *errnum) {
	pk_walk_t w;
	memset(&w, 0, sizeof w);
	*errnum = 0;
	if (n == 0) {
		return;
	}
	buf[0] = 0;
	if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, pk_walk_cb, &w) < 0 || w.count == 0) {
		return;
	}
	*errnum = w.errnum;
	if (w.api[0] != 0) {
		snprintf(buf, n, "%s: %s", w.api, w.detail);
	} else {
		snprintf(buf, n, "%s", w.detail);
	}
}

int pk_version(unsigned *maj, unsigned *min, unsigned *rel) { return (int)H5get_libversion(maj, min, rel); }

// pk_file_setup pins the object format versions a file may use: the earliest format that can
// hold each object, and never anything newer than HDF5 1.8's. Newer libraries then write the same
// object formats as this one.
herr_t pk_file_setup(hid_t file) { return H5Fset_libver_bounds(file, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18); }

// pk_dcpl_setup turns off object time tracking (access, modification, change and birth times in
// the object header), and sets an explicit zero fill value so the unwritten tail of the last
// chunk is zeros, not whatever was in memory. fill_type is the dataset's element type, or a
// negative id for no fill value (strings).
herr_t pk_dcpl_setup(hid_t dcpl, hid_t fill_type) {
	if (H5Pset_obj_track_times(dcpl, 0) < 0) {
		return -1;
	}
	if (fill_type >= 0) {
		unsigned char zero[16];
		if (H5Tget_size(fill_type) > sizeof zero) {
			return -1;
		}
		memset(zero, 0, sizeof zero);
		if (H5Pset_fill_value(dcpl, fill_type, zero) < 0) {
			return -1;
		}
		if (H5Pset_fill_time(dcpl, H5D_FILL_TIME_IFSET) < 0) {
			return -1;
		}
	}
	return 0;
}

hid_t pk_create_group(hid_t loc, const char *name) {
	hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
	hid_t g;
	if (gcpl < 0) {
		return -1;
	}
	if (H5Pset_obj_track_times(gcpl, 0) < 0) {
		H5Pclose(gcpl);
		return -1;
	}
	g = H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
	H5Pclose(gcpl);
	return g;
}

// pk_make_float16 turns a transient copy of H5T_IEEE_F32LE into IEEE 754 binary16 (little
// endian): sign bit 15, exponent bits 10-14 with bias 15, mantissa bits 0-9. This is the type
// h5py itself defines for numpy.float16, so h5py reads the dataset as float16.
herr_t pk_make_float16(hid_t type) {
	if (H5Tset_fields(type, 15, 10, 5, 0, 10) < 0) {
		return -1;
	}
	if (H5Tset_size(type, 2) < 0) {
		return -1;
	}
	return H5Tset_ebias(type, 15);
}

// pk_make_vlen_utf8 turns a transient copy of H5T_C_S1 into a variable-length UTF-8 string type.
herr_t pk_make_vlen_utf8(hid_t type) {
	if (H5Tset_size(type, H5T_VARIABLE) < 0) {
		return -1;
	}
	return H5Tset_cset(type, H5T_CSET_UTF8);
}

// pk_select selects rows [start, start+n) of dset's file space and makes a matching memory
// space. On success *fspace and *mspace must be closed by the caller.
static herr_t pk_select(hid_t dset, hsize_t start, hsize_t n, hid_t *fspace, hid_t *mspace) {
	hsize_t dims[H5S_MAX_RANK], off[H5S_MAX_RANK];
	int rank, i;
	*fspace = H5Dget_space(dset);
	if (*fspace < 0) {
		return -1;
	}
	rank = H5Sget_simple_extent_dims(*fspace, dims, NULL);
	if (rank < 1 || start > dims[0] || n > dims[0] - start) {
		H5Sclose(*fspace);
		return -1;
	}
	for (i = 0; i < rank; i++) {
		off[i] = 0;
	}
	off[0] = start;
	dims[0] = n;
	if (H5Sselect_hyperslab(*fspace, H5S_SELECT_SET, off, NULL, dims, NULL) < 0) {
		H5Sclose(*fspace);
		return -1;
	}
	*mspace = H5Screate_simple(rank, dims, NULL);
	if (*mspace < 0) {
		H5Sclose(*fspace);
		return -1;
	}
	return 0;
}

// pk_row_bytes returns the byte size of n rows of dset in its own type, or 0 on error.
static size_t pk_row_bytes(hid_t dset, hid_t type, hsize_t n) {
	hsize_t dims[H5S_MAX_RANK];
	hid_t space = H5Dget_space(dset);
	int rank, i;
	size_t sz;
	if (space < 0) {
		return 0;
	}
	rank = H5Sget_simple_extent_dims(space, dims, NULL);
	H5Sclose(space);
	if (rank < 1) {
		return 0;
	}
	sz = H5Tget_size(type);
	for (i = 1; i < rank; i++) {
		sz *= (size_t)dims[i];
	}
	return sz * (size_t)n;
}

// Every HDF5 API call clears the calling thread's error stack on entry, so the cleanup calls
// (H5Sclose, H5Tclose) after a failed H5Dwrite or H5Dread would leave the caller an empty stack
// and no reason (a full disk read as a bare "library error"). pk_save_stack takes the stack of
// a failed call aside; pk_restore_stack puts it back after the cleanup.
static hid_t pk_save_stack(herr_t rc) { return rc < 0 ? H5Eget_current_stack() : H5I_INVALID_HID; }

static void pk_restore_stack(hid_t st) {
	if (st >= 0) {
		H5Eset_current_stack(st);
	}
}

// pk_write_rows grows dset along axis 0 to at least start+n rows (H5Dset_extent) and writes rows
// [start, start+n) from buf, whose bytes are in the dataset's own type (no conversion).
herr_t pk_write_rows(hid_t dset, hsize_t start, hsize_t n, const void *buf, size_t len) {
	hsize_t dims[H5S_MAX_RANK];
	hid_t space, fspace, mspace, type;
	herr_t rc;
	hid_t st;
	int rank;
	if (n == 0) {
		return 0;
	}
	space = H5Dget_space(dset);
	if (space < 0) {
		return -1;
	}
	rank = H5Sget_simple_extent_dims(space, dims, NULL);
	H5Sclose(space);
	if (rank < 1) {
		return -1;
	}
	if (dims[0] < start + n) {
		dims[0] = start + n;
		if (H5Dset_extent(dset, dims) < 0) {
			return -1;
		}
	}
	type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	if (pk_row_bytes(dset, type, n) != len) {
		H5Tclose(type);
		return -1;
	}
	if (pk_select(dset, start, n, &fspace, &mspace) < 0) {
		H5Tclose(type);
		return -1;
	}
	rc = H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, buf);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	pk_restore_stack(st);
	return rc;
}

// pk_write_strings grows the 1-D string dataset dset to start+n rows and writes n strings taken
// from packed, which holds them back to back, each terminated by a NUL byte.
herr_t pk_write_strings(hid_t dset, hsize_t start, hsize_t n, const char *packed, size_t len) {
	hsize_t dims[1];
	hid_t space, fspace, mspace, type;
	const char **ptrs;
	size_t off = 0;
	hsize_t i;
	herr_t rc;
	hid_t st;
	if (n == 0) {
		return 0;
	}
	space = H5Dget_space(dset);
	if (space < 0) {
		return -1;
	}
	if (H5Sget_simple_extent_ndims(space) != 1) {
		H5Sclose(space);
		return -1;
	}
	H5Sget_simple_extent_dims(space, dims, NULL);
	H5Sclose(space);
	if (dims[0] < start + n) {
		dims[0] = start + n;
		if (H5Dset_extent(dset, dims) < 0) {
			return -1;
		}
	}
	ptrs = (const char **)malloc((size_t)n * sizeof *ptrs);
	if (ptrs == NULL) {
		return -1;
	}
	for (i = 0; i < n; i++) {
		size_t l;
		if (off >= len) {
			free(ptrs);
			return -1;
		}
		l = strnlen(packed + off, len - off);
		if (off + l >= len) {
			free(ptrs);
			return -1;
		}
		ptrs[i] = packed + off;
		off += l + 1;
	}
	type = H5Dget_type(dset);
	if (type < 0) {
		free(ptrs);
		return -1;
	}
	if (pk_select(dset, start, n, &fspace, &mspace) < 0) {
		H5Tclose(type);
		free(ptrs);
		return -1;
	}
	rc = H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, ptrs);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	free(ptrs);
	pk_restore_stack(st);
	return rc;
}

// pk_read_rows reads rows [start, start+n) of dset into buf (len bytes) in the dataset's own type.
herr_t pk_read_rows(hid_t dset, hsize_t start, hsize_t n, void *buf, size_t len) {
	hid_t fspace, mspace, type;
	herr_t rc;
	hid_t st;
	if (n == 0) {
		return 0;
	}
	type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	if (H5Tis_variable_str(type) != 0 || pk_row_bytes(dset, type, n) != len) {
		H5Tclose(type);
		return -1;
	}
	if (pk_select(dset, start, n, &fspace, &mspace) < 0) {
		H5Tclose(type);
		return -1;
	}
	rc = H5Dread(dset, type, mspace, fspace, H5P_DEFAULT, buf);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	pk_restore_stack(st);
	return rc;
}

// pk_read_string reads string i of a 1-D variable-length string dataset; *out must be released
// with pk_free.
herr_t pk_read_string(hid_t dset, hsize_t i, char **out) {
	hid_t fspace, mspace, type;
	herr_t rc;
	hid_t st;
	*out = NULL;
	type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	if (H5Tis_variable_str(type) <= 0) {
		H5Tclose(type);
		return -1;
	}
	if (pk_select(dset, i, 1, &fspace, &mspace) < 0) {
		H5Tclose(type);
		return -1;
	}
	rc = H5Dread(dset, type, mspace, fspace, H5P_DEFAULT, out);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	pk_restore_stack(st);
	return rc;
}

void pk_free(void *p) {
	if (p != NULL) {
		H5free_memory(p);
	}
}

// pk_set_str_attr attaches a scalar variable-length UTF-8 string attribute to obj.
herr_t pk_set_str_attr(hid_t obj, const char *name, const char *value) {
	hid_t type, space, attr;
	herr_t rc = -1;
	type = H5Tcopy(H5T_C_S1);
	if (type < 0) {
		return -1;
	}
	if (pk_make_vlen_utf8(type) < 0) {
		H5Tclose(type);
		return -1;
	}
	space = H5Screate(H5S_SCALAR);
	if (space < 0) {
		H5Tclose(type);
		return -1;
	}
	attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
	if (attr >= 0) {
		rc = H5Awrite(attr, type, &value);
		if (H5Aclose(attr) < 0) {
			rc = -1;
		}
	}
	H5Sclose(space);
	H5Tclose(type);
	return rc;
}

// pk_get_str_attr reads a scalar variable-length string attribute; *out must be released with
// pk_free.
herr_t pk_get_str_attr(hid_t obj, const char *name, char **out) {
	hid_t attr, type, space;
	herr_t rc = -1;
	*out = NULL;
	attr = H5Aopen(obj, name, H5P_DEFAULT);
	if (attr < 0) {
		return -1;
	}
	type = H5Aget_type(attr);
	space = H5Aget_space(attr);
	if (type >= 0 && space >= 0 && H5Tis_variable_str(type) > 0 &&
	    H5Sget_simple_extent_type(space) == H5S_SCALAR) {
		rc = H5Aread(attr, type, out);
	}
	if (space >= 0) {
		H5Sclose(space);
	}
	if (type >= 0) {
		H5Tclose(type);
	}
	H5Aclose(attr);
	return rc;
}

// pk_dims stores dset's current and maximum dimensions (at most max of them) and returns its
// rank, or -1.
int pk_dims(hid_t dset, hsize_t *dims, hsize_t *maxdims, int max) {
	hsize_t d[H5S_MAX_RANK], m[H5S_MAX_RANK];
	hid_t space = H5Dget_space(dset);
	int rank, i;
	if (space < 0) {
		return -1;
	}
	rank = H5Sget_simple_extent_dims(space, d, m);
	H5Sclose(space);
	if (rank < 0) {
		return -1;
	}
	for (i = 0; i < rank && i < max; i++) {
		dims[i] = d[i];
		maxdims[i] = m[i];
	}
	return rank;
}

// pk_type_info describes dset's element type: class, size, sign (integers), byte order, and
// whether it is a variable-length string.
herr_t pk_type_info(hid_t dset, int *cls, size_t *size, int *sign, int *order, int *vlenstr) {
	hid_t type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	*cls = (int)H5Tget_class(type);
	*size = H5Tget_size(type);
	*sign = *cls == H5T_INTEGER ? (int)H5Tget_sign(type) : -1;
	*order = (*cls == H5T_INTEGER || *cls == H5T_FLOAT) ? (int)H5Tget_order(type) : -1;
	*vlenstr = H5Tis_variable_str(type) > 0;
	H5Tclose(type);
	return 0;
}

int pk_link_exists(hid_t loc, const char *name) { return (int)H5Lexists(loc, name, H5P_DEFAULT); }
