"""What the benchmark parsers share: reading one printed figure."""
import math


def measured_value(text, error, where, kind=float):
    """`text` as a finite non-negative number, else `error` (the parser's exception class)
    naming where it was."""
    try:
        value = kind(text)
    except ValueError:
        raise error(f'{where}: {text!r} is not a number') from None

    if not math.isfinite(value) or value < 0:
        raise error(f'{where}: {text!r} is not a finite non-negative number')

    return value
