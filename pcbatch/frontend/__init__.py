"""The Python-source frontend: a decorated function's source in, structured IR out.

fence (reject what cannot be batched) -> parse (stdlib ast, the user's line
numbers) -> to_ir (expressions become primitives, control flow becomes blocks).
"""
