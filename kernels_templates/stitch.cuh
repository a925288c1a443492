// stitch/stitch.cuh: every device template at once. Generated kernels include only the ones they
// use (codegen::deviceIncludes); this is for code written by hand (tests, experiments).
#pragma once
#include "stitch/check.cuh"
#include "stitch/grid.cuh"
#include "stitch/math.cuh"
#include "stitch/random.cuh"
#include "stitch/reduce.cuh"
#include "stitch/types.cuh"
#include "stitch/vec.cuh"
