// The package's whole interface to libhdf5: the C API calls it makes (files, datasets, types,
// property lists), and helpers for dataset extension (H5Dset_extent), object time tracking,
// library version bounds, a 16-bit float type, variable-length strings and sequences, and the
// error stack.
// libhdf5 is loaded at run time by pk_load; no other function may be called before it succeeds.
#ifndef PACKER_HDF5_SHIM_H
#define PACKER_HDF5_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "hdf5.h"

int pk_load(const char *path, char *err, size_t n);

enum { PK_T_STD_U8LE, PK_T_STD_I64LE, PK_T_IEEE_F32LE, PK_T_C_S1, PK_T_STD_I32LE, PK_T_IEEE_F64LE };
enum { PK_P_DATASET_CREATE, PK_P_DATASET_ACCESS };

hid_t pk_fcreate(const char *name);
hid_t pk_fopen(const char *name);
herr_t pk_fclose(hid_t id);
herr_t pk_dclose(hid_t id);
herr_t pk_gclose(hid_t id);
herr_t pk_pclose(hid_t id);
herr_t pk_sclose(hid_t id);
herr_t pk_tclose(hid_t id);
hid_t pk_type_copy(int which);
hid_t pk_plist_create(int which);
herr_t pk_set_chunk(hid_t dcpl, int rank, const hsize_t *dims);
herr_t pk_set_chunk_cache(hid_t dapl, size_t slots, size_t bytes, double w0);
hid_t pk_simple_space(int rank, const hsize_t *dims, const hsize_t *maxdims);
hid_t pk_dcreate(hid_t loc, const char *name, hid_t type, hid_t space, hid_t dcpl);
hid_t pk_dopen(hid_t loc, const char *name, hid_t dapl);

void pk_silence(void);
void pk_errmsg(char *buf, size_t n, int *errnum);
int pk_version(unsigned *maj, unsigned *min, unsigned *rel);

herr_t pk_file_setup(hid_t file);
herr_t pk_dcpl_setup(hid_t dcpl, hid_t fill_type);
hid_t pk_create_group(hid_t loc, const char *name);
herr_t pk_make_float16(hid_t type);
herr_t pk_make_vlen_utf8(hid_t type);

herr_t pk_write_rows(hid_t dset, hsize_t start, hsize_t n, const void *buf, size_t len);
herr_t pk_write_strings(hid_t dset, hsize_t start, hsize_t n, const char *packed, size_t len);
herr_t pk_read_rows(hid_t dset, hsize_t start, hsize_t n, void *buf, size_t len);
herr_t pk_read_string(hid_t dset, hsize_t i, char **out);
void pk_free(void *p);

herr_t pk_set_str_attr(hid_t obj, const char *name, const char *value);
herr_t pk_get_str_attr(hid_t obj, const char *name, char **out);

int pk_dims(hid_t dset, hsize_t *dims, hsize_t *maxdims, int max);
herr_t pk_type_info(hid_t dset, int *cls, size_t *size, int *sign, int *order, int *vlenstr);
int pk_link_exists(hid_t loc, const char *name);

hid_t pk_vlen_create(hid_t base);
herr_t pk_write_vlen(hid_t dset, hsize_t start, hsize_t n, const uint64_t *lens, const void *data, size_t len);
herr_t pk_read_vlen(hid_t dset, hsize_t i, void **out, size_t *bytes);
herr_t pk_vlen_base_info(hid_t dset, int *cls, size_t *size, int *sign, int *order);
int pk_attr_exists(hid_t obj, const char *name);
herr_t pk_set_i64s_attr(hid_t obj, const char *name, int n, const int64_t *v);

#endif
