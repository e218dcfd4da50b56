/*
 * DLPack exchange (issue 4): importing and exporting DLManagedTensor and
 * DLManagedTensorVersioned capsules for minifloat and NumPy dtypes.
 * Registered into minifloat._core by mf_init_dlpack().
 */
#include "minifloat.h"

static PyMethodDef dlpack_methods[] = {
    {NULL, NULL, 0, NULL},
};

int
mf_init_dlpack(PyObject *module)
{
    return PyModule_AddFunctions(module, dlpack_methods);
}
