"""Batched functions that must be rejected, one per error, with known line numbers.

Each function's offending line carries a ``# ERROR`` marker; tests find that
line and check the error points at it.
"""

import numpy as np

import pcbatch


def uses_try(x):
    try:  # ERROR
        y = x + 1
    except ValueError:
        y = x
    return y


def uses_with(x):
    with open("f") as fh:  # ERROR
        y = fh
    return y


def uses_yield(x):
    yield x  # ERROR


def uses_global(x):
    global COUNTER  # ERROR
    return x


def uses_nested_def(x):
    if x > 0:

        def inner(y):  # ERROR
            return y

        return inner(x)
    return x


def calls_through_variable(x):
    g = np.sqrt
    return g(x)  # ERROR


def comprehension_over_batched(v):
    return [e for e in v][0]  # ERROR


def item_assignment(v):
    v[0] = 1.0  # ERROR
    return v


def item_alias(v):
    buf = np.zeros(3)
    other = buf  # ERROR
    buf[0] = v
    return other


def item_range(v):
    buf = np.zeros((3, 3))
    n = int(v)
    buf[0, 0:n] = v  # ERROR
    return buf


def range_rebound(x):
    range = 3  # noqa: A001 - shadowing the builtin is the point
    total = 0
    for e in [1, 2, range]:  # ERROR
        total = total + e * x
    return total


def no_return_value(x):
    if x > 0:
        return  # ERROR
    return x


def falls_off_end(x):
    if x > 0:
        return x
    y = x  # ERROR


def varargs(*xs):  # ERROR
    return xs[0]


def walrus(x):
    if (y := x + 1) > 2:  # ERROR
        return y
    return x


def prints(x):
    print("x is", x)  # ERROR
    return x


def checks_isinstance(x):
    if isinstance(x, float):  # ERROR
        return x
    return x * 2


def checks_type(x):
    return x * 2 if type(x) == float else x  # ERROR  # noqa: E721


def type_conflict(x):
    if x > 0:
        y = np.zeros(2, dtype=np.int64)  # ERROR
    else:
        y = np.ones(3)  # ERROR
    return y


def vector_condition(v):
    if v > 0:  # ERROR
        return 1
    return 0


def raises_at_run_time(x):
    return checked_sqrt(x)  # ERROR


def checked_sqrt(x):
    if np.any(x < -5.0):
        raise ValueError("negative input to checked_sqrt")
    return np.sqrt(np.abs(x))


ALL = pcbatch  # keep the import used


def uses_del(x):
    y = x + 1
    del y  # ERROR
    return x


def uses_import(x):
    import math  # ERROR

    return x * math.pi


def uses_class(x):
    class Box:  # ERROR
        pass

    return x


def checks_id(x):
    return x if id(x) else x * 2  # ERROR


def rewritten_expression_fails(x):
    return (1 if x > 0 else 2) + len(x)  # ERROR
