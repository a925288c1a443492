"""PyTorch hook: run the memory-bound parts of a model through Stitch, the rest through PyTorch.

Two front ends share one partitioner:

* ``torch.compile(model, backend="stitch")`` (PyTorch 2.x, the main path): Dynamo graphs, traced
  by AOTAutograd to aten forward and backward graphs, so training works; symbolic sizes become
  Stitch symbols. See _compile.
* ``stitch.torch.optimize(module_or_fn)`` (also PyTorch 1.13): ``torch.fx.symbolic_trace``,
  inference only; returns an ``nn.Module`` sharing the original's state. See _module.

Layout of the package, down the data flow:

    _compile (Dynamo/AOTAutograd entry)   _module (optimize, fx.symbolic_trace)
          |  _random (dropout: Philox)         |
          |  _aten_ops (aten converters)       |  _fx_ops (torch-level converters)
          +----------------+-------------------+
                           v
                _partition (support check, pieces, rewrite)  -> _builder (Stitch graphs)
                           v
                _piece (a Stitch program at run time)       -> stitch (the C API binding)
                _report (what was replaced, what fell back and why)
                _options (the settings: torch.compile's options, else the STITCH_* variables;
                          the engine each device's pieces run on)

``torch.compile(model, backend="stitch", options={...})`` takes backend, fusion, dump, dump_dir,
report, disable, plan_candidate and remote_cache, each defaulting to its STITCH_* variable
(_options); ``optimize`` takes the variables' settings. ``STITCH_DISABLE=1`` makes ``optimize``
return its argument untouched, and it (or the option ``disable``) makes the compile backend return
the graph unchanged. Every STITCH_* variable is checked when the hook is entered (the backend
when Dynamo hands it a graph, with its options; ``optimize`` when called and at the first call):
a bad value raises ``ValueError`` naming it (``stitch.check_environment``). Partition decisions
are logged at INFO on the ``stitch.torch`` logger, a piece that fails in Stitch (and runs eagerly
from then on) at WARNING.
"""

from __future__ import annotations

from ._compile import register as _register_backend
from ._module import StitchModule, optimize, supported_ops
from ._report import (CompileReport, GraphReport, StitchReport, all_reports, clear_reports,
                      last_report)

__all__ = ["optimize", "StitchModule", "supported_ops", "last_report", "all_reports",
           "clear_reports", "CompileReport", "GraphReport", "StitchReport"]

_register_backend()
