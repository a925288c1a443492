// stitch/stitch.cuh: everything a generated kernel includes.
#pragma once
#include "stitch/grid.cuh"
#include "stitch/math.cuh"
#include "stitch/random.cuh"
#include "stitch/reduce.cuh"
#include "stitch/types.cuh"
#include "stitch/vec.cuh"
