"""What the benchmark parsers share: the text as written anywhere, one printed figure, the
sizes a doubling sweep prints."""
import functools
import math


def any_newlines(parse):
    """Let a parser read output whose lines end in CRLF or CR (a file copied through
    Windows, a log written by a terminal) as if they ended in LF: its first argument is
    the text."""
    @functools.wraps(parse)
    def wrapper(text, *args, **kwargs):
        return parse(text.replace('\r\n', '\n').replace('\r', '\n'), *args, **kwargs)

    return wrapper


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


def doubling(first, last):
    """The sizes a sweep that doubles from `first` prints up to `last` (OSU's `-m first:last`,
    nccl-tests' `-b first -e last -f 2`)."""
    found, size = [], int(first)
    while size <= last:
        found.append(size)
        size *= 2
    return found
