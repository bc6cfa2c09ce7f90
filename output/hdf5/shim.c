#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shim.h"

// libhdf5 is not linked: pk_load opens it with dlopen the first time an HDF5 dataset is written
// or read, so the program starts and works without it for every other format. hdf5.h is used
// for its types only. Each function below is called through a pointer that pk_load fills with
// dlsym; the #defines after the pointers send the shim's calls (written as plain HDF5 calls)
// through them. __typeof__ of a declared function refers to no symbol, so nothing here needs
// libhdf5 at link time.
#define PK_H5_FUNCS(X) \
	X(H5open) X(H5get_libversion) X(H5free_memory) \
	X(H5Eset_auto2) X(H5Ewalk2) X(H5Eget_current_stack) X(H5Eset_current_stack) \
	X(H5Fcreate) X(H5Fopen) X(H5Fclose) X(H5Fset_libver_bounds) \
	X(H5Gcreate2) X(H5Gclose) X(H5Lexists) \
	X(H5Dcreate2) X(H5Dopen2) X(H5Dclose) X(H5Dget_space) X(H5Dget_type) X(H5Dset_extent) X(H5Dread) X(H5Dwrite) \
	X(H5Screate) X(H5Screate_simple) X(H5Sclose) X(H5Sget_simple_extent_dims) X(H5Sget_simple_extent_ndims) X(H5Sget_simple_extent_type) X(H5Sselect_hyperslab) \
	X(H5Tcopy) X(H5Tclose) X(H5Tget_size) X(H5Tset_size) X(H5Tset_fields) X(H5Tset_ebias) X(H5Tset_cset) X(H5Tget_class) X(H5Tget_sign) X(H5Tget_order) X(H5Tis_variable_str) X(H5Tvlen_create) X(H5Tget_super) \
	X(H5Pcreate) X(H5Pclose) X(H5Pset_chunk) X(H5Pset_chunk_cache) X(H5Pset_obj_track_times) X(H5Pset_fill_value) X(H5Pset_fill_time) \
	X(H5Acreate2) X(H5Aopen) X(H5Aclose) X(H5Awrite) X(H5Aread) X(H5Aget_type) X(H5Aget_space) X(H5Aexists)

#define PK_FN_PTR(f) static __typeof__(f) *pkp_##f;
PK_H5_FUNCS(PK_FN_PTR)

#define H5open (*pkp_H5open)
#define H5get_libversion (*pkp_H5get_libversion)
#define H5free_memory (*pkp_H5free_memory)
#define H5Eset_auto2 (*pkp_H5Eset_auto2)
#define H5Ewalk2 (*pkp_H5Ewalk2)
#define H5Eget_current_stack (*pkp_H5Eget_current_stack)
#define H5Eset_current_stack (*pkp_H5Eset_current_stack)
#define H5Fcreate (*pkp_H5Fcreate)
#define H5Fopen (*pkp_H5Fopen)
#define H5Fclose (*pkp_H5Fclose)
#define H5Fset_libver_bounds (*pkp_H5Fset_libver_bounds)
#define H5Gcreate2 (*pkp_H5Gcreate2)
#define H5Gclose (*pkp_H5Gclose)
#define H5Lexists (*pkp_H5Lexists)
#define H5Dcreate2 (*pkp_H5Dcreate2)
#define H5Dopen2 (*pkp_H5Dopen2)
#define H5Dclose (*pkp_H5Dclose)
#define H5Dget_space (*pkp_H5Dget_space)
#define H5Dget_type (*pkp_H5Dget_type)
#define H5Dset_extent (*pkp_H5Dset_extent)
#define H5Dread (*pkp_H5Dread)
#define H5Dwrite (*pkp_H5Dwrite)
#define H5Screate (*pkp_H5Screate)
#define H5Screate_simple (*pkp_H5Screate_simple)
#define H5Sclose (*pkp_H5Sclose)
#define H5Sget_simple_extent_dims (*pkp_H5Sget_simple_extent_dims)
#define H5Sget_simple_extent_ndims (*pkp_H5Sget_simple_extent_ndims)
#define H5Sget_simple_extent_type (*pkp_H5Sget_simple_extent_type)
#define H5Sselect_hyperslab (*pkp_H5Sselect_hyperslab)
#define H5Tcopy (*pkp_H5Tcopy)
#define H5Tclose (*pkp_H5Tclose)
#define H5Tget_size (*pkp_H5Tget_size)
#define H5Tset_size (*pkp_H5Tset_size)
#define H5Tset_fields (*pkp_H5Tset_fields)
#define H5Tset_ebias (*pkp_H5Tset_ebias)
#define H5Tset_cset (*pkp_H5Tset_cset)
#define H5Tget_class (*pkp_H5Tget_class)
#define H5Tget_sign (*pkp_H5Tget_sign)
#define H5Tget_order (*pkp_H5Tget_order)
#define H5Tis_variable_str (*pkp_H5Tis_variable_str)
#define H5Tvlen_create (*pkp_H5Tvlen_create)
#define H5Tget_super (*pkp_H5Tget_super)
#define H5Pcreate (*pkp_H5Pcreate)
#define H5Pclose (*pkp_H5Pclose)
#define H5Pset_chunk (*pkp_H5Pset_chunk)
#define H5Pset_chunk_cache (*pkp_H5Pset_chunk_cache)
#define H5Pset_obj_track_times (*pkp_H5Pset_obj_track_times)
#define H5Pset_fill_value (*pkp_H5Pset_fill_value)
#define H5Pset_fill_time (*pkp_H5Pset_fill_time)
#define H5Acreate2 (*pkp_H5Acreate2)
#define H5Aopen (*pkp_H5Aopen)
#define H5Aclose (*pkp_H5Aclose)
#define H5Awrite (*pkp_H5Awrite)
#define H5Aread (*pkp_H5Aread)
#define H5Aget_type (*pkp_H5Aget_type)
#define H5Aget_space (*pkp_H5Aget_space)
#define H5Aexists (*pkp_H5Aexists)

// The predefined types and property list classes the package uses. In libhdf5 they are global
// hid_t variables (H5T_C_S1_g, ...) that H5open initialises; hdf5.h's H5T_C_S1 and friends
// read them. pk_load copies them after H5open.
#define PK_H5_GLOBALS(X) \
	X(H5T_C_S1_g) X(H5T_STD_U8LE_g) X(H5T_STD_I64LE_g) X(H5T_IEEE_F32LE_g) \
	X(H5T_STD_I32LE_g) X(H5T_IEEE_F64LE_g) \
	X(H5P_CLS_GROUP_CREATE_ID_g) X(H5P_CLS_DATASET_CREATE_ID_g) X(H5P_CLS_DATASET_ACCESS_ID_g)

#define PK_GLOBAL_VAR(g) static hid_t pkg_##g = H5I_INVALID_HID;
PK_H5_GLOBALS(PK_GLOBAL_VAR)

static void *pk_handle;

// pk_load opens the shared library path (a file name searched as dlopen searches, or a path),
// resolves every function and global the shim uses, and initialises the library (H5open). On
// failure it writes the reason to err and leaves nothing loaded. It returns 0 on success, -1 on
// failure. The caller runs it once, from one thread, and never unloads the library.
int pk_load(const char *path, char *err, size_t n) {
	void *h, *sym;
	const char *missing = NULL;
	if (n > 0) {
		err[0] = 0;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, n, "%s", e != NULL ? e : path);
		return -1;
	}
#define PK_LOAD_FN(f) \
	if (missing == NULL) { \
		sym = dlsym(h, #f); \
		if (sym == NULL) { \
			missing = #f; \
		} \
		pkp_##f = (__typeof__(pkp_##f))sym; \
	}
	PK_H5_FUNCS(PK_LOAD_FN)
#define PK_LOAD_GLOBAL(g) \
	if (missing == NULL && dlsym(h, #g) == NULL) { \
		missing = #g; \
	}
	PK_H5_GLOBALS(PK_LOAD_GLOBAL)
	if (missing != NULL) {
		snprintf(err, n, "%s: no symbol %s (not libhdf5 1.10 or later?)", path, missing);
		dlclose(h);
		return -1;
	}
	if (H5open() < 0) {
		snprintf(err, n, "%s: H5open failed", path);
		dlclose(h);
		return -1;
	}
#define PK_COPY_GLOBAL(g) pkg_##g = *(hid_t *)dlsym(h, #g);
	PK_H5_GLOBALS(PK_COPY_GLOBAL)
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	pk_handle = h;
	return 0;
}

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
	hid_t gcpl = H5Pcreate(pkg_H5P_CLS_GROUP_CREATE_ID_g);
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
	type = H5Tcopy(pkg_H5T_C_S1_g);
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

// The calls the Go side makes directly, through the loaded library.

// hdf5.h's H5F_ACC_* macros call H5check_version and H5open (linked symbols); these are their
// values, which are part of the library's ABI.
#define PK_F_ACC_RDONLY 0x0000u
#define PK_F_ACC_TRUNC 0x0002u

hid_t pk_fcreate(const char *name) { return H5Fcreate(name, PK_F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
hid_t pk_fopen(const char *name) { return H5Fopen(name, PK_F_ACC_RDONLY, H5P_DEFAULT); }
herr_t pk_fclose(hid_t id) { return H5Fclose(id); }
herr_t pk_dclose(hid_t id) { return H5Dclose(id); }
herr_t pk_gclose(hid_t id) { return H5Gclose(id); }
herr_t pk_pclose(hid_t id) { return H5Pclose(id); }
herr_t pk_sclose(hid_t id) { return H5Sclose(id); }
herr_t pk_tclose(hid_t id) { return H5Tclose(id); }

hid_t pk_type_copy(int which) {
	switch (which) {
	case PK_T_STD_U8LE:
		return H5Tcopy(pkg_H5T_STD_U8LE_g);
	case PK_T_STD_I64LE:
		return H5Tcopy(pkg_H5T_STD_I64LE_g);
	case PK_T_IEEE_F32LE:
		return H5Tcopy(pkg_H5T_IEEE_F32LE_g);
	case PK_T_C_S1:
		return H5Tcopy(pkg_H5T_C_S1_g);
	case PK_T_STD_I32LE:
		return H5Tcopy(pkg_H5T_STD_I32LE_g);
	case PK_T_IEEE_F64LE:
		return H5Tcopy(pkg_H5T_IEEE_F64LE_g);
	}
	return H5I_INVALID_HID;
}

hid_t pk_plist_create(int which) {
	switch (which) {
	case PK_P_DATASET_CREATE:
		return H5Pcreate(pkg_H5P_CLS_DATASET_CREATE_ID_g);
	case PK_P_DATASET_ACCESS:
		return H5Pcreate(pkg_H5P_CLS_DATASET_ACCESS_ID_g);
	}
	return H5I_INVALID_HID;
}

herr_t pk_set_chunk(hid_t dcpl, int rank, const hsize_t *dims) { return H5Pset_chunk(dcpl, rank, dims); }

herr_t pk_set_chunk_cache(hid_t dapl, size_t slots, size_t bytes, double w0) {
	return H5Pset_chunk_cache(dapl, slots, bytes, w0);
}

hid_t pk_simple_space(int rank, const hsize_t *dims, const hsize_t *maxdims) {
	return H5Screate_simple(rank, dims, maxdims);
}

hid_t pk_dcreate(hid_t loc, const char *name, hid_t type, hid_t space, hid_t dcpl) {
	return H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
}

hid_t pk_dopen(hid_t loc, const char *name, hid_t dapl) { return H5Dopen2(loc, name, dapl); }

// Variable-length sequences (fields of varying length: a variable ndarray's rows flattened,
// bytes). In memory each element is an hvl_t {len, p}; the dataset's own type is used as the
// memory type, as for fixed rows, so the elements are the file's little-endian ones.

hid_t pk_vlen_create(hid_t base) { return H5Tvlen_create(base); }

// pk_write_vlen grows the 1-D vlen dataset dset to start+n rows and writes n sequences: row i has
// lens[i] elements, taken one after another from data (len bytes in all).
herr_t pk_write_vlen(hid_t dset, hsize_t start, hsize_t n, const uint64_t *lens, const void *data, size_t len) {
	hsize_t dims[1];
	hid_t space, fspace, mspace, type, super;
	hvl_t *seq;
	size_t off = 0, esize;
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
	type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	super = H5Tget_super(type);
	if (super < 0) {
		H5Tclose(type);
		return -1;
	}
	esize = H5Tget_size(super);
	H5Tclose(super);
	seq = (hvl_t *)malloc((size_t)n * sizeof *seq);
	if (seq == NULL || esize == 0) {
		free(seq);
		H5Tclose(type);
		return -1;
	}
	for (i = 0; i < n; i++) {
		size_t b = (size_t)lens[i] * esize;
		if (b > len - off) {
			free(seq);
			H5Tclose(type);
			return -1;
		}
		seq[i].len = (size_t)lens[i];
		seq[i].p = (void *)((const char *)data + off);
		off += b;
	}
	if (off != len) {
		free(seq);
		H5Tclose(type);
		return -1;
	}
	if (dims[0] < start + n) {
		dims[0] = start + n;
		if (H5Dset_extent(dset, dims) < 0) {
			free(seq);
			H5Tclose(type);
			return -1;
		}
	}
	if (pk_select(dset, start, n, &fspace, &mspace) < 0) {
		free(seq);
		H5Tclose(type);
		return -1;
	}
	rc = H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, seq);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	free(seq);
	pk_restore_stack(st);
	return rc;
}

// pk_read_vlen reads sequence i of a 1-D vlen dataset: *out holds *bytes bytes (its elements,
// each of the base type's size) and must be released with pk_free; NULL for an empty one.
herr_t pk_read_vlen(hid_t dset, hsize_t i, void **out, size_t *bytes) {
	hid_t fspace, mspace, type, super;
	hvl_t seq;
	herr_t rc;
	hid_t st;
	size_t esize;
	*out = NULL;
	*bytes = 0;
	type = H5Dget_type(dset);
	if (type < 0) {
		return -1;
	}
	if (H5Tget_class(type) != H5T_VLEN) {
		H5Tclose(type);
		return -1;
	}
	super = H5Tget_super(type);
	if (super < 0) {
		H5Tclose(type);
		return -1;
	}
	esize = H5Tget_size(super);
	H5Tclose(super);
	if (pk_select(dset, i, 1, &fspace, &mspace) < 0) {
		H5Tclose(type);
		return -1;
	}
	seq.len = 0;
	seq.p = NULL;
	rc = H5Dread(dset, type, mspace, fspace, H5P_DEFAULT, &seq);
	st = pk_save_stack(rc);
	H5Sclose(mspace);
	H5Sclose(fspace);
	H5Tclose(type);
	pk_restore_stack(st);
	if (rc >= 0) {
		*out = seq.p;
		*bytes = seq.len * esize;
	}
	return rc;
}

// pk_vlen_base_info describes the base type of dset's vlen type (as pk_type_info a dataset's).
herr_t pk_vlen_base_info(hid_t dset, int *cls, size_t *size, int *sign, int *order) {
	hid_t type = H5Dget_type(dset), super;
	if (type < 0) {
		return -1;
	}
	if (H5Tget_class(type) != H5T_VLEN) {
		H5Tclose(type);
		return -1;
	}
	super = H5Tget_super(type);
	H5Tclose(type);
	if (super < 0) {
		return -1;
	}
	*cls = (int)H5Tget_class(super);
	*size = H5Tget_size(super);
	*sign = *cls == H5T_INTEGER ? (int)H5Tget_sign(super) : -1;
	*order = (*cls == H5T_INTEGER || *cls == H5T_FLOAT) ? (int)H5Tget_order(super) : -1;
	H5Tclose(super);
	return 0;
}

// pk_set_i64s_attr attaches a 1-D int64 attribute of n values to obj.
herr_t pk_set_i64s_attr(hid_t obj, const char *name, int n, const int64_t *v) {
	hsize_t d[1];
	hid_t space, attr;
	herr_t rc = -1;
	d[0] = (hsize_t)n;
	space = H5Screate_simple(1, d, NULL);
	if (space < 0) {
		return -1;
	}
	attr = H5Acreate2(obj, name, pkg_H5T_STD_I64LE_g, space, H5P_DEFAULT, H5P_DEFAULT);
	if (attr >= 0) {
		rc = H5Awrite(attr, pkg_H5T_STD_I64LE_g, v);
		if (H5Aclose(attr) < 0) {
			rc = -1;
		}
	}
	H5Sclose(space);
	return rc;
}

int pk_attr_exists(hid_t obj, const char *name) { return (int)H5Aexists(obj, name); }
