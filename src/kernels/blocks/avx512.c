/*
 * The block kernels' loops for the AVX-512 levels: avx2.c built again with
 * the avx512 level's flags, under its own table's name.  Where avx2.c has
 * a sixteen-lane form of a step (#ifdef __AVX512F__: the round trip's
 * elements), this build uses it; the rest is the AVX2 code as it is.  The
 * same operations lane for lane: bit-identical to serial.c, as the AVX2
 * build is.
 */
#define MF_BLOCK_OPS_NAME mf_block_ops_avx512
#include "avx2.c"
