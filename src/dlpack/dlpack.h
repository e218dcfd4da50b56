/*
 * The DLPack ABI, version 1.3, declared here from the specification: the
 * structs producer and consumer exchange, the version, the flags, the device
 * types, the built-in dtype codes, the capsule names of the Python protocol
 * and the C exchange API (type(x).__dlpack_c_exchange_api__).
 *
 * Standalone (only <stdint.h>, no Python or NumPy): the test-only producer
 * (tests/dlpack_producer/producer.c) is built against this header too, so
 * the tests exchange tensors through the same declaration as the importer.
 * minifloat's own dtype codes are not here: they come from the format table
 * (mf_formats[].dlpack_code / dlpack_bits).
 */
#ifndef MF_DLPACK_DLPACK_H
#define MF_DLPACK_DLPACK_H

#include <stdint.h>

#define MFDL_MAJOR 1
#define MFDL_MINOR 3
/* sub-byte float codes and the IS_SUBBYTE_TYPE_PADDED flag exist since 1.1 */
#define MFDL_MINOR_SUBBYTE 1

enum { /* DLDataTypeCode: built-in codes; minifloat's come from the format table */
    MFDL_INT = 0, MFDL_UINT = 1, MFDL_FLOAT = 2, MFDL_OPAQUE_HANDLE = 3,
    MFDL_BFLOAT = 4, MFDL_COMPLEX = 5, MFDL_BOOL = 6,
};

enum { /* DLDeviceType */
    MFDL_CPU = 1, MFDL_CUDA = 2, MFDL_CUDA_HOST = 3, MFDL_ROCM = 10,
    MFDL_ROCM_HOST = 11, MFDL_CUDA_MANAGED = 13, MFDL_NUM_DEVICE_NAMES = 19,
};

#define MFDL_FLAG_READ_ONLY       (UINT64_C(1) << 0)
#define MFDL_FLAG_IS_COPIED       (UINT64_C(1) << 1)
#define MFDL_FLAG_SUBBYTE_PADDED  (UINT64_C(1) << 2)

typedef struct { uint32_t major, minor; } mfdl_version;
typedef struct { int32_t device_type, device_id; } mfdl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } mfdl_dtype;

typedef struct {
    void *data;
    mfdl_device device;
    int32_t ndim;
    mfdl_dtype dtype;
    int64_t *shape;
    int64_t *strides;      /* in elements; NULL means C-contiguous (before 1.2) */
    uint64_t byte_offset;
} mfdl_tensor;

typedef struct mfdl_managed {            /* DLManagedTensor (legacy, "dltensor") */
    mfdl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct mfdl_managed *self);
} mfdl_managed;

typedef struct mfdl_managed_v {          /* DLManagedTensorVersioned */
    mfdl_version version;
    void *manager_ctx;
    void (*deleter)(struct mfdl_managed_v *self);
    uint64_t flags;
    mfdl_tensor dl_tensor;
} mfdl_managed_v;

/* The C exchange API (DLPack 1.3): type(x).__dlpack_c_exchange_api__ */
typedef struct mfdl_api_header {
    mfdl_version version;
    struct mfdl_api_header *prev_api;
} mfdl_api_header;

typedef struct {
    mfdl_api_header header;
    int (*managed_tensor_allocator)(mfdl_tensor *prototype, mfdl_managed_v **out, void *error_ctx,
                                    void (*set_error)(void *, const char *, const char *));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, mfdl_managed_v **out);
    int (*managed_tensor_to_py_object_no_sync)(mfdl_managed_v *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, mfdl_tensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} mfdl_exchange_api;

/* Capsule names of the Python protocol.  A capsule keeps a pointer to its
 * name, so these must be static strings; consumers compare them by content. */
#define MFDL_NAME_LEGACY         "dltensor"
#define MFDL_NAME_VERSIONED      "dltensor_versioned"
#define MFDL_NAME_USED_LEGACY    "used_dltensor"
#define MFDL_NAME_USED_VERSIONED "used_dltensor_versioned"
#define MFDL_NAME_API            "dlpack_exchange_api"

#endif
