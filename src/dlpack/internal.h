/*
 * What the parts of minifloat's DLPack layer share; nothing here is an API.
 *
 *   dlpack.h   the DLPack ABI (structs, versions, flags, capsule names)
 *   capsule.h  deleter calls, consumed capsules, producer capsules' destructor
 *              (shared with the test-only producer of the tests)
 *   common.c   registration into _core, the dtype mapping both ways, device
 *              names, copy= parsing
 *   import.c   from_dlpack: a producer's tensor becomes an ndarray
 *   export.c   __dlpack__: capsules of ndarrays (minifloat and NumPy dtypes)
 *   packing.c  DLPack's packed sub-byte layout <-> one value per byte
 */
#ifndef MF_DLPACK_INTERNAL_H
#define MF_DLPACK_INTERNAL_H

#include "../core/minifloat.h"
#include "dlpack.h"
#include "capsule.h"

typedef enum { COPY_IF_NEEDED = 0, COPY_ALWAYS = 1, COPY_NEVER = 2 } copy_mode;

/* ---- common.c ---- */
const char *mfdl_device_name(int32_t type);
/* copy=None/True/False -> mode; -1 with an error set */
int mfdl_parse_copy(PyObject *obj, copy_mode *mode);
/* DLPack (code, bits) -> dtype, or NULL without an error set */
PyArray_Descr *mfdl_descr_from_dl(int code, int bits, int *subbits);
/* dtype -> DLPack (code, bits); -1 with BufferError when not exportable */
int mfdl_dl_from_descr(PyArray_Descr *d, uint8_t *code, uint8_t *bits, int *subbyte);

/* ---- import.c ---- */
int mfdl_init_import(void);
extern PyMethodDef mfdl_import_methods[];

/* ---- export.c ---- */
/* a new C-contiguous array, 64-byte aligned (export.c says why) */
PyArrayObject *mfdl_new_aligned_array(PyArray_Descr *descr, int nd, const npy_intp *dims);
extern PyMethodDef mfdl_export_methods[];

/* ---- packing.c ---- */
PyObject *mfdl_unpack_subbyte(const mfdl_tensor *t, PyArray_Descr *descr, int bits, int lanes);
PyArrayObject *mfdl_pack_subbyte(PyArrayObject *arr, int bits);
extern PyMethodDef mfdl_packing_methods[];

#endif
