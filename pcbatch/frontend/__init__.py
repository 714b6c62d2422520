"""The Python-source frontend: a decorated function's source in, structured IR out.

parse (stdlib ast, the user's line numbers) -> desugar (every ``for`` into a loop
over ``range``) -> fence (reject what cannot be batched) -> to_ir (expressions
become primitives, control flow becomes blocks).
"""

__all__ = ["Context", "truthy"]


def __getattr__(name: str):
    # The seed's ``frontend.Context`` and ``frontend.truthy`` (imported on first use:
    # the API module itself imports this package).
    if name == "Context":
        from pcbatch.api import Context

        return Context
    if name == "truthy":
        from pcbatch.frontend.runtime import truthy

        return truthy
    raise AttributeError(f"module 'pcbatch.frontend' has no attribute {name!r}")
