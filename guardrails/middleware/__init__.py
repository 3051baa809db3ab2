"""The choke-point pipelines. ``tool_call`` is the function-invocation middleware."""
