// stitch/stitch.cuh: everything a generated kernel includes.
#pragma once
#include "stitch/types.cuh"
#include "stitch/math.cuh"
#include "stitch/vec.cuh"
#include "stitch/reduce.cuh"
#include "stitch/grid.cuh"
