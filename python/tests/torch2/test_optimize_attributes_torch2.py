"""stitch.torch.optimize's attribute tests (python/tests/test_optimize_attributes.py) on PyTorch
2.x, whose symbolic_trace makes tensor constants as 1.13's does (issue 33, item 5: "on 1.13 and
2.x")."""
from test_optimize_attributes import (  # noqa: F401  (pytest collects them here too)
    test_a_causal_mask_built_in_forward_runs_at_every_shape,
    test_every_attribute_the_graph_reads_is_read_at_every_call,
    test_state_replaced_between_optimize_and_the_first_call_is_read,
    test_the_trace_constants_belong_to_the_optimized_module)
