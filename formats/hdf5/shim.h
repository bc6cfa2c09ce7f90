// Small C helpers over the HDF5 C API for what gonum.org/v1/hdf5 does not expose: dataset
// extension (H5Dset_extent), object time tracking, library version bounds, a 16-bit float type,
// variable-length strings, and the error stack. Every function takes plain hid_t values obtained
// from the binding's public ID methods.
#ifndef PACKER_HDF5_SHIM_H
#define PACKER_HDF5_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include "hdf5.h"

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

#endif
