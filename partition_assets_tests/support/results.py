"""Reading the result of a run executed in this process (`dg.materialize`)."""

import dagster as dg


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    """The error of the run's first failed step; the run must have one."""
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failures, "the run was expected to fail"
    return failures[0].event_specific_data.error.to_string()
